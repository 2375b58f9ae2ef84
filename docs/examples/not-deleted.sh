cascade explain configmap/web-config -n shop
kubectl -n shop get configmap web-config -o jsonpath='{.metadata.ownerReferences}{"\n"}'
kubectl -n shop get events --field-selector involvedObject.name=web-config
curl -s "http://$HEALTH/readyz"
curl -sk -H "Authorization: Bearer $TOKEN" "https://$METRICS/metrics" | grep -E '^cascade_(resource_unsynced|worker_errors_total|workqueue_depth)'
