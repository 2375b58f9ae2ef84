package gc

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
)

// Dependents that wait on an undecided owner, decided again once another reference stops
// holding the decision back.

// TestScenarioWaitEndsWhenOwnerObserved (the chaos suite's cm-947, seed 1): a Widget dependent
// of a Gizmo g and of a Widget w. gizmos stops being watched (its CRD missed from discovery
// while the apiserver restarted), so the reference to g is undecided; w is deleted: with no
// solid owner and one unknown, the dependent waits and nothing is done. gizmos is watched
// again and g is listed being deleted with the orphan policy: its reference is solid now, and
// the dependent must be decided again (before, nothing put it back in the queue: only a
// reference entering a state to act on did). The orphaning of g drops its reference before the
// worker gets there: the dependent, left with the absent w only, is collected. Had the worker
// come first, it would have removed the reference to w (a solid owner remained), as in-tree.
// Never deleted: the dependent while g is solid.
func TestScenarioWaitEndsWhenOwnerObserved(t *testing.T) {
	g := scObj(scGizmos, "g", "u-g", "1")
	w := scObj(scWidgets, "w", "u-w", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(g), gctest.RefTo(w))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets, scGizmos}, objects: []runtime.Object{g, w, dep}})
	s.observe(g, w, dep)
	s.AssertOwnerStates("u-dep", graph.OwnerPresent, graph.OwnerPresent)

	s.unwatch(scGizmos)
	s.AssertOwnerStates("u-dep", graph.OwnerUnknown, graph.OwnerPresent)
	s.assertQueued(nil, []graph.Ref{scClaim(g, "ns")})

	s.deleteLive(w)
	s.observeDeleted(w)
	s.AssertOwnerStates("u-dep", graph.OwnerUnknown, graph.OwnerAbsent)
	s.assertQueued([]types.UID{"u-dep"}, []graph.Ref{scClaim(g, "ns")})
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done") // waits for g's claim
	s.AssertActions()

	s.watch(scGizmos)
	gOrphaning := scDeleting(g, "2", metav1.FinalizerOrphanDependents)
	s.setLive(gOrphaning)
	s.relist(scGizmos, gOrphaning)
	s.AssertOwnerStates("u-dep", graph.OwnerBeingDeleted, graph.OwnerAbsent)
	s.assertQueued([]types.UID{"u-dep"}, []graph.Ref{scClaim(g, "ns")})

	// The orphaner (finalizers) removes the reference to g first.
	s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) {
		o.ResourceVersion = "4"
		o.OwnerReferences = o.OwnerReferences[1:]
	}))
	s.deliver(dep)
	s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=4 propagation=Background")
}

// TestScenarioDroppedReferenceLeavesAbsentOwner: a dependent of a ConfigMap (never watched: its
// claim is checked live, and the check keeps failing) and of a Widget w, deleted: the dependent
// waits for the ConfigMap's claim. Its reference to the ConfigMap is then removed (by a user,
// or by the orphaning of that owner): the dependent, left with the absent w only, must be
// decided again and collected (before, dropping a reference put nothing in the queue, and it
// stayed forever). Never deleted: the dependent while the ConfigMap's claim is undecided.
func TestScenarioDroppedReferenceLeavesAbsentOwner(t *testing.T) {
	cm := scObj(scConfigMaps, "cm", "u-cm", "1")
	w := scObj(scWidgets, "w", "u-w", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(cm), gctest.RefTo(w))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, mapped: []Resource{scConfigMaps}, objects: []runtime.Object{cm, w, dep}})
	s.observe(w, dep)
	s.assertQueued(nil, []graph.Ref{scClaim(cm, "ns")})
	s.failNext("get", apierrors.NewServiceUnavailable("etcd is restarting"))
	s.processVerifies()
	s.AssertOutcomes("verify u-cm: Retry error")
	s.AssertActions("GET configmaps.v1 ns/cm")

	s.deleteLive(w)
	s.observeDeleted(w)
	s.AssertOwnerStates("u-dep", graph.OwnerUnknown, graph.OwnerAbsent)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done") // waits for the ConfigMap's claim
	s.AssertActions()

	s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) {
		o.ResourceVersion = "4"
		o.OwnerReferences = o.OwnerReferences[1:]
	}))
	s.deliver(dep)
	s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
	s.assertQueued([]types.UID{"u-dep"}, nil)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=4 propagation=Background")
}
