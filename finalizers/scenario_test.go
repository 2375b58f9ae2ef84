package finalizers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
)

// Scenarios of the processor over a real collector (harness in scenario_harness_test.go).

// TestScenarioOrphan: an owner deleted with the orphan policy and three dependents (one with
// another owner). The graph hands the owner over at the initial sync; one pass removes the
// owner's reference from each dependent (strategic merge patches with UID preconditions), then
// the orphan finalizer by a JSON merge patch at the owner's resourceVersion that keeps the other
// finalizer. Nothing is ever deleted; once the patches are observed, the owner has no
// dependents and nothing is queued again.
func TestScenarioOrphan(t *testing.T) {
	other := scObj(scWidgets, "other", "u-other", "1")
	owner := scObj(scWidgets, "owner", "u-owner", "5")
	owner.DeletionTimestamp = &metav1.Time{Time: scT0}
	owner.Finalizers = []string{"example.com/keep", metav1.FinalizerOrphanDependents}
	d1 := scObj(scWidgets, "d1", "u-d1", "2", gctest.RefTo(owner))
	d2 := scObj(scWidgets, "d2", "u-d2", "2", gctest.RefTo(other), gctest.RefTo(owner))
	d3 := scObj(scWidgets, "d3", "u-d3", "2", gctest.Blocking(gctest.RefTo(owner)))
	s := newScenario(t, other, owner, d1, d2, d3)
	s.assertQueued("u-owner")

	s.processOwners()
	s.AssertOutcomes("owner u-owner: Done")
	s.assertActions(3,
		`PATCH widgets.v1.example.com ns/d1 strategic {"metadata":{"uid":"u-d1","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`,
		`PATCH widgets.v1.example.com ns/d2 strategic {"metadata":{"uid":"u-d2","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`,
		`PATCH widgets.v1.example.com ns/d3 strategic {"metadata":{"uid":"u-d3","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`,
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"5","finalizers":["example.com/keep"]}}`,
	)
	s.AssertMetric("cascade_orphaned_dependents_total", 3)
	s.AssertMetric("cascade_finalizers_removed_total", 1, "finalizer", metav1.FinalizerOrphanDependents)
	s.AssertLive(d1, nil)
	s.AssertLive(d2, []types.UID{"u-other"})
	s.AssertLive(d3, nil)
	s.AssertLive(owner, nil, "example.com/keep")

	s.deliver(d1, d2, d3, owner)
	s.AssertBlocking("u-owner", 0)
	s.assertQueued()
	s.resync() // the owner is no longer deleting with a GC finalizer
	s.assertQueued()
	s.processOwners()
	s.AssertOutcomes()
	s.assertActions(0)
}

// TestScenarioForegroundBlockedByUnsynced: a foreground owner whose blocking dependent is a
// Gizmo, and gizmos' watch fails after the initial list. The owner waits (Retry) and its
// finalizer is never removed; exactly one Warning Event and one count name the resource, however
// often the owner is examined (backoff, resync, the departure of its non-blocking dependent).
func TestScenarioForegroundBlockedByUnsynced(t *testing.T) {
	owner := scObj(scWidgets, "owner", "u-owner", "5")
	owner.DeletionTimestamp = &metav1.Time{Time: scT0}
	owner.Finalizers = []string{metav1.FinalizerDeleteDependents}
	blocker := scObj(scGizmos, "g", "u-g", "2", gctest.Blocking(gctest.RefTo(owner)))
	free := scObj(scWidgets, "free", "u-free", "2", gctest.RefTo(owner))
	s := newScenario(t, owner, blocker, free)
	s.assertQueued("u-owner")
	s.AssertBlocking("u-owner", 1)

	s.failResource(scGizmos)
	s.processOwners()
	s.AssertOutcomes("owner u-owner: Retry")
	s.assertActions(0)
	s.AssertEvents("Warning " + EventReasonBlockedByUnsynced + " Waiting for dependent ns/g of resource gizmos.v1.example.com, which cascade cannot list or watch; foreground deletion finishes once it syncs")
	s.AssertMetric("cascade_foreground_blocked_by_unsynced_total", 1, "resource", "gizmos.v1.example.com")

	s.retryPending()
	s.processOwners()
	s.resync()
	s.processOwners()
	s.remove(free)            // what the collector does with a dependent that does not block
	s.assertQueued("u-owner") // its departure is a reason to look again
	s.processOwners()
	s.AssertOutcomes("owner u-owner: Retry", "owner u-owner: Retry", "owner u-owner: Retry")
	s.assertActions(0)
	s.AssertEvents()
	s.AssertMetric("cascade_foreground_blocked_by_unsynced_total", 1, "resource", "gizmos.v1.example.com")
	s.AssertMetric("cascade_finalizers_removed_total", 0, "finalizer", metav1.FinalizerDeleteDependents)
	s.AssertLive(owner, nil, metav1.FinalizerDeleteDependents)
}

// TestScenarioForegroundFinishes: a foreground owner waits for its blocking dependents without
// any API call; each departure (RecheckOwner) brings it back, and once the last blocking
// dependent is gone only the foregroundDeletion finalizer is removed.
func TestScenarioForegroundFinishes(t *testing.T) {
	owner := scObj(scWidgets, "owner", "u-owner", "5")
	owner.DeletionTimestamp = &metav1.Time{Time: scT0}
	owner.Finalizers = []string{metav1.FinalizerDeleteDependents, "example.com/keep"}
	dep := scObj(scWidgets, "dep", "u-dep", "2", gctest.Blocking(gctest.RefTo(owner)))
	s := newScenario(t, owner, dep)
	s.processOwners()
	s.AssertOutcomes("owner u-owner: Retry")
	s.assertActions(0)
	s.assertQueued()

	late := scObj(scWidgets, "late", "u-late", "3", gctest.Blocking(gctest.RefTo(owner)))
	s.upsert(late) // a blocking dependent created while the owner waits
	s.AssertBlocking("u-owner", 2)
	s.remove(dep) // the collector deleted it
	s.AssertBlocking("u-owner", 1)
	s.assertQueued("u-owner")
	s.processOwners()
	s.AssertOutcomes("owner u-owner: Retry") // late still blocks
	s.assertActions(0)

	s.remove(late)
	s.AssertBlocking("u-owner", 0)
	s.assertQueued("u-owner")
	s.processOwners()
	s.AssertOutcomes("owner u-owner: Done")
	s.assertActions(0,
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"5","finalizers":["example.com/keep"]}}`,
	)
	s.AssertMetric("cascade_finalizers_removed_total", 1, "finalizer", metav1.FinalizerDeleteDependents)
	s.AssertLive(owner, nil, "example.com/keep")

	s.deliver(owner)
	s.resync()
	s.assertQueued()
}

