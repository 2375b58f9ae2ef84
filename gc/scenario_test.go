package gc

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/policy"
)

// Scenarios of the collector (harness in scenario_harness_test.go). Each names the bug it
// guards against and what must never be deleted, and its e2e counterpart where there is one.

// TestScenarioUnsyncedResource (issue 10, item 1): gizmos cannot be listed (a conversion
// webhook is missing). Unsynced names it; an owner of that kind is never answered for while
// it is unsynced (verify waits for sync, no GET), so its dependent is never deleted, however
// often it is handed to the workers. Once gizmos lists, the claim is checked: the owner does
// not exist, and the dependent is collected. (e2e: TestUnsyncedResourceDoesNotStall.)
func TestScenarioUnsyncedResource(t *testing.T) {
	g := scObj(scGizmos, "g", "u-g", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(g))
	s := newScenario(t, scenarioSetup{
		watched: []Resource{scWidgets}, unlisted: []Resource{scGizmos},
		objects: []runtime.Object{dep}, // g does not exist: a GET would answer 404
	})
	s.failStore(scGizmos, errors.New(`conversion webhook for example.com/v1, Kind=Gizmo failed: service "nowhere" not found`))
	s.assertUnsynced(`gizmos.v1.example.com synced=false err=conversion webhook for example.com/v1, Kind=Gizmo failed: service "nowhere" not found`)
	s.AssertMetric("cascade_resource_unsynced", 1, "group", "example.com", "version", "v1", "resource", "gizmos")

	s.observe(dep)
	s.assertQueued(nil, []graph.Ref{scClaim(g, "ns")})
	s.AssertOwnerStates("u-dep", graph.OwnerUnknown)
	s.processVerifies()
	s.AssertOutcomes("verify u-g: WaitForSync")
	s.AssertActions() // not even a GET
	s.AssertOwnerStates("u-dep", graph.OwnerUnknown)

	// The dependent handed over (a resync) is kept: its owner is undecided.
	s.enqueueDelete("u-dep")
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions()

	// Still unsynced when the claim comes back.
	s.retryPending()
	s.processVerifies()
	s.AssertOutcomes("verify u-g: WaitForSync")
	s.AssertActions()
	s.AssertLiveOwners(dep, "u-g")

	// gizmos lists (without g): the claim is checked, the owner is absent.
	s.relist(scGizmos)
	s.assertUnsynced()
	s.retryPending()
	s.processVerifies()
	s.AssertOutcomes("verify u-g: Done")
	s.AssertActions("GET gizmos ns/g")
	s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
	s.assertQueued([]types.UID{"u-dep"}, nil)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background")
}

// TestScenarioVirtualOwnerReverified (issue 10, item 2): the owner is a ConfigMap, a kind
// cascade does not watch. Verified present, the dependent is kept, and the claim is checked
// again one period later, then after 2 periods more (backing off). The ConfigMap is deleted
// with no event cascade could see; the next re-verification answers absent and the dependent
// is deleted with the graph's UID and resourceVersion as preconditions.
// (e2e: TestIgnoredOwnerReverified.)
func TestScenarioVirtualOwnerReverified(t *testing.T) {
	const period = 10 * time.Second
	cm := scObj(scConfigMaps, "cm", "u-cm", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(cm))
	s := newScenario(t, scenarioSetup{
		watched: []Resource{scWidgets}, mapped: []Resource{scConfigMaps},
		objects: []runtime.Object{cm, dep}, reverifyPeriod: period,
	})
	s.observe(dep)
	s.assertQueued(nil, []graph.Ref{scClaim(cm, "ns")})
	s.settle()
	s.AssertOutcomes("verify u-cm: Done")
	s.AssertActions("GET configmaps ns/cm")
	s.AssertOwnerStates("u-dep", graph.OwnerVerifiedPresent)

	s.reverifyAt(0) // first listed: due one period later
	s.assertQueued(nil, nil)
	s.reverifyAt(period)
	s.assertQueued(nil, []graph.Ref{scClaim(cm, "ns")})
	s.settle()
	s.AssertOutcomes("verify u-cm: Done")
	s.AssertActions("GET configmaps ns/cm")
	s.AssertOwnerStates("u-dep", graph.OwnerVerifiedPresent)
	s.AssertLiveOwners(dep, "u-cm")

	s.deleteLive(cm) // nothing cascade watches tells it
	s.reverifyAt(2 * period)
	s.assertQueued(nil, nil) // backing off: next at 3 periods
	s.reverifyAt(3 * period)
	s.assertQueued(nil, []graph.Ref{scClaim(cm, "ns")})
	s.processVerifies()
	s.AssertOutcomes("verify u-cm: Done")
	s.AssertActions("GET configmaps ns/cm")
	s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
	s.assertQueued([]types.UID{"u-dep"}, nil)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background")
	s.AssertMetric("cascade_owner_verifications_total", 2, "result", "present")
	s.AssertMetric("cascade_owner_verifications_total", 1, "result", "absent")
	s.AssertMetric("cascade_collected_total", 1, "action", "delete")

	s.observeDeleted(dep)
	s.AssertNoNode("u-cm")
	s.reverifyAt(4 * period)
	s.assertQueued(nil, nil)
}

