// Package finalizers will finish owners that kube-apiserver marked for orphan or foreground
// deletion: for `orphan`, remove the owner's reference from every dependent and then the
// finalizer; for `foregroundDeletion`, delete the dependents and remove the finalizer once no
// dependent with blockOwnerDeletion=true remains. It is level-driven: every owner that carries
// a GC finalizer is re-checked until it is done. Pure planning functions return patch bodies;
// the executor applies them with preconditions. (Not built yet: see issue 5.)
package finalizers
