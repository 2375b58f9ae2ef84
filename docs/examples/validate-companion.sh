cat > policy.yaml <<'POLICY'
apiVersion: cascade.dev/v1alpha1
kind: Policy
rules:
  - resource: configmaps
    collect: Never
POLICY
cascade policy validate --mode=companion -f policy.yaml
# warning: rules[0].collect: Invalid value: "Never": not enforced in companion mode: ...
