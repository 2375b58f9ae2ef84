kubectl apply -f cascade/deploy/base/namespace.yaml        # labelled for the restricted Pod Security Standard (install.md)
helm install cascade cascade/deploy/chart -n cascade-system --set mode=dry-run --set image.repository=registry.example.com/cascade --set image.tag=v0.1.0
