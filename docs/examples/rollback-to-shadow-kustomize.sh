kubectl apply -k cascade/deploy/overlays/shadow
kubectl -n cascade-system delete poddisruptionbudget/cascade role/cascade-leader-election rolebinding/cascade-leader-election role/cascade-orphan-record rolebinding/cascade-orphan-record
