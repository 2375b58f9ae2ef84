kubectl delete -k cascade/deploy/base --ignore-not-found   # the base, or the shadow overlay step 1 put back
