kubectl get events -A --field-selector reason=DeletionStuck
cascade explain configmap/web -n shop
kubectl -n shop get configmap web -o jsonpath='{.metadata.finalizers}{"\n"}'
kubectl -n shop get configmap web-config -o jsonpath='{.metadata.finalizers}{"\n"}'
curl -sk -H "Authorization: Bearer $TOKEN" "https://$METRICS/metrics" | grep -E '^cascade_(oldest_waiting_owner_seconds|owners_waiting)'