// TestScenarioStandbySilence (issue 10, item 5): a standby's graph finds a reference to an
// owner in another namespace. Until it leads, it sends no Event and makes no API call (its
// workers do not run; the metric counts at once). Leading, it emits exactly one Event, then
// collects the dependent as in-tree does. (e2e: TestStandbyStaysSilent.)
func TestScenarioStandbySilence(t *testing.T) {
	owner := scWith(scObj(scWidgets, "owner", "u-owner", "1"), func(o *metav1.PartialObjectMetadata) { o.Namespace = "other" })
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(owner))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{owner, dep}, standby: true})
	s.observe(owner, dep)
	s.AssertOwnerStates("u-dep", graph.OwnerInvalidNamespace)
	s.assertQueued([]types.UID{"u-dep"}, nil) // queued, but a standby runs no worker
	s.AssertEvents()
	s.AssertActions()
	s.AssertMetric("cascade_invalid_namespace_refs_total", 1)

	s.lead()
	s.AssertEvents(`Warning OwnerRefInvalidNamespace ownerRef [example.com/v1/Widget, namespace: ns, name: owner, uid: u-owner] does not exist in namespace "ns"`)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background")
	s.AssertEvents() // exactly one
}

// TestScenarioDuplicateOwnerRefs (issue 10, item 6): a dependent names its owner twice with
// identical references, and only the second blocks. The graph keeps one reference that blocks:
// a foreground owner waits for the dependent (BlockingDependents 1), which is deleted (a failed
// DELETE is retried, and the foreground resync hands the dependent over again), and the owner
// is handed back to the finalizers when it goes.
func TestScenarioDuplicateOwnerRefs(t *testing.T) {
	owner := scObj(scWidgets, "owner", "u-owner", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(owner), gctest.Blocking(gctest.RefTo(owner)))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{owner, dep}})
	s.observe(owner, dep)
	s.AssertOwnerStates("u-dep", graph.OwnerPresent)
	s.AssertBlocking("u-owner", 1)
	s.assertQueued(nil, nil)

	fg := scDeleting(owner, "2", metav1.FinalizerDeleteDependents)
	s.setLive(fg)
	s.observe(fg)
	s.assertHandedOver("u-owner")
	s.AssertOwnerStates("u-dep", graph.OwnerDeletingDependents)
	s.AssertBlocking("u-owner", 1) // the owner waits: its finalizer stays
	s.assertQueued([]types.UID{"u-dep"}, nil)
	s.failNext("delete", apierrors.NewInternalError(errors.New("etcd is down")))
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Retry error")
	s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background")
	s.AssertLiveOwners(dep, "u-owner", "u-owner")
	s.resyncForeground() // level-driven: the waiting owner's dependents are handed over again
	s.assertQueued([]types.UID{"u-dep"}, nil)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background")
	s.observeDeleted(dep)
	s.AssertBlocking("u-owner", 0)
	s.assertHandedOver("u-owner") // RecheckOwner: the finalizer may go now
}

