package gc

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/policy"
)

// The writes of a collection (DELETE, reference removal) never go on a decision the live object
// has outgrown: preconditions from the graph's view, and on a conflict the live object read.

// TestScenarioDeleteConflict (issue 10, item 6): the DELETE carries the graph's resourceVersion.
// When the live object changed its owner references meanwhile, the server answers 409, a GET
// shows the change and no second DELETE is sent: the watch event on its way is decided on
// (here: a new live owner, so only the dangling reference goes). When only the
// resourceVersion changed, the DELETE is sent again at the live resourceVersion.
func TestScenarioDeleteConflict(t *testing.T) {
	t.Run("owners changed", func(t *testing.T) {
		owner := scObj(scWidgets, "owner", "u-owner", "1")
		adopter := scObj(scWidgets, "adopter", "u-adopter", "1")
		dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(owner))
		s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{adopter, dep}})
		s.observe(owner, adopter, dep)
		s.observeDeleted(owner)
		s.assertQueued([]types.UID{"u-dep"}, nil)
		adopted := scWith(dep, func(o *metav1.PartialObjectMetadata) {
			o.ResourceVersion = "4"
			o.OwnerReferences = append(o.OwnerReferences, gctest.RefTo(adopter))
		})
		s.setLive(adopted) // the watch has not delivered it yet
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Retry")
		s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background", "GET widgets.v1.example.com ns/dep")
		s.AssertLiveOwners(dep, "u-owner", "u-adopter")

		s.deliver(dep)
		s.AssertOwnerStates("u-dep", graph.OwnerAbsent, graph.OwnerPresent)
		s.retryPending()
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Done")
		s.AssertActions(`PATCH widgets.v1.example.com ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"4","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`)
		s.AssertLiveOwners(dep, "u-adopter")
	})
	t.Run("only resourceVersion changed", func(t *testing.T) {
		owner := scObj(scWidgets, "owner", "u-owner", "1")
		dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(owner))
		s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{dep}})
		s.observe(owner, dep)
		s.observeDeleted(owner)
		s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) { o.ResourceVersion = "4" })) // a label changed
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Done")
		s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background", "GET widgets.v1.example.com ns/dep",
			"DELETE widgets.v1.example.com ns/dep uid=u-dep rv=4 propagation=Background")
	})
	t.Run("only resourceVersion changed, duplicate references", func(t *testing.T) {
		// sameOwners (gc/workers.go) collapses identical duplicates as the graph does, so the
		// DELETE goes again at the live resourceVersion instead of waiting for the watch event.
		owner := scObj(scWidgets, "owner", "u-owner", "1")
		dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(owner), gctest.Blocking(gctest.RefTo(owner)))
		s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{dep}})
		s.observe(owner, dep)
		s.observeDeleted(owner)
		s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) { o.ResourceVersion = "4" }))
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Done")
		s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background", "GET widgets.v1.example.com ns/dep",
			"DELETE widgets.v1.example.com ns/dep uid=u-dep rv=4 propagation=Background")
	})
}

// TestScenarioKeeperDroppedBeforeThePatch (issue 14, found by the chaos suite: gad-835): the
// dependent references a deleted owner and a live one; cascade decides to remove the stale
// reference (the live owner keeps it). Before the patch, the user drops the live owner's
// reference, and the watch has not delivered it. Removing the stale reference now would leave
// the object owned by nobody, never collected, where its only owner is gone: the patch carries the
// view's resourceVersion, the 409's GET finds no keeper, and nothing is sent. Once the watch
// delivers the change, the dependent is collected. When only the resourceVersion moved on (a
// label changed) and the keeper is still referenced, the stale reference goes at the live
// resourceVersion instead.
func TestScenarioKeeperDroppedBeforeThePatch(t *testing.T) {
	// dep references gone (observed deleted) and keeper (present); it is queued.
	keeperScenario := func(t *testing.T) (*scenario, *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadata) {
		gone := scObj(scWidgets, "gone", "u-gone", "1")
		keeper := scObj(scWidgets, "keeper", "u-keeper", "1")
		dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(gone), gctest.RefTo(keeper))
		s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{keeper, dep}})
		s.observe(gone, keeper, dep)
		s.observeDeleted(gone)
		return s, gone, dep
	}
	t.Run("keeper dropped", func(t *testing.T) {
		s, gone, dep := keeperScenario(t)
		s.assertQueued([]types.UID{"u-dep"}, nil)
		dropped := scWith(dep, func(o *metav1.PartialObjectMetadata) {
			o.ResourceVersion = "4"
			o.OwnerReferences = []metav1.OwnerReference{gctest.RefTo(gone)}
		})
		s.setLive(dropped) // the watch has not delivered it yet
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Retry")
		s.AssertActions(`PATCH widgets.v1.example.com ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"$patch":"delete","uid":"u-gone"}]}}`,
			"GET widgets.v1.example.com ns/dep")
		s.AssertLiveOwners(dep, "u-gone") // the reference to the gone owner stays: it is why dep goes

		s.deliver(dropped)
		s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
		s.retryPending()
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Done")
		s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=4 propagation=Background")
	})
	t.Run("only resourceVersion changed", func(t *testing.T) {
		s, _, dep := keeperScenario(t)
		s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) { o.ResourceVersion = "4" })) // a label changed
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Done")
		s.AssertActions(`PATCH widgets.v1.example.com ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"$patch":"delete","uid":"u-gone"}]}}`,
			"GET widgets.v1.example.com ns/dep",
			`PATCH widgets.v1.example.com ns/dep merge {"metadata":{"resourceVersion":"4","ownerReferences":[`+
				`{"apiVersion":"example.com/v1","kind":"Widget","name":"keeper","uid":"u-keeper"}]}}`)
		s.AssertLiveOwners(dep, "u-keeper")
	})
}

