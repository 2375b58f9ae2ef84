{{/*
The labels of every object: the selector label deploy/base puts on everything
(app.kubernetes.io/name: cascade) and Helm's usual ones.
*/}}
{{- define "cascade.labels" -}}
{{ include "cascade.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "cascade.selectorLabels" -}}
app.kubernetes.io/name: cascade
{{- end }}

{{/* Whether cascade takes the Lease: never in dry-run mode, which writes nothing. */}}
{{- define "cascade.leaderElect" -}}
{{- if and .Values.leaderElection.enabled (ne .Values.mode "dry-run") }}true{{ end }}
{{- end }}

{{/* The replicas: as set, else 2 with leader election and 1 without. */}}
{{- define "cascade.replicas" -}}
{{- if not (kindIs "invalid" .Values.replicas) }}{{ .Values.replicas }}
{{- else if include "cascade.leaderElect" . }}2
{{- else }}1
{{- end }}
{{- end }}

{{/* The image: by digest when one is given, else by tag (default: the chart's appVersion). */}}
{{- define "cascade.image" -}}
{{- if .Values.image.digest }}{{ printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}{{ printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}
