kubectl delete apiservice v1alpha1.debug.cascade.dev --ignore-not-found   # first, while cascade still answers
kubectl -n cascade-system scale deployment cascade --replicas=0
cascade uninstall --dry-run
cascade uninstall
helm -n cascade-system uninstall cascade
kubectl delete namespace cascade-system
