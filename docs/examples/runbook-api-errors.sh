curl -sk -H "Authorization: Bearer $TOKEN" "https://$METRICS/metrics" | grep -E '^cascade_(api_requests_total|worker_errors_total)'
kubectl auth can-i delete configmaps --as=system:serviceaccount:cascade-system:cascade   # the resource whose requests fail
kubectl get --raw /metrics | grep -E '^apiserver_flowcontrol_(dispatched|rejected)_requests_total\{flow_schema="cascade"'
