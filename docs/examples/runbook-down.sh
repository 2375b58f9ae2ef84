kubectl -n cascade-system get deployment,pods -l app.kubernetes.io/name=cascade
kubectl -n cascade-system describe pods -l app.kubernetes.io/name=cascade
kubectl -n cascade-system logs deploy/cascade --previous  # needs a node
curl -s "http://$HEALTH/readyz"
kubectl get clusterrolebinding -o wide | grep cascade-metrics-reader
kubectl -n cascade-system get endpointslices -l kubernetes.io/service-name=cascade-metrics
