package policy

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultIgnoredResources returns the resources the in-tree garbage collector
// ignores: core and events.k8s.io events. Their REST strategies report
// garbage collection as unsupported, so they never get GC finalizers, and
// watching them would only cost memory. The result is a new slice on every
// call. (They are the default of --ignored-resources; a policy's
// ignoredResources add to that flag.)
func DefaultIgnoredResources() []GroupResource {
	return []GroupResource{
		{Group: "", Resource: "events"},
		{Group: "events.k8s.io", Resource: "events"},
	}
}

// BuiltinPropagation is what kube-apiserver does with the dependents of an
// object of gr deleted without a propagation policy (and without a GC
// finalizer): Orphan for replicationcontrollers and jobs.batch (for every
// version still served; Job deletes also get a warning), Background for every
// other resource, custom resources included.
func BuiltinPropagation(gr GroupResource) metav1.DeletionPropagation {
	if slices.Contains(builtinOrphans, gr) {
		return metav1.DeletePropagationOrphan
	}
	return metav1.DeletePropagationBackground
}

// builtinOrphans are the resources whose built-in default propagation is Orphan (a default of
// Background cannot be applied to them: Validate and the schema refuse it).
var builtinOrphans = []GroupResource{
	{Resource: "replicationcontrollers"},
	{Group: "batch", Resource: "jobs"},
}
