package finalizers

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/work"
)

// Owners deleted in the foreground (foreground.go): the finalizer goes once no dependent blocks.

// TestForeground: while a dependent blocks, the owner keeps its finalizer and no API call is
// made; once none blocks, only foregroundDeletion is removed.
func TestForeground(t *testing.T) {
	fake := newFakeClient(widget("owner", "u-owner", "5", true, []string{metav1.FinalizerDeleteDependents, "example.com/keep"}))
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerForeground)
	view.deps["u-owner"] = [][]graph.Ref{{wref("d1", "u-d1"), wref("d2", "u-d2")}}
	view.blocking["u-owner"] = 1
	reg := prometheus.NewRegistry()
	p := newTestProcessor(t, view, fake, Options{Metrics: NewMetrics(reg)})

	for range 3 {
		if got, _ := p.process(context.Background(), "u-owner"); got != work.Retry {
			t.Fatalf("process() with a blocking dependent = %v, want backoff", got)
		}
	}
	if got := actions(fake); len(got) != 0 {
		t.Errorf("actions while blocked = %q, want none", got)
	}
	view.set(func(v *fakeView) { v.blocking["u-owner"] = 0 })
	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, want done", got)
	}
	want := []string{
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"5","finalizers":["example.com/keep"]}}`,
	}
	if got := actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
	if v := counter(t, p.opts.Metrics.FinalizersRemoved.WithLabelValues(metav1.FinalizerDeleteDependents)); v != 1 {
		t.Errorf("finalizers_removed_total{foregroundDeletion} = %v, want 1", v)
	}
}

// TestForegroundBlockedByUnsyncedResource: a foreground owner waiting on a blocking dependent
// whose resource cannot be listed keeps its finalizer (never removed early) and says so once:
// a Warning Event naming the resource, and the counter. A non-blocking dependent of the same
// resource and a blocking one of a synced resource are not reported.
func TestForegroundBlockedByUnsyncedResource(t *testing.T) {
	fake := newFakeClient(widget("owner", "u-owner", "5", true, []string{metav1.FinalizerDeleteDependents}))
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerForeground)
	gizmo := func(name string, uid types.UID) graph.Ref {
		return graph.Ref{APIVersion: "example.com/v1", Kind: "Gizmo", Name: name, UID: uid}
	}
	view.deps["u-owner"] = [][]graph.Ref{{gizmo("g-block", "u-g1"), gizmo("g-free", "u-g2"), wref("w-block", "u-w1")}}
	ref := func(block bool) []graph.OwnerView {
		return []graph.OwnerView{{OwnerRef: graph.OwnerRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "owner", UID: "u-owner", BlockOwnerDeletion: block}}}
	}
	view.owners["u-g1"], view.owners["u-g2"], view.owners["u-w1"] = ref(true), ref(false), ref(true)
	view.blocking["u-owner"] = 2
	view.unsynced["example.com/v1/Gizmo"] = true
	rec := record.NewFakeRecorder(10)
	p := newTestProcessor(t, view, fake, Options{Metrics: NewMetrics(prometheus.NewRegistry()), Events: rec})

	for range 3 {
		if got, err := p.process(context.Background(), "u-owner"); got != work.Retry || err != nil {
			t.Fatalf("process() = %v, %v; want Retry while a dependent blocks", got, err)
		}
	}
	if got := actions(fake); len(got) != 0 {
		t.Errorf("actions while blocked = %q, want none: the finalizer must stay", got)
	}
	events := clienttest.Events(rec)
	want := "Warning " + EventReasonBlockedByUnsynced + " Waiting for dependent /g-block of resource gizmos.v1.example.com, which cascade cannot list or watch; foreground deletion finishes once it syncs"
	if len(events) != 1 || events[0] != want {
		t.Errorf("events = %q, want exactly\n%q", events, want)
	}
	if v := counter(t, p.opts.Metrics.BlockedByUnsynced.WithLabelValues("gizmos.v1.example.com")); v != 1 {
		t.Errorf("foreground_blocked_by_unsynced_total = %v, want 1", v)
	}
}

// TestForegroundFinishedWithUnsyncedResources: with no known blocking dependent the finalizer
// goes (cascade proceeds with what synced), and while a resource is unsynced the owner gets one
// Warning saying blocking dependents there were not waited for.
func TestForegroundFinishedWithUnsyncedResources(t *testing.T) {
	fake := newFakeClient(widget("owner", "u-owner", "5", true, []string{metav1.FinalizerDeleteDependents}))
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerForeground)
	view.unsynced["example.com/v1/Gizmo"] = true
	rec := record.NewFakeRecorder(10)
	p := newTestProcessor(t, view, fake, Options{Events: rec})
	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, %v; want Done", got, err)
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	want := "Warning " + EventReasonFinishedUnsynced + " No known dependent blocks this owner, but gizmos.v1.example.com cannot be listed or watched: blocking dependents there, if any, are not waited for"
	if got := <-rec.Events; got != want {
		t.Errorf("event %q\nwant  %q", got, want)
	}
	if f := live(t, fake, "owner").Finalizers; len(f) != 0 {
		t.Errorf("finalizers %v, want the foregroundDeletion finalizer removed", f)
	}
}

// TestForegroundWaitsForResourcesCatchingUp: a resource whose watch ended and is not open again
// (an API server restart, an expired watch being relisted) may hold a blocking dependent written
// meanwhile that the graph has not seen yet. The owner keeps its finalizer while that lasts, and
// loses it once the watch is open again, or after CatchUpWait whatever happens (no stuck
// deletion for a resource that stays broken).
func TestForegroundWaitsForResourcesCatchingUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reopen  bool          // the watch opens again
		elapsed time.Duration // after the watch ended
		want    work.Outcome
	}{
		{name: "catching up", elapsed: time.Second, want: work.Retry},
		{name: "caught up", reopen: true, elapsed: time.Second, want: work.Done},
		{name: "past the wait", elapsed: 31 * time.Second, want: work.Done},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeClient(widget("owner", "u-owner", "5", true, []string{metav1.FinalizerDeleteDependents}))
			view := newFakeView()
			view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerForeground)
			clk := testingclock.NewFakeClock(time.Now())
			view.staleSince["example.com/v1/Gizmo"] = clk.Now()
			p := newTestProcessor(t, view, fake, Options{Clock: clk, CatchUpWait: 30 * time.Second})
			clk.Step(tc.elapsed)
			if tc.reopen {
				view.set(func(v *fakeView) { delete(v.staleSince, "example.com/v1/Gizmo") })
			}
			got, err := p.process(context.Background(), "u-owner")
			if got != tc.want || err != nil {
				t.Fatalf("process() = %v, %v; want %v", got, err, tc.want)
			}
			f := live(t, fake, "owner").Finalizers
			if kept := len(f) == 1; kept != (tc.want == work.Retry) {
				t.Errorf("finalizers %v after %v (watch open again: %v)", f, tc.elapsed, tc.reopen)
			}
		})
	}
}
