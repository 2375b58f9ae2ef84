package gc

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/internal/work/worktest"
)

// TestReverifySchedule: a claim is first due one period after it is listed, then after 2, 4,
// ... periods up to 16; a claim no longer listed is forgotten (and starts over if listed
// again), so the schedule holds only what the graph lists.
func TestReverifySchedule(t *testing.T) {
	const p = 10 * time.Second
	s := newReverifySchedule(p)
	a := graph.Ref{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a", UID: "u-a"}
	b := graph.Ref{APIVersion: "v1", Kind: "Node", Name: "b", UID: "u-b"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	var checks []time.Duration // when a was due, relative to t0
	for step := time.Duration(0); step <= 200*p; step += p {
		claims := []graph.Ref{a}
		if step >= 3*p && step < 6*p {
			claims = append(claims, b)
		}
		for _, c := range s.due(t0.Add(step), claims) {
			if c == a {
				checks = append(checks, step)
			}
		}
		if len(s.next) != len(claims) {
			t.Fatalf("at %v the schedule holds %d claims, want the %d listed", step, len(s.next), len(claims))
		}
	}
	// Intervals: 1, 2, 4, 8, 16, 16, ... periods.
	want := []time.Duration{1 * p, 3 * p, 7 * p, 15 * p, 31 * p, 47 * p, 63 * p, 79 * p, 95 * p, 111 * p, 127 * p, 143 * p, 159 * p, 175 * p, 191 * p}
	if !slices.Equal(checks, want) {
		t.Errorf("a checked at %v\nwant %v", checks, want)
	}
	// b was listed at 3p, 4p, 5p: due at 4p only (first check one period after), then dropped.
	s2 := newReverifySchedule(p)
	var bChecks []time.Duration
	for step := time.Duration(0); step <= 10*p; step += p {
		var claims []graph.Ref
		if step >= 3*p && step < 6*p || step >= 8*p {
			claims = []graph.Ref{b}
		}
		for range s2.due(t0.Add(step), claims) {
			bChecks = append(bChecks, step)
		}
	}
	if want := []time.Duration{4 * p, 9 * p}; !slices.Equal(bChecks, want) {
		t.Errorf("b checked at %v, want %v (forgotten when unlisted, starting over when listed again)", bChecks, want)
	}
}

// TestVirtualOwnerReverified: a dependent's owner of a kind cascade does not watch is found
// present by a GET, then deleted; nothing is observed, yet the re-verification of the claim
// the graph lists answers absent and the dependent is collected. While the owner exists the
// dependent is kept.
func TestVirtualOwnerReverified(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	owner := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", UID: "u-cm"},
	}
	dep := clienttest.Widget("ns", "dep", "u-dep", "3", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "u-cm"})
	fake := clienttest.NewFake(owner, dep)
	c := newControllerOver(t, fake)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	c.opts.Mapper = resettable{mapper}
	ctx := context.Background()

	d := widgetObj("dep", "u-dep")
	d.Owners = []graph.OwnerRef{{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "u-cm"}}
	observe(c, d)
	claims := worktest.Drain(c.verifyQueue)
	if len(claims) != 1 {
		t.Fatalf("verify queue = %v, want the owner's claim", claims)
	}
	if out, err := c.verifyOwner(ctx, claims[0]); out != work.Done || err != nil {
		t.Fatalf("verifyOwner = %v, %v", out, err)
	}
	if out, err := c.attemptToDelete(ctx, "u-dep"); out != work.Done || err != nil {
		t.Fatalf("attemptToDelete = %v, %v", out, err)
	}
	c.mu.RLock()
	listed := c.g.UnobservedPresentClaims()
	c.mu.RUnlock()
	if !slices.Equal(listed, claims) {
		t.Fatalf("present-but-unobserved claims = %v, want %v", listed, claims)
	}

	if err := fake.Resource(cms).Namespace("ns").Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fake.ClearActions()
	if out, err := c.verifyOwner(ctx, listed[0]); out != work.Done || err != nil {
		t.Fatalf("re-verify = %v, %v", out, err)
	}
	if queued := worktest.Drain(c.deleteQueue); !slices.Contains(queued, types.UID("u-dep")) {
		t.Fatalf("the absent answer queued %v, want the dependent", queued)
	}
	if out, err := c.attemptToDelete(ctx, "u-dep"); out != work.Done || err != nil {
		t.Fatalf("attemptToDelete = %v, %v", out, err)
	}
	want := []string{"GET configmaps.v1 ns/cm", "DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background"}
	if got := clienttest.Actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions = %q, want %q", got, want)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if left := c.g.UnobservedPresentClaims(); len(left) != 0 {
		t.Errorf("claims still listed after the absent answer: %v", left)
	}
}