// TestScenarioOrphanFinalizerAddedBeforeTheDelete (issue 22, item 1): dep's owner is gone and the
// graph's view of dep has no GC finalizer, so the decision is a Background delete. Before the
// DELETE, dep gains the orphan finalizer (the default-propagation pass stamping
// `defaultPropagation: Orphan`, or a user), and the watch has not delivered it. The DELETE at the
// view's resourceVersion answers 409; the live object's references are unchanged, but its GC
// finalizers are not the view's: no DELETE is sent at the live resourceVersion with the old
// decision's propagation (an explicit Background delete drops the orphan finalizer, and dep's own
// dependents, which had to be orphaned, would be collected). Once the watch delivers the change,
// dep is deleted with the orphan propagation its finalizer asks for.
// Never sent: a DELETE of dep with propagation Background once it carries the orphan finalizer.
func TestScenarioOrphanFinalizerAddedBeforeTheDelete(t *testing.T) {
	for _, tc := range []struct {
		name      string
		finalizer string
		wantProp  string
	}{
		{"orphan", metav1.FinalizerOrphanDependents, "Orphan"},
		{"foregroundDeletion", metav1.FinalizerDeleteDependents, "Foreground"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := scObj(scWidgets, "owner", "u-owner", "1")
			dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(owner))
			s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{dep}})
			s.observe(owner, dep)
			s.observeDeleted(owner)
			s.assertQueued([]types.UID{"u-dep"}, nil)
			stamped := scWith(dep, func(o *metav1.PartialObjectMetadata) {
				o.ResourceVersion = "4"
				o.Finalizers = []string{tc.finalizer}
			})
			s.setLive(stamped) // the watch has not delivered it yet
			s.processDeletes()
			s.AssertOutcomes("delete u-dep: Retry")
			s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background", "GET widgets.v1.example.com ns/dep")
			s.AssertLive(dep, []types.UID{"u-owner"}, tc.finalizer)

			s.deliver(stamped)
			s.retryPending()
			s.processDeletes()
			s.AssertOutcomes("delete u-dep: Done")
			s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=4 propagation=" + tc.wantProp)
		})
	}
}

// TestScenarioCollectAfterOrphanFinalizerAdded (issue 22, item 1): the policy's collect: After
// reads the live dependent and, its delay over, deletes at the live resourceVersion, which no
// precondition guards. The live dependent gained the orphan finalizer after the graph's view:
// nothing is deleted on the old decision; the dependent is decided again once the watch delivers
// the change, and then deleted with the orphan propagation.
// Never sent: a DELETE of dep with propagation Background once it carries the orphan finalizer.
func TestScenarioCollectAfterOrphanFinalizerAdded(t *testing.T) {
	owner := scObj(scWidgets, "owner", "u-owner", "1")
	dep := scWith(scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(owner)), func(o *metav1.PartialObjectMetadata) {
		// The delay started two minutes ago (recorded by an earlier look, or another replica).
		o.Annotations = map[string]string{policy.OrphanedAtAnnotation: policy.FormatOrphanedAt(scT0.Add(-2*time.Minute), []types.UID{"u-owner"})}
	})
	pol, _, errs := policy.Parse([]byte("apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: widgets.example.com\n  collect: After 1m\n"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{dep}, policy: pol})
	s.observe(owner, dep)
	s.observeDeleted(owner)
	stamped := scWith(dep, func(o *metav1.PartialObjectMetadata) {
		o.ResourceVersion = "4"
		o.Finalizers = []string{metav1.FinalizerOrphanDependents}
	})
	s.setLive(stamped) // the watch has not delivered it yet
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Retry")
	s.AssertActions("GET widgets.v1.example.com ns/dep")
	s.AssertLive(dep, []types.UID{"u-owner"}, metav1.FinalizerOrphanDependents)

	s.deliver(stamped)
	s.retryPending()
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("GET widgets.v1.example.com ns/dep", "DELETE widgets.v1.example.com ns/dep uid=u-dep rv=4 propagation=Orphan")
}
