kubectl apply -f cascade/deploy/base/namespace.yaml
helm install cascade cascade/deploy/chart -n cascade-system --set image.repository=registry.example.com/cascade --set image.tag=v0.1.0
helm -n cascade-system status cascade
