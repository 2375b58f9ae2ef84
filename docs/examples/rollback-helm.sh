helm -n cascade-system rollback cascade 1
kubectl -n cascade-system get deployment cascade -o jsonpath='{.spec.template.spec.containers[0].image}{"\n"}'
