kubectl apply -f cascade/deploy/base/namespace.yaml        # the server-side dry run needs the namespace
kubectl apply --dry-run=server -k cascade/deploy/overlays/shadow
kubectl apply -k cascade/deploy/overlays/shadow
