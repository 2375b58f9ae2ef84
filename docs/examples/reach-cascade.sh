kubectl -n cascade-system port-forward deploy/cascade 8081 8443 >/dev/null &  # needs a node
HEALTH=${HEALTH:-localhost:8081} METRICS=${METRICS:-localhost:8443}
TOKEN=$(kubectl -n monitoring create token prometheus-k8s)    # any identity bound to cascade-metrics-reader