// TestScenarioOrphanWhileUnsynced (issue 9, issue 10 item 1): gizmos cannot be listed when an
// owner is deleted with the orphan policy. After the sync timeout the owner is finished with the
// dependents the graph knows; the owner goes. When gizmos lists at last, its dependent of that
// owner reaches the graph late: its reference is OwnerOrphaned (the collector removes it), never
// a reason to delete it.
func TestScenarioOrphanWhileUnsynced(t *testing.T) {
	owner := scObj(scWidgets, "owner", "u-owner", "5")
	owner.DeletionTimestamp = &metav1.Time{Time: scT0}
	owner.Finalizers = []string{metav1.FinalizerOrphanDependents}
	d1 := scObj(scWidgets, "d1", "u-d1", "2", gctest.RefTo(owner))
	g := scObj(scGizmos, "g", "u-g", "2", gctest.RefTo(owner))
	s := newScenarioWith(t, scenarioSetup{objects: []runtime.Object{owner, d1, g}, unlisted: []gc.Resource{scGizmos}})
	s.assertQueued("u-owner")
	s.processOwners()
	s.AssertOutcomes("owner u-owner: Done")
	s.assertActions(0,
		`PATCH widgets.v1.example.com ns/d1 strategic {"metadata":{"uid":"u-d1","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`,
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"5","finalizers":[]}}`,
	)
	s.deliver(d1, owner)
	s.remove(owner) // no finalizer left: the API server deletes it
	s.AssertNoNode("u-owner")

	s.recoverResource(scGizmos)
	s.AssertOwnerStates("u-g", graph.OwnerOrphaned)
	s.AssertLive(g, []types.UID{"u-owner"})
	s.assertQueued()
	s.AssertEvents()
}
