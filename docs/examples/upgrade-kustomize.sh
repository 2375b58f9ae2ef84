sed -i 's/newTag: v0.1.0/newTag: v0.2.0/' my-cascade/kustomization.yaml
kubectl apply --dry-run=server -k my-cascade
kubectl apply -k my-cascade
