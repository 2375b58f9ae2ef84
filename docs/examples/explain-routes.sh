cascade explain configmap/web-config -n shop -o json | jq -c .decision
kubectl get --raw '/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations/web-config?resource=configmaps' | jq -c .decision
cascade explain configmap/web-config -n shop --url "https://$METRICS" --insecure-skip-tls-verify -o json | jq -c .decision