// TestScenarioVerify404ForThePath (issue 10, item 6): the owner of a watched, synced kind was
// never observed. A 404 whose status does not name it (the server does not serve the path) is
// an error: retried, the owner stays Unknown and the dependent is kept however often it is
// handed over. The next answer, a 404 naming the owner, is absence: the dependent is deleted.
// The dependent's two identical references (the second blocking) are one claim, checked once.
func TestScenarioVerify404ForThePath(t *testing.T) {
	g := scObj(scGizmos, "g", "u-g", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(g), gctest.Blocking(gctest.RefTo(g)))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets, scGizmos}, objects: []runtime.Object{dep}})
	s.observe(dep)
	s.assertQueued(nil, []graph.Ref{scClaim(g, "ns")})
	s.failNext("get", notFoundForPath())
	s.processVerifies()
	s.AssertOutcomes("verify u-g: Retry error")
	s.AssertActions("GET gizmos ns/g")
	s.AssertOwnerStates("u-dep", graph.OwnerUnknown)
	s.AssertMetric("cascade_owner_verifications_total", 1, "result", "error")
	s.AssertMetric("cascade_worker_errors_total", 1, "queue", "verify_owner")
	s.enqueueDelete("u-dep")
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions()
	s.AssertLiveOwners(dep, "u-g", "u-g")

	s.retryPending()
	s.processVerifies() // the fake's own 404 names g
	s.AssertOutcomes("verify u-g: Done")
	s.AssertActions("GET gizmos ns/g")
	s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
	s.AssertMetric("cascade_owner_verifications_total", 1, "result", "absent")
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background")
}

// TestScenarioOrphanLateDependent (issue 9): the owner is deleted with the orphan policy while
// the graph knows none of its dependents, so its tombstone is released at once. A dependent
// created just before the delete reaches the graph afterwards: it loses its reference by a
// strategic merge patch (UID precondition) and is never deleted, nor is the owner verified.
// (e2e: TestFinalizersOrphanDependentsCreatedJustBefore.)
func TestScenarioOrphanLateDependent(t *testing.T) {
	owner := scObj(scWidgets, "owner", "u-owner", "1")
	late := scObj(scWidgets, "late", "u-late", "3", gctest.RefTo(owner))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{late}})
	s.observe(owner)
	s.observe(scDeleting(owner, "2", metav1.FinalizerOrphanDependents))
	s.assertHandedOver("u-owner")
	s.observe(scDeleting(owner, "3")) // the finalizers removed the orphan finalizer
	s.observeDeleted(owner)
	s.AssertNoNode("u-owner")
	s.assertStats(func(st graph.Stats) error {
		if st.RetainedOrphans != 1 {
			return fmt.Errorf("retained orphans %d, want 1", st.RetainedOrphans)
		}
		return nil
	})

	s.observe(late)
	s.AssertOwnerStates("u-late", graph.OwnerOrphaned)
	s.assertQueued([]types.UID{"u-late"}, nil) // no claim to verify
	s.settle()
	s.AssertOutcomes("delete u-late: Done")
	s.AssertActions(`PATCH widgets ns/late strategic {"metadata":{"uid":"u-late","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`)
	s.AssertMetric("cascade_collected_total", 1, "action", "remove_refs")
	s.AssertMetric("cascade_collected_total", 0, "action", "delete")
	s.deliver(late)
	s.assertQueued(nil, nil)
	s.AssertLiveOwners(late)

	// Handed over again (a resync), it has nothing left to decide.
	s.enqueueDelete("u-late")
	s.processDeletes()
	s.AssertOutcomes("delete u-late: Done")
	s.AssertActions()
}

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
		s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background", "GET widgets ns/dep")
		s.AssertLiveOwners(dep, "u-owner", "u-adopter")

		s.deliver(dep)
		s.AssertOwnerStates("u-dep", graph.OwnerAbsent, graph.OwnerPresent)
		s.retryPending()
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Done")
		s.AssertActions(`PATCH widgets ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"4","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`)
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
		s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background", "GET widgets ns/dep",
			"DELETE widgets ns/dep uid=u-dep rv=4 propagation=Background")
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
		s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background", "GET widgets ns/dep",
			"DELETE widgets ns/dep uid=u-dep rv=4 propagation=Background")
	})
}

