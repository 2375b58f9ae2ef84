helm -n cascade-system upgrade cascade cascade/deploy/chart -f values.yaml --set 'extraArgs={--logging-format=json,--v=2}'
kubectl -n cascade-system get deployment cascade -o jsonpath='{.spec.template.spec.containers[0].args}{"\n"}'
