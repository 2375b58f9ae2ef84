mkdir -p my-cascade
cat > my-cascade/kustomization.yaml <<'KUSTOMIZATION'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../cascade/deploy/base       # or ../cascade/deploy/overlays/companion, ../cascade/deploy/overlays/shadow
components:
  - ../cascade/deploy/components/monitoring
  # - ../cascade/deploy/components/aggregated-api   # opt-in: explain through the API server (docs/security.md)
images:
  - name: ghcr.io/cascade-gc/cascade
    newName: registry.example.com/cascade
    newTag: v0.1.0
KUSTOMIZATION
kubectl apply -f cascade/deploy/base/namespace.yaml        # the server-side dry run needs the namespace
kubectl apply --dry-run=server -k my-cascade
kubectl apply -k my-cascade
kubectl create clusterrolebinding prometheus-cascade-metrics --clusterrole=cascade-metrics-reader --serviceaccount=monitoring:prometheus-k8s