// TestScenarioUnreferencedClaimDropped (issue 10, item 3): a claim on an owner whose kind has no
// REST mapping is retried (never answered); once no dependent makes it any more, it leaves the
// queue without a GET, so the verify queue holds nothing nobody needs.
func TestScenarioUnreferencedClaimDropped(t *testing.T) {
	thing := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Thing"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t", UID: "u-t"},
	}
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(thing))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{dep}})
	s.observe(dep)
	s.processVerifies()
	s.AssertOutcomes("verify u-t: Retry error")
	s.AssertActions()
	s.AssertMetric("cascade_rest_mapping_errors_total", 1)
	s.enqueueDelete("u-dep")
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions()

	s.observeDeleted(dep)
	s.AssertNoNode("u-t")
	s.retryPending()
	s.processVerifies()
	s.AssertOutcomes("verify u-t: Done")
	s.AssertActions()
	s.AssertMetric("cascade_owner_verifications_total", 1, "result", "unreferenced")
	s.AssertMetric("cascade_rest_mapping_errors_total", 1)
	s.assertQueued(nil, nil)
}

// TestScenarioGhosts (issue 10, item 4): gizmos stops being watched (its preferred version
// switched, its group went) while cascade had observed a Gizmo owner and a blocking Gizmo
// dependent. They must not stay as ghosts: the owner becomes virtual and its claim is verified
// again (present: the dependent is kept), the foreground owner the Gizmo dependent blocked is
// handed back to the finalizers (nothing cascade can see blocks it now), and the queued Gizmo
// dependent is never acted on. When the Gizmo owner really goes, the re-verification finds it
// and the dependent is collected. (e2e: TestCRDDeletedDependentsCollected.)
func TestScenarioGhosts(t *testing.T) {
	const period = 10 * time.Second
	g := scObj(scGizmos, "g", "u-g", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(g))
	fg := scDeleting(scObj(scWidgets, "fg", "u-fg", "1"), "2", metav1.FinalizerDeleteDependents)
	gd := scObj(scGizmos, "gd", "u-gd", "2", gctest.Blocking(gctest.RefTo(fg)))
	s := newScenario(t, scenarioSetup{
		watched: []Resource{scWidgets, scGizmos}, objects: []runtime.Object{g, dep, fg, gd}, reverifyPeriod: period,
	})
	s.observe(g, dep, fg, gd)
	s.assertHandedOver("u-fg")
	s.AssertBlocking("u-fg", 1)
	s.AssertOwnerStates("u-dep", graph.OwnerPresent)
	s.assertQueued([]types.UID{"u-gd"}, nil) // the foreground owner's dependent

	s.unwatch(scGizmos)
	s.assertHandedOver("u-fg") // RecheckOwner
	s.AssertBlocking("u-fg", 0)
	s.AssertNoNode("u-gd")
	s.AssertOwnerStates("u-dep", graph.OwnerUnknown)
	s.assertQueued([]types.UID{"u-gd"}, []graph.Ref{scClaim(g, "ns")})
	s.settle()
	s.AssertOutcomes("verify u-g: Done", "delete u-gd: Done")
	s.AssertActions("GET gizmos ns/g") // and nothing on gd
	s.AssertOwnerStates("u-dep", graph.OwnerVerifiedPresent)
	s.AssertLiveOwners(dep, "u-g")
	s.AssertLiveOwners(gd, "u-fg")

	s.deleteLive(g)
	s.reverifyAt(0)
	s.reverifyAt(period)
	s.settle()
	s.AssertOutcomes("verify u-g: Done", "delete u-dep: Done")
	s.AssertActions("GET gizmos ns/g", "DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background")
}

// TestCheckGraphSeesInconsistency: the harness's consistency check is not vacuous: a universe
// that misses a node the graph holds makes the counts disagree.
func TestCheckGraphSeesInconsistency(t *testing.T) {
	g := graph.New()
	dep := graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: "dep", UID: "u-dep"}, ResourceVersion: "1",
		Owners: []graph.OwnerRef{{APIVersion: "example.com/v1", Kind: "Widget", Name: "o", UID: "u-o"}}}
	g.Apply(graph.Event{Type: graph.EventObserved, Object: dep})
	if err := checkGraph(g, map[types.UID]struct{}{"u-dep": {}, "u-o": {}}); err != nil {
		t.Errorf("consistent graph: %v", err)
	}
	if err := checkGraph(g, map[types.UID]struct{}{"u-dep": {}}); err == nil {
		t.Error("a virtual node outside the universe went unnoticed")
	}
}

