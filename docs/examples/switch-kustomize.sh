kubectl apply -k cascade/deploy/base
