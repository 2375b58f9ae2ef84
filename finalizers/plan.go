package finalizers

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
)

// The functions in this file decide; they do no I/O and read no clock, so they are tested on
// their own. processor.go, orphan.go and foreground.go carry the decisions out.

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

// Dependent is one object to patch the owner's reference out of, with the resource to address
// it by.
type Dependent struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
	UID       types.UID
}

func (d Dependent) String() string {
	return gc.GVRString(d.GVR) + " " + d.Namespace + "/" + d.Name + " (" + string(d.UID) + ")"
}

// PlanOrphan returns the dependents still to patch: those in deps that are not in patched
// (already done during this owner's deletion), each once, in the order of deps. Dependents whose
// resource resolve does not know (no longer watched) cannot be addressed and come back in
// unresolved.
func PlanOrphan(deps []graph.Ref, patched map[types.UID]struct{}, resolve func(apiVersion, kind string) (gc.Resource, bool)) (todo []Dependent, unresolved []graph.Ref) {
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
		todo = append(todo, Dependent{GVR: res.GVR, Namespace: ns, Name: d.Name, UID: d.UID})
	}
	return todo, unresolved
}

// RemainingFinalizers returns fs without every occurrence of finalizer, and whether it was
// there. The input is not modified; every other finalizer keeps its place.
func RemainingFinalizers(fs []string, finalizer string) ([]string, bool) {
	if !slices.Contains(fs, finalizer) {
		return fs, false
	}
	out := make([]string, 0, len(fs)-1)
	for _, f := range fs {
		if f != finalizer {
			out = append(out, f)
		}
	}
	return out, true
}

// PlanFinalizerRemoval returns the JSON merge patch that removes finalizer from live, the
// object as just read, or ok=false when nothing must be patched: the name now holds another
// object than uid, the object is not being deleted (a GC finalizer on a live object is a
// default policy, not cascade's to remove), or the finalizer is already gone. The patch
// carries live's resourceVersion, so it fails with 409 if the object changed since it was
// read, and names every other finalizer, so none is lost.
func PlanFinalizerRemoval(live *metav1.PartialObjectMetadata, uid types.UID, finalizer string) (patch []byte, ok bool) {
	if live.UID != uid || live.DeletionTimestamp == nil {
		return nil, false
	}
	remaining, found := RemainingFinalizers(live.Finalizers, finalizer)
	if !found {
		return nil, false
	}
	return gc.RemoveFinalizerJMP(live.ResourceVersion, remaining), true
}

// ForegroundStep is what to do next for an owner being deleted in the foreground.
type ForegroundStep struct {
	// RemoveFinalizer: no dependent blocks the owner any more.
	RemoveFinalizer bool
	// Kick: ask the collector to decide again on every dependent. The graph asked once when
	// the owner entered foreground deletion; this repeats it at most once per period as a
	// safety net, so nothing depends on that one request having led anywhere.
	Kick bool
	// KickedAt is the time of the last kick to remember (the first sighting counts as one).
	KickedAt time.Time
}

// PlanForeground decides for an owner with blocking dependents left, kickedAt being the time
// of the last kick (zero: never seen before).
func PlanForeground(blocking int, kickedAt, now time.Time, period time.Duration) ForegroundStep {
	switch {
	case blocking == 0:
		return ForegroundStep{RemoveFinalizer: true, KickedAt: kickedAt}
	case kickedAt.IsZero():
		return ForegroundStep{KickedAt: now}
	case now.Sub(kickedAt) >= period:
		return ForegroundStep{Kick: true, KickedAt: now}
	default:
		return ForegroundStep{KickedAt: kickedAt}
	}
}