// TestScenarioGhostOrphaningOwner (issue 10 item 4, issue 9): a Gizmo owner observed being
// deleted with the orphan policy, then gizmos stops being watched before its deletion is seen.
// The owner becomes virtual but keeps its mark: when its claim is verified absent, the
// dependent loses the reference and is never deleted.
func TestScenarioGhostOrphaningOwner(t *testing.T) {
	g := scObj(scGizmos, "g", "u-g", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(g))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets, scGizmos}, objects: []runtime.Object{dep}})
	s.observe(scDeleting(g, "2", metav1.FinalizerOrphanDependents), dep)
	s.assertHandedOver("u-g", "u-g") // entering orphan deletion, then gaining a dependent
	s.AssertOwnerStates("u-dep", graph.OwnerBeingDeleted)

	s.unwatch(scGizmos) // g is gone from the API too, unseen
	s.AssertOwnerStates("u-dep", graph.OwnerUnknown)
	s.assertQueued(nil, []graph.Ref{scClaim(g, "ns")})
	s.settle()
	s.AssertOutcomes("verify u-g: Done", "delete u-dep: Done")
	s.AssertActions("GET gizmos ns/g",
		`PATCH widgets ns/dep strategic {"metadata":{"uid":"u-dep","ownerReferences":[{"$patch":"delete","uid":"u-g"}]}}`)
	s.AssertOwnerStates("u-dep", graph.OwnerOrphaned)
	s.AssertMetric("cascade_collected_total", 0, "action", "delete")
	s.deliver(dep)
	s.AssertNoNode("u-g")
	s.AssertLiveOwners(dep)
}

// TestScenarioGhostsVersionSwitch (issue 10, item 4): gizmos' preferred version switches from
// v1 to v2. Until v2's initial list is in, the objects observed at v1 stay as they were (they
// keep their dependents; nothing is decided on an incomplete view). Then what v2 listed is
// observed again, and only what went in between becomes virtual and is verified: absent, its
// dependent is collected; the dependent of the Gizmo that still exists is kept.
// (e2e: TestPreferredVersionSwitch.)
func TestScenarioGhostsVersionSwitch(t *testing.T) {
	gizmosV2 := Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "gizmos"}, Kind: "Gizmo", Namespaced: true}
	g := scObj(scGizmos, "g", "u-g", "1")
	gone := scObj(scGizmos, "gone", "u-gone", "1")
	depG := scObj(scWidgets, "dep-g", "u-dep-g", "3", gctest.RefTo(g))
	depGone := scObj(scWidgets, "dep-gone", "u-dep-gone", "3", gctest.RefTo(gone))
	s := newScenario(t, scenarioSetup{
		watched: []Resource{scWidgets, scGizmos}, mapped: []Resource{gizmosV2},
		objects: []runtime.Object{g, depG, depGone}, // gone was deleted while no version was watched
	})
	s.observe(g, gone, depG, depGone)

	s.watch(gizmosV2)
	s.unwatch(scGizmos)
	s.AssertOwnerStates("u-dep-g", graph.OwnerPresent)
	s.AssertOwnerStates("u-dep-gone", graph.OwnerPresent)
	s.assertQueued(nil, nil)
	s.discoveryRound() // v2 has not listed yet: still not due
	s.AssertOwnerStates("u-dep-gone", graph.OwnerPresent)

	s.relist(gizmosV2, scWith(g, func(o *metav1.PartialObjectMetadata) { o.APIVersion = "example.com/v2" }))
	// g is observed at v2: dep-g's reference names v1, coordinates that disagree, checked once
	// (in-tree compares apiVersion exactly too). Its dependent is never decided on meanwhile.
	s.AssertOwnerStates("u-dep-g", graph.OwnerMismatch)
	s.discoveryRound()
	s.AssertOwnerStates("u-dep-gone", graph.OwnerUnknown)
	s.assertQueued(nil, []graph.Ref{scClaim(g, "ns"), scClaim(gone, "ns")})
	s.settle()
	s.AssertOutcomes("verify u-g: Done", "verify u-gone: Done", "delete u-dep-gone: Done")
	s.AssertActions("GET gizmos ns/g", "GET gizmos ns/gone", "DELETE widgets ns/dep-gone uid=u-dep-gone rv=3 propagation=Background")
	s.AssertOwnerStates("u-dep-g", graph.OwnerPresent) // the claim holds: observation decides
	s.AssertLiveOwners(depG, "u-g")
}

