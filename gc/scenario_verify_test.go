package gc

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
)

// Owners the graph never observed, checked live: while their resource is unsynced, again every
// period while present, with a 404 that does not name them, when no dependent claims them any
// more, cluster-wide, and when their kind has no REST mapping.

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
	s.AssertActions("GET gizmos.v1.example.com ns/g")
	s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
	s.assertQueued([]types.UID{"u-dep"}, nil)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background")
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
	s.AssertActions("GET configmaps.v1 ns/cm")
	s.AssertOwnerStates("u-dep", graph.OwnerVerifiedPresent)

	s.reverifyAt(0) // first listed: due one period later
	s.assertQueued(nil, nil)
	s.reverifyAt(period)
	s.assertQueued(nil, []graph.Ref{scClaim(cm, "ns")})
	s.settle()
	s.AssertOutcomes("verify u-cm: Done")
	s.AssertActions("GET configmaps.v1 ns/cm")
	s.AssertOwnerStates("u-dep", graph.OwnerVerifiedPresent)
	s.AssertLiveOwners(dep, "u-cm")

	s.deleteLive(cm) // nothing cascade watches tells it
	s.reverifyAt(2 * period)
	s.assertQueued(nil, nil) // backing off: next at 3 periods
	s.reverifyAt(3 * period)
	s.assertQueued(nil, []graph.Ref{scClaim(cm, "ns")})
	s.processVerifies()
	s.AssertOutcomes("verify u-cm: Done")
	s.AssertActions("GET configmaps.v1 ns/cm")
	s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
	s.assertQueued([]types.UID{"u-dep"}, nil)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background")
	s.AssertMetric("cascade_owner_verifications_total", 2, "result", "present")
	s.AssertMetric("cascade_owner_verifications_total", 1, "result", "absent")
	s.AssertMetric("cascade_collected_total", 1, "action", "delete")

	s.observeDeleted(dep)
	s.AssertNoNode("u-cm")
	s.reverifyAt(4 * period)
	s.assertQueued(nil, nil)
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
	s.AssertActions("GET gizmos.v1.example.com ns/g")
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
	s.AssertActions("GET gizmos.v1.example.com ns/g")
	s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
	s.AssertMetric("cascade_owner_verifications_total", 1, "result", "absent")
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background")
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
	s.AssertActions("GET things.v1.example.com /th", "GET things.v1.example.com /th")
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
	s.AssertActions("GET things.v1.example.com /th")

	s.deleteLive(th)
	s.reverifyAt(3 * period)
	s.settle()
	s.AssertOutcomes("verify u-th: Done", "delete u-d1: Done", "delete u-d2: Done", "delete u-d3: Done")
	s.AssertActions("GET things.v1.example.com /th",
		"DELETE widgets.v1.example.com ns1/d1 uid=u-d1 rv=3 propagation=Background",
		"DELETE widgets.v1.example.com ns2/d2 uid=u-d2 rv=3 propagation=Background",
		"DELETE widgets.v1.example.com ns3/d3 uid=u-d3 rv=3 propagation=Background")

	s.observe(d4) // the graph still holds the answer
	s.settle()
	s.AssertOutcomes("delete u-d4: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns4/d4 uid=u-d4 rv=3 propagation=Background")

	s.observeDeleted(d1, d2, d3, d4)
	s.AssertNoNode("u-th")
	s.observe(d5) // the graph forgot the owner; the absent cache did not
	s.assertQueued(nil, []graph.Ref{scClaim(th, "ns5")})
	s.settle()
	s.AssertOutcomes("verify u-th: Done", "delete u-d5: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns5/d5 uid=u-d5 rv=3 propagation=Background")
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
	s.AssertActions(`PATCH widgets.v1.example.com ns/with-live strategic {"metadata":{"uid":"u-with-live","resourceVersion":"4","ownerReferences":[{"$patch":"delete","uid":"u-other"}]}}`)
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
