kubectl get apiservices | grep False
kubectl get apiservice v1beta1.metrics.k8s.io -o jsonpath='{.status.conditions[?(@.type=="Available")].message}{"\n"}'
kubectl -n cascade-system logs -l app.kubernetes.io/name=cascade --tail=-1 > cascade.log  # needs a node
grep -E 'Failed to discover API group|Discovery failed' cascade.log | tail -n 3
curl -sk -H "Authorization: Bearer $TOKEN" "https://$METRICS/metrics" | grep '^cascade_discovery_errors_total'