// TestScenarioClusterScopedVirtualOwner: an owner of a cluster-scoped kind cascade does not
// watch, referenced from two namespaces. A present answer holds cluster-wide: a dependent in a
// third namespace needs no check, the re-verification checks the owner once per period, and
// when it goes, one GET collects every dependent; dependents arriving later are decided from
// the graph's answer, or once the graph forgot the owner from the absent cache, without a GET.
func TestScenarioClusterScopedVirtualOwner(t *testing.T) {
	const period = 10 * time.Second
	things := Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}, Kind: "Thing"}
	th := scObj(things, "th", "u-th", "1")
	in := func(ns, name string) *metav1.PartialObjectMetadata {
		return scWith(scObj(scWidgets, name, types.UID("u-"+name), "3", gctest.RefTo(th)), func(o *metav1.PartialObjectMetadata) { o.Namespace = ns })
	}
	d1, d2, d3, d4, d5 := in("ns1", "d1"), in("ns2", "d2"), in("ns3", "d3"), in("ns4", "d4"), in("ns5", "d5")
	s := newScenario(t, scenarioSetup{
		watched: []Resource{scWidgets}, mapped: []Resource{things},
		objects: []runtime.Object{th, d1, d2, d3, d4, d5}, reverifyPeriod: period,
	})
	s.observe(d1, d2)
	s.assertQueued(nil, []graph.Ref{scClaim(th, "ns1"), scClaim(th, "ns2")}) // the graph does not know the scope
	s.settle()
	// The first answer holds for both; the second claim is checked all the same (a redundant
	// GET: verifyOwner does not ask whether the claim is still undecided).
	s.AssertOutcomes("verify u-th: Done", "verify u-th: Done")
	s.AssertActions("GET things /th", "GET things /th")
	s.AssertOwnerStates("u-d1", graph.OwnerVerifiedPresent)
	s.AssertOwnerStates("u-d2", graph.OwnerVerifiedPresent)
	s.observe(d3)
	s.AssertOwnerStates("u-d3", graph.OwnerVerifiedPresent)
	s.assertQueued(nil, nil)

	s.reverifyAt(0)
	s.reverifyAt(period)
	s.assertQueued(nil, []graph.Ref{scClaim(th, "")}) // one claim, cluster-wide
	s.settle()
	s.AssertOutcomes("verify u-th: Done")
	s.AssertActions("GET things /th")

	s.deleteLive(th)
	s.reverifyAt(3 * period)
	s.settle()
	s.AssertOutcomes("verify u-th: Done", "delete u-d1: Done", "delete u-d2: Done", "delete u-d3: Done")
	s.AssertActions("GET things /th",
		"DELETE widgets ns1/d1 uid=u-d1 rv=3 propagation=Background",
		"DELETE widgets ns2/d2 uid=u-d2 rv=3 propagation=Background",
		"DELETE widgets ns3/d3 uid=u-d3 rv=3 propagation=Background")

	s.observe(d4) // the graph still holds the answer
	s.settle()
	s.AssertOutcomes("delete u-d4: Done")
	s.AssertActions("DELETE widgets ns4/d4 uid=u-d4 rv=3 propagation=Background")

	s.observeDeleted(d1, d2, d3, d4)
	s.AssertNoNode("u-th")
	s.observe(d5) // the graph forgot the owner; the absent cache did not
	s.assertQueued(nil, []graph.Ref{scClaim(th, "ns5")})
	s.settle()
	s.AssertOutcomes("verify u-th: Done", "delete u-d5: Done")
	s.AssertActions("DELETE widgets ns5/d5 uid=u-d5 rv=3 propagation=Background")
	s.AssertMetric("cascade_owner_verifications_total", 1, "result", "cached_absent")
}

