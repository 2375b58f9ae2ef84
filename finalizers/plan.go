package finalizers

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
)

// The functions in this file decide; they do no I/O and read no clock, so they are tested on
// their own. processor.go, orphan.go and foreground.go carry the decisions out through package
// client, which builds every patch.

// Work says which GC finalizers of an owner are cascade's to finish now.
type Work struct {
	// Orphan: the owner is being deleted with the orphan finalizer: remove its reference from
	// every dependent, then the finalizer.
	Orphan bool
	// Foreground: the owner is being deleted with the foregroundDeletion finalizer: remove the
	// finalizer once no dependent blocks it.
	Foreground bool
}

// None reports whether there is nothing to do.
func (w Work) None() bool { return !w.Orphan && !w.Foreground }

// PlanOwner returns the work on the graph's node of an owner. Only an observed object that is
// being deleted has work: a GC finalizer on a live object (a default policy applied at
// creation) is the API server's to act on when the object is deleted, never cascade's.
func PlanOwner(n graph.NodeView, found bool) Work {
	if !found || n.Virtual || n.Absent || !n.Deleting {
		return Work{}
	}
	return Work{
		Orphan:     n.Finalizers.Has(graph.FinalizerOrphan),
		Foreground: n.Finalizers.Has(graph.FinalizerForeground),
	}
}

// PlanOrphan returns the dependents still to patch: those in deps that are not in patched
// (already done during this owner's deletion), each once, in the order of deps. Dependents whose
// resource resolve does not know (no longer watched) cannot be addressed and come back in
// unresolved.
func PlanOrphan(deps []graph.Ref, patched map[types.UID]struct{}, resolve func(apiVersion, kind string) (gc.Resource, bool)) (todo []client.Target, unresolved []graph.Ref) {
	seen := make(map[types.UID]struct{}, len(deps))
	for _, d := range deps {
		if _, ok := patched[d.UID]; ok {
			continue
		}
		if _, ok := seen[d.UID]; ok {
			continue
		}
		seen[d.UID] = struct{}{}
		res, ok := resolve(d.APIVersion, d.Kind)
		if !ok {
			unresolved = append(unresolved, d)
			continue
		}
		ns := d.Namespace
		if !res.Namespaced {
			ns = ""
		}
		todo = append(todo, client.Target{GVR: res.GVR, Namespace: ns, Name: d.Name, UID: d.UID})
	}
	return todo, unresolved
}
