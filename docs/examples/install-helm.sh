cat > values.yaml <<'VALUES'
mode: collector                  # companion beside the in-tree collector; dry-run to shadow it
image:
  repository: registry.example.com/cascade
  tag: v0.1.0                    # or digest: sha256:..., which wins
monitoring:
  serviceMonitor: {enabled: true}
  prometheusRule: {enabled: true}
  dashboard: {enabled: true}
  metricsReaders:                # bound to the ClusterRole cascade-metrics-reader
    - {namespace: monitoring, name: prometheus-k8s}
VALUES
kubectl apply -f cascade/deploy/base/namespace.yaml
helm install cascade cascade/deploy/chart -n cascade-system -f values.yaml
kubectl -n cascade-system get deployment,servicemonitor,prometheusrule,configmap