// TestScenarioUnmappedClaimOnDeletedOwner (found by the chaos suite's bad-input test): a
// reference with an apiVersion no API serves ("not a version!") names the UID of a Widget that
// cascade observed deleted. The graph knows that UID is gone whatever the claim, but the
// in-tree collector cannot resolve such a reference and keeps the dependent forever: so must
// cascade. Never deleted, its unmapped reference never removed (which would make it
// collectable later), retried and counted; a dependent with a live owner loses only its
// mapped dangling reference.
func TestScenarioUnmappedClaimOnDeletedOwner(t *testing.T) {
	owner := scObj(scWidgets, "owner", "u-owner", "1")
	odd := gctest.RefTo(owner)
	odd.APIVersion = "not a version!"
	alone := scObj(scWidgets, "alone", "u-alone", "3", odd)
	live := scObj(scWidgets, "live", "u-live", "1")
	other := scObj(scWidgets, "other", "u-other", "1")
	withLive := scObj(scWidgets, "with-live", "u-with-live", "4", odd, gctest.RefTo(live), gctest.RefTo(other))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{alone, live, withLive}})
	s.observe(owner, live, other, alone, withLive)
	s.observeDeleted(owner, other)
	s.AssertOwnerStates("u-alone", graph.OwnerAbsent)
	s.processDeletes()
	s.AssertOutcomes("delete u-alone: Retry error", "delete u-with-live: Done")
	s.AssertActions(`PATCH widgets ns/with-live strategic {"metadata":{"uid":"u-with-live","resourceVersion":"4","ownerReferences":[{"$patch":"delete","uid":"u-other"}]}}`)
	s.AssertLiveOwners(alone, "u-owner")
	s.AssertLiveOwners(withLive, "u-owner", "u-live")

	// Retried: still kept, never a DELETE.
	s.retryPending()
	s.processDeletes()
	s.AssertActions()
	s.AssertLiveOwners(alone, "u-owner")
	if v, _ := gctest.Sample(s.Reg, "cascade_rest_mapping_errors_total"); v < 2 {
		t.Errorf("cascade_rest_mapping_errors_total %v, want at least 2", v)
	}
}

// TestScenarioCycleUnblockThenDelete (found by the chaos suite: after the unblock the DELETE's
// 409 came back on every retry while the watch lagged, each retry patching again). Owner "fg" is
// deleted in the foreground; dep names it with blockOwnerDeletion, and fg names dep the same way
// (a cycle). dep is deleted in the foreground after its references are unblocked; the DELETE at
// the view's resourceVersion answers 409 (the unblock moved it on), the live object shows
// exactly the unblocked references, so the DELETE goes again at the live resourceVersion at
// once. Had anything else changed (a new owner), it would wait for the watch instead.
func TestScenarioCycleUnblockThenDelete(t *testing.T) {
	for _, tc := range []struct {
		name    string
		adopted bool // another owner was added between the view and the DELETE
	}{{"only the unblock changed", false}, {"a new owner meanwhile", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s, dep, other := cycleScenario(t)
			if tc.adopted {
				s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) {
					o.OwnerReferences = append(o.OwnerReferences, gctest.RefTo(other))
				}))
			}
			s.failNext("delete", apierrors.NewConflict(scWidgets.GVR.GroupResource(), "dep", errors.New("the object has been modified")))
			s.processDeletes()
			if tc.adopted {
				s.AssertOutcomes("delete u-dep: Retry")
				s.AssertActions(`PATCH widgets ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"fg","uid":"u-fg","blockOwnerDeletion":false}]}}`,
					"DELETE widgets ns/dep uid=u-dep rv=3 propagation=Foreground", "GET widgets ns/dep")
				s.AssertLiveOwners(dep, "u-fg", "u-other")
				return
			}
			s.AssertOutcomes("delete u-dep: Done")
			s.AssertActions(`PATCH widgets ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"fg","uid":"u-fg","blockOwnerDeletion":false}]}}`,
				"DELETE widgets ns/dep uid=u-dep rv=3 propagation=Foreground", "GET widgets ns/dep",
				"DELETE widgets ns/dep uid=u-dep rv=3 propagation=Foreground")
		})
	}
}

