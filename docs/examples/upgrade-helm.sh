helm -n cascade-system upgrade cascade cascade/deploy/chart -f values.yaml --set image.tag=v0.2.0
helm -n cascade-system history cascade
