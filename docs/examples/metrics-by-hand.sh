kubectl -n cascade-system port-forward deploy/cascade 8443 >/dev/null &  # needs a node
METRICS=${METRICS:-localhost:8443}
TOKEN=$(kubectl -n monitoring create token prometheus-k8s)    # any identity bound to cascade-metrics-reader
curl -sSfk -H "Authorization: Bearer $TOKEN" "https://$METRICS/metrics" | grep '^cascade_build_info'