// cycleScenario: widget fg is deleted in the foreground; dep names it with blockOwnerDeletion,
// and fg names dep the same way (a cycle); other is a live widget. dep is queued.
func cycleScenario(t *testing.T) (s *scenario, dep, other *metav1.PartialObjectMetadata) {
	t.Helper()
	fgObj := scObj(scWidgets, "fg", "u-fg", "1")
	dep = scObj(scWidgets, "dep", "u-dep", "3", gctest.Blocking(gctest.RefTo(fgObj)))
	fgObj.OwnerReferences = []metav1.OwnerReference{gctest.Blocking(gctest.RefTo(dep))}
	fg := scDeleting(fgObj, "2", metav1.FinalizerDeleteDependents)
	other = scObj(scWidgets, "other", "u-other", "1")
	s = newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{fg, dep, other}})
	s.observe(other, dep, fg)
	s.AssertOwnerStates("u-dep", graph.OwnerDeletingDependents)
	return s, dep, other
}

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
	s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=4 propagation=Background")
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
	s.AssertActions("GET configmaps ns/cm")

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
	s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=4 propagation=Background")
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
		s.AssertActions(`PATCH widgets ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"$patch":"delete","uid":"u-gone"}]}}`,
			"GET widgets ns/dep")
		s.AssertLiveOwners(dep, "u-gone") // the reference to the gone owner stays: it is why dep goes

		s.deliver(dropped)
		s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
		s.retryPending()
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Done")
		s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=4 propagation=Background")
	})
	t.Run("only resourceVersion changed", func(t *testing.T) {
		s, _, dep := keeperScenario(t)
		s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) { o.ResourceVersion = "4" })) // a label changed
		s.processDeletes()
		s.AssertOutcomes("delete u-dep: Done")
		s.AssertActions(`PATCH widgets ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"$patch":"delete","uid":"u-gone"}]}}`,
			"GET widgets ns/dep",
			`PATCH widgets ns/dep merge {"metadata":{"resourceVersion":"4","ownerReferences":[`+
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
			s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=3 propagation=Background", "GET widgets ns/dep")
			s.AssertLive(dep, []types.UID{"u-owner"}, tc.finalizer)

			s.deliver(stamped)
			s.retryPending()
			s.processDeletes()
			s.AssertOutcomes("delete u-dep: Done")
			s.AssertActions("DELETE widgets ns/dep uid=u-dep rv=4 propagation=" + tc.wantProp)
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
	s.AssertActions("GET widgets ns/dep")
	s.AssertLive(dep, []types.UID{"u-owner"}, metav1.FinalizerOrphanDependents)

	s.deliver(stamped)
	s.retryPending()
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("GET widgets ns/dep", "DELETE widgets ns/dep uid=u-dep rv=4 propagation=Orphan")
}

// TestScenarioCycleUnblockCustomResource (issue 22, item 2): breaking a foreground cycle on a
// custom resource, whose server answers the strategic merge patch with 415. The JSON merge
// fallback replaces the whole list at the live resourceVersion, so it is sent only when the live
// references are the ones the decision saw. When a blocking reference to another owner was added
// after the decision, nothing is sent and dep is decided again: that owner's foreground deletion
// must keep waiting for dep. Otherwise only the references the decision saw are unblocked, and
// dep is deleted in the foreground.
// Never written: blockOwnerDeletion=false on the reference added after the decision.
func TestScenarioCycleUnblockCustomResource(t *testing.T) {
	for _, tc := range []struct {
		name  string
		added bool // a blocking reference to another owner was added after the decision
	}{{"references unchanged", false}, {"a blocking reference added meanwhile", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s, dep, other := cycleScenario(t)
			if tc.added {
				s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) {
					o.ResourceVersion = "4"
					o.OwnerReferences = append(o.OwnerReferences, gctest.Blocking(gctest.RefTo(other)))
				}))
			}
			s.failNext("patch", apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", scWidgets.GVR.GroupResource(), "dep", "the strategic merge patch is not supported for custom resources", 0, false))
			s.processDeletes()
			smp := `PATCH widgets ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"fg","uid":"u-fg","blockOwnerDeletion":false}]}}`
			if tc.added {
				s.AssertOutcomes("delete u-dep: Retry")
				s.AssertActions(smp, "GET widgets ns/dep")
				for _, r := range s.Live(dep).OwnerReferences {
					if r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion {
						t.Errorf("the reference to %s was unblocked", r.UID)
					}
				}
				return
			}
			s.AssertOutcomes("delete u-dep: Done")
			s.AssertActions(smp, "GET widgets ns/dep",
				`PATCH widgets ns/dep merge {"metadata":{"resourceVersion":"3","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"fg","uid":"u-fg","blockOwnerDeletion":false}]}}`,
				"DELETE widgets ns/dep uid=u-dep rv=3 propagation=Foreground")
		})
	}
}
