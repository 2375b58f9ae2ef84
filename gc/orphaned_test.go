package gc

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/graph"
)

// orphanedSet is a FinalizerHandler that only answers Orphaned.
type orphanedSet map[types.UID]bool

func (orphanedSet) Enqueue(types.UID)             {}
func (s orphanedSet) Orphaned(uid types.UID) bool { return s[uid] }

// newOrphanTestController returns a controller whose graph has: owner (deleted, as after its
// orphan finalizer was removed), dep (referencing only owner), shared (referencing owner and
// gone, an owner deleted in the background) and kept (referencing owner and live).
func newOrphanTestController(t *testing.T, orphaned orphanedSet) (*Controller, func() []string) {
	t.Helper()
	fake := newFakeClient(
		widget("ns", "dep", "u-dep", "3", ownerRef("u-owner", nil)),
		widget("ns", "shared", "u-shared", "3", ownerRef("u-owner", nil), ownerRef("u-gone", nil)),
		widget("ns", "kept", "u-kept", "3", ownerRef("u-owner", nil), ownerRef("u-live", nil)),
	)
	c := New(Deps{Client: NewObjectClient(fake), Metrics: NewMetrics(prometheus.NewRegistry()), Finalizers: orphaned})
	r := Resource{GVR: widgets, Kind: "Widget", Namespaced: true}
	m := &monitor{res: r}
	c.monitors.byR[widgets] = m
	c.monitors.byGK[schema.GroupKind{Group: "example.com", Kind: "Widget"}] = m

	obj := func(name string, uid types.UID, owners ...types.UID) graph.Object {
		o := graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: name, UID: uid}, ResourceVersion: "3"}
		for _, u := range owners {
			o.Owners = append(o.Owners, graph.OwnerRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "w-" + string(u), UID: u})
		}
		return o
	}
	for _, o := range []graph.Object{
		obj("w-u-owner", "u-owner"), obj("w-u-gone", "u-gone"), obj("w-u-live", "u-live"),
		obj("dep", "u-dep", "u-owner"), obj("shared", "u-shared", "u-owner", "u-gone"), obj("kept", "u-kept", "u-owner", "u-live"),
	} {
		c.apply(graph.Event{Type: graph.EventObserved, Object: o})
	}
	for _, uid := range []types.UID{"u-owner", "u-gone"} {
		c.apply(graph.Event{Type: graph.EventDeleted, Object: graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", UID: uid}}})
	}
	return c, func() []string { return actions(fake) }
}

// TestOrphanedOwnerIsNeverAReasonToDelete: a dependent whose reference to an owner deleted with
// the orphan policy reaches the collector after the owner is gone loses that reference and is
// never deleted because of it; its other references are decided as usual afterwards.
func TestOrphanedOwnerIsNeverAReasonToDelete(t *testing.T) {
	c, acts := newOrphanTestController(t, orphanedSet{"u-owner": true})
	ctx := context.Background()

	if got := c.attemptToDelete(ctx, "u-dep"); got != done {
		t.Errorf("dep: outcome %v, want done", got)
	}
	if got := c.attemptToDelete(ctx, "u-shared"); got != requeue {
		t.Errorf("shared: outcome %v, want requeue (its other reference is decided on the next view)", got)
	}
	if got := c.attemptToDelete(ctx, "u-kept"); got != requeue {
		t.Errorf("kept: outcome %v, want requeue", got)
	}
	want := []string{
		`patch example.com/v1, Resource=widgets ns=ns name=dep application/strategic-merge-patch+json {"metadata":{"uid":"u-dep","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`,
		`patch example.com/v1, Resource=widgets ns=ns name=shared application/strategic-merge-patch+json {"metadata":{"uid":"u-shared","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`,
		`patch example.com/v1, Resource=widgets ns=ns name=kept application/strategic-merge-patch+json {"metadata":{"uid":"u-kept","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`,
	}
	if got := acts(); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
}

// TestNotOrphanedOwnerStillCollects: without the record, the same dependent of a gone owner is
// deleted (background semantics are unchanged by the hook).
func TestNotOrphanedOwnerStillCollects(t *testing.T) {
	c, acts := newOrphanTestController(t, orphanedSet{})
	if got := c.attemptToDelete(context.Background(), "u-dep"); got != done {
		t.Errorf("outcome %v, want done", got)
	}
	if got := acts(); !slices.Equal(got, []string{"delete example.com/v1, Resource=widgets ns=ns name=dep"}) {
		t.Errorf("actions = %q, want the DELETE of dep", got)
	}
}
