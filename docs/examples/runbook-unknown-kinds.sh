cascade explain configmap/legacy-config -n shop
curl -sk -H "Authorization: Bearer $TOKEN" "https://$METRICS/metrics" | grep '^cascade_rest_mapping_errors_total'
kubectl -n cascade-system logs -l app.kubernetes.io/name=cascade --tail=-1 > cascade.log  # needs a node
grep -E 'no matches for kind|without REST mapping' cascade.log | tail -n 3
kubectl api-resources --api-group=apps
