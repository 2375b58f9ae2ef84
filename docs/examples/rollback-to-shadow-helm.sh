helm upgrade cascade cascade/deploy/chart -n cascade-system --reuse-values --set mode=dry-run
