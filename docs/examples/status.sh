cascade status
cascade status -o json | jq -c '{leader: .leader.pod, mode: .leader.mode, synced: .leader.synced, policy: .leader.policy.source}'
kubectl -n cascade-system get lease cascade -o jsonpath='{.metadata.annotations}{"\n"}'
