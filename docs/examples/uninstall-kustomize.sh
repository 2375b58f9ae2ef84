kubectl delete apiservice v1alpha1.debug.cascade.dev --ignore-not-found   # first, while cascade still answers
kubectl -n cascade-system scale deployment cascade --replicas=0
cascade uninstall --dry-run
cascade uninstall
kubectl delete -k my-cascade
kubectl delete clusterrolebinding prometheus-cascade-metrics
