kubectl delete apiservice v1alpha1.debug.cascade.dev --ignore-not-found   # first, while cascade still answers
helm -n cascade-system uninstall cascade   # its pre-delete hook stops cascade and runs cascade uninstall
kubectl delete namespace cascade-system
