sed -i 's/newTag: v0.2.0/newTag: v0.1.0/' my-cascade/kustomization.yaml
kubectl apply -k my-cascade
kubectl -n cascade-system get deployment cascade -o jsonpath='{.spec.template.spec.containers[0].image}{"\n"}'
