cascade status
kubectl -n cascade-system get pods -l app.kubernetes.io/name=cascade
kubectl -n cascade-system auth can-i update leases.coordination.k8s.io/cascade --as=system:serviceaccount:cascade-system:cascade
kubectl -n cascade-system logs -l app.kubernetes.io/name=cascade --tail=-1 > cascade.log  # needs a node
grep -E 'Elected leader|leases\.coordination' cascade.log
