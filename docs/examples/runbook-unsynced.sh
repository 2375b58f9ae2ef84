curl -s "http://$HEALTH/readyz"
cascade status
curl -sk -H "Authorization: Bearer $TOKEN" "https://$METRICS/metrics" | grep '^cascade_resource_unsynced'
kubectl -n cascade-system logs -l app.kubernetes.io/name=cascade --tail=-1 > cascade.log  # needs a node
grep 'Cannot list or watch resource' cascade.log | tail -n 3
kubectl auth can-i list widgets.example.com --as=system:serviceaccount:cascade-system:cascade
kubectl get crd widgets.example.com -o jsonpath='{.spec.conversion.strategy} {.spec.conversion.webhook.clientConfig.service}{"\n"}'
