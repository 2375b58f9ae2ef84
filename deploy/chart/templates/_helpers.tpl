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

{{/*
Fleet mode's host namespace of the members' kubeconfig Secrets (fleet.secretsNamespace or
fleet.clusterAPINamespace, which the schema keeps to one): fleet mode is on when it is not empty.
*/}}
{{- define "cascade.fleetNamespace" -}}
{{- default .Values.fleet.clusterAPINamespace .Values.fleet.secretsNamespace }}
{{- end }}

{{/* The replicas: as set, else 2 with leader election and 1 without. */}}
{{- define "cascade.replicas" -}}
{{- if not (kindIs "invalid" .Values.replicas) }}{{ .Values.replicas }}
{{- else if include "cascade.leaderElect" . }}2
{{- else }}1
{{- end }}
{{- end }}

{{/* A fleet's shards (--fleet-shards): fleet.shards, else the replica count; "" when not a fleet or
one shard. */}}
{{- define "cascade.fleetShards" -}}
{{- if include "cascade.fleetNamespace" . }}
{{- $n := 0 }}
{{- if not (kindIs "invalid" .Values.fleet.shards) }}{{ $n = int .Values.fleet.shards }}
{{- else }}{{ $n = int (include "cascade.replicas" .) }}
{{- end }}
{{- if gt $n 1 }}{{ $n }}{{ end }}
{{- end }}
{{- end }}

{{/* The image: by digest when one is given, else by tag (default: the chart's appVersion). */}}
{{- define "cascade.image" -}}
{{- if .Values.image.digest }}{{ printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}{{ printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Where the Secret tls.secretName is mounted in cascade's container. */}}
{{- define "cascade.tlsDir" -}}
/etc/cascade/tls
{{- end }}

{{/*
The Secret that holds the CA of cascade's serving certificate, for whoever verifies it (the
ServiceMonitor, the helm test): monitoring.serviceMonitor.ca.secretName, else tls.secretName
(cert-manager writes the issuer's CA into the certificate's Secret as ca.crt). Empty: no CA,
cascade's certificate is self-signed.
*/}}
{{- define "cascade.caSecretName" -}}
{{- default .Values.tls.secretName .Values.monitoring.serviceMonitor.ca.secretName }}
{{- end }}

{{/* The name cascade's certificate is verified for: the Service cascade-metrics. */}}
{{- define "cascade.serverName" -}}
cascade-metrics.{{ .Release.Namespace }}.svc
{{- end }}

{{/*
The labels of the helm test's objects: not cascade's selector label, so that neither the
Service cascade-metrics, the NetworkPolicy nor the PodDisruptionBudget selects the test Pod.
*/}}
{{- define "cascade.testLabels" -}}
app.kubernetes.io/name: cascade-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
The annotations of the helm test's objects: hooks of helm test, deleted once the test passed
(kept after a failure, for kubectl logs, until the next helm test recreates them). weight: the
Pod (0) after what it needs (-1).
*/}}
{{- define "cascade.testHook" -}}
helm.sh/hook: test
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}

{{/*
The labels of the uninstall hook's Job and pod: not cascade's selector label, so that the stop
it makes (no pod of cascade's left) never waits for itself.
*/}}
{{- define "cascade.uninstallLabels" -}}
app.kubernetes.io/name: cascade-uninstall
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}
