package gc

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/policy"
)

// Explain and the workers take the same decision (decide.go): every rule is in the policy
// chain, none is applied by the workers after it. These scenarios are the cases where, before,
// a rule was applied after the decision: a reference whose kind has no REST mapping, which
// `cascade explain` did not see, so it said Delete (or the removal of that reference) for an
// object the workers would never delete.

// watchUnmapped makes the scenario watch r without r being in the REST mapper: cascade observed
// r's objects, then discovery dropped the kind (TestScenarioGoneKindObservedOwner). A reference
// naming r's kind has no REST mapping.
func (s *scenario) watchUnmapped(r Resource) {
	s.ByKind[r.GVR.GroupVersion().WithKind(r.Kind)] = r.GVR
	done := make(chan struct{})
	close(done)
	m := &monitor{res: r, store: &graphStore{res: r, graph: s.c}, cancel: func() {}, done: done}
	m.store.synced.Store(true)
	s.c.monitors.byR[r.GVR] = m
	s.c.monitors.byGK[schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}] = m
}

// explainDecision is Explain's decision on uid, which must exist.
func (s *scenario) explainDecision(uid types.UID) ExplainedDecision {
	s.t.Helper()
	e, ok := s.c.Explain(context.Background(), uid)
	if !ok || e.Decision == nil {
		s.t.Fatalf("no decision explained for %s: %+v", uid, e)
	}
	return *e.Decision
}

func assertExplained(t *testing.T, got, want ExplainedDecision) {
	t.Helper()
	if got.Action != want.Action || got.Reason != want.Reason || !slices.Equal(got.Owners, want.Owners) ||
		got.Propagation != want.Propagation || !slices.Equal(got.Unmapped, want.Unmapped) || got.Error != want.Error {
		t.Errorf("explained decision %+v, want %+v", got, want)
	}
}

// TestScenarioExplainAgreesUnmappedOwner: a Gadget owner was observed, then observed deleted,
// and its kind has no REST mapping now. "alone" references only the Gadget: explain says it is
// kept and retried (not Delete), and the worker sends nothing and retries. "kept" references the
// Gadget, a live Widget and a deleted Widget: explain says only the deleted Widget's reference
// goes (not the Gadget's), and the worker's patch removes exactly that one.
func TestScenarioExplainAgreesUnmappedOwner(t *testing.T) {
	g := scObj(scGadgets, "g", "u-g", "1")
	w := scObj(scWidgets, "w", "u-w", "1")
	other := scObj(scWidgets, "other", "u-other", "1")
	alone := scObj(scWidgets, "alone", "u-alone", "3", gctest.RefTo(g))
	kept := scObj(scWidgets, "kept", "u-kept", "4", gctest.RefTo(g), gctest.RefTo(w), gctest.RefTo(other))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{w, alone, kept}})
	s.watchUnmapped(scGadgets)
	s.observe(g, w, other, alone, kept)
	s.observeDeleted(g, other)
	s.AssertOwnerStates("u-alone", graph.OwnerAbsent)
	s.AssertOwnerStates("u-kept", graph.OwnerAbsent, graph.OwnerPresent, graph.OwnerAbsent)

	// Explained first, then done by the workers (the deletion of g queued both).
	e, _ := s.c.Explain(context.Background(), "u-alone")
	if len(e.Owners) != 1 || !e.Owners[0].UnknownKind {
		t.Errorf("owners %+v, want the Gadget's kind unknown", e.Owners)
	}
	// The dependent kept, not collected.
	assertExplained(t, s.explainDecision("u-alone"),
		ExplainedDecision{Action: "Retry", Reason: "UnmappedOwner", Unmapped: []types.UID{"u-g"}})
	// The reference kept while another owner is live: only the mapped dangling one goes.
	assertExplained(t, s.explainDecision("u-kept"),
		ExplainedDecision{Action: "RemoveRefs", Reason: "StaleOwnerRefs", Owners: []types.UID{"u-other"}, Unmapped: []types.UID{"u-g"}})
	s.processDeletes()
	s.AssertOutcomes("delete u-alone: Retry error", "delete u-kept: Done")
	s.AssertActions(`PATCH widgets.v1.example.com ns/kept strategic {"metadata":{"uid":"u-kept","resourceVersion":"4","ownerReferences":[{"$patch":"delete","uid":"u-other"}]}}`)
	s.AssertLiveOwners(alone, "u-g")
	s.AssertLiveOwners(kept, "u-g", "u-w")
	s.AssertMetric("cascade_rest_mapping_errors_total", 2) // one kept reference in each decision

	// The kind comes back (its CRD created again, discovery maps it): the retry and the next
	// event decide as explain says now, and the references are judged as any other.
	s.c.opts.Mapper.(fixedMapper).Add(scGadgets.GVR.GroupVersion().WithKind(scGadgets.Kind), meta.RESTScopeNamespace)
	s.deliver(kept)
	assertExplained(t, s.explainDecision("u-alone"),
		ExplainedDecision{Action: "Delete", Reason: "OwnersGone", Propagation: "Background"})
	assertExplained(t, s.explainDecision("u-kept"),
		ExplainedDecision{Action: "RemoveRefs", Reason: "StaleOwnerRefs", Owners: []types.UID{"u-g"}})
	s.retryPending()
	s.processDeletes()
	s.AssertOutcomes("delete u-kept: Done", "delete u-alone: Done")
	s.AssertActions(`PATCH widgets.v1.example.com ns/kept strategic {"metadata":{"uid":"u-kept","resourceVersion":"4","ownerReferences":[{"$patch":"delete","uid":"u-g"}]}}`,
		"DELETE widgets.v1.example.com ns/alone uid=u-alone rv=3 propagation=Background")
}

// TestScenarioExplainAgreesUnmappedOwnerCollectAfter: with the policy's collect: After, the
// workers never checked the references' kinds (the check came after a Delete decision, and
// collect: After deletes through its own path): a dependent whose only owner's kind has no REST
// mapping was deleted once its delay had passed. Explain and the worker agree now: kept,
// retried, and not even read for its orphaned-at time.
func TestScenarioExplainAgreesUnmappedOwnerCollectAfter(t *testing.T) {
	g := scObj(scGadgets, "g", "u-g", "1")
	dep := scWith(scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(g)), func(o *metav1.PartialObjectMetadata) {
		// The delay started two minutes ago: over.
		o.Annotations = map[string]string{policy.OrphanedAtAnnotation: policy.FormatOrphanedAt(scT0.Add(-2*time.Minute), []types.UID{"u-g"})}
	})
	pol, _, errs := policy.Parse([]byte("apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: widgets.example.com\n  collect: After 1m\n"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{dep}, policy: pol})
	s.watchUnmapped(scGadgets)
	s.observe(g, dep)
	s.observeDeleted(g)
	assertExplained(t, s.explainDecision("u-dep"),
		ExplainedDecision{Action: "Retry", Reason: "UnmappedOwner", Unmapped: []types.UID{"u-g"}})
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Retry error")
	s.AssertActions()
	s.AssertLiveOwners(dep, "u-g")
}
