AUDIT_LOG=${AUDIT_LOG:-/var/log/kubernetes/audit/audit.log}   # kube-apiserver's --audit-log-path
jq -c 'select(.user.username == "system:serviceaccount:cascade-system:cascade" and .verb == "delete" and .objectRef.name == "old-config")
  | {time: .requestReceivedTimestamp, namespace: .objectRef.namespace, resource: .objectRef.resource, name: .objectRef.name, code: .responseStatus.code}' "$AUDIT_LOG"
kubectl -n cascade-system logs deploy/cascade > cascade.log  # needs a node
jq -cR 'fromjson? | select(.msg == "Deleted dependent whose owners are gone" and (.object | contains("name: old-config,")))' cascade.log
