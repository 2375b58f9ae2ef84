package gc

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
)

// Resources that stop being watched: their objects must not stay as ghosts.

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
	s.AssertActions("GET gizmos.v1.example.com ns/g") // and nothing on gd
	s.AssertOwnerStates("u-dep", graph.OwnerVerifiedPresent)
	s.AssertLiveOwners(dep, "u-g")
	s.AssertLiveOwners(gd, "u-fg")

	s.deleteLive(g)
	s.reverifyAt(0)
	s.reverifyAt(period)
	s.settle()
	s.AssertOutcomes("verify u-g: Done", "delete u-dep: Done")
	s.AssertActions("GET gizmos.v1.example.com ns/g", "DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background")
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
	s.AssertActions("GET gizmos.v1.example.com ns/g",
		`PATCH widgets.v1.example.com ns/dep strategic {"metadata":{"uid":"u-dep","ownerReferences":[{"$patch":"delete","uid":"u-g"}]}}`)
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
	s.AssertActions("GET gizmos.v1.example.com ns/g", "GET gizmos.v1.example.com ns/gone", "DELETE widgets.v1.example.com ns/dep-gone uid=u-dep-gone rv=3 propagation=Background")
	s.AssertOwnerStates("u-dep-g", graph.OwnerPresent) // the claim holds: observation decides
	s.AssertLiveOwners(depG, "u-g")
}
