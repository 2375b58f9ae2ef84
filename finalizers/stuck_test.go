package finalizers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/work"
)

// TestStuckDeletionReported: a foreground owner blocked longer than StuckAfter gets one
// Warning Event naming the blocking dependent and the finalizer that holds it, again only
// after another StuckAfter; cascade_oldest_waiting_owner_seconds shows the wait. The owner's
// finalizer is never removed meanwhile.
func TestStuckDeletionReported(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fake := newFakeClient(
		widget("owner", "u-owner", "5", true, []string{metav1.FinalizerDeleteDependents}),
		widget("held", "u-held", "3", true, []string{"example.com/hold"}, refTo("owner", "u-owner")),
	)
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerForeground)
	view.deps["u-owner"] = [][]graph.Ref{{wref("held", "u-held")}}
	view.owners["u-held"] = []graph.OwnerView{{OwnerRef: graph.OwnerRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "owner", UID: "u-owner", BlockOwnerDeletion: true}}}
	view.blocking["u-owner"] = 1
	rec := record.NewFakeRecorder(10)
	m := NewMetrics(prometheus.NewRegistry())
	p := newTestProcessor(t, view, fake, Options{Clock: clk, StuckAfter: time.Minute, Events: rec, Metrics: m})
	process := func() {
		t.Helper()
		if got, _ := p.process(context.Background(), "u-owner"); got != work.Retry {
			t.Fatalf("process() = %v, want Retry while blocked", got)
		}
	}

	process()
	clk.Step(59 * time.Second)
	process()
	if n := len(rec.Events); n != 0 {
		t.Fatalf("%d events before the threshold", n)
	}
	clk.Step(time.Second)
	process()
	process()
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d events at the threshold, want 1", n)
	}
	ev := <-rec.Events
	for _, want := range []string{"Warning " + EventReasonStuck, "Waiting 1m0s on finalizer foregroundDeletion for 1 dependent(s)", "Widget ns/held (being deleted, held by finalizers [example.com/hold])"} {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q lacks %q", ev, want)
		}
	}
	clk.Step(59 * time.Second)
	process()
	if n := len(rec.Events); n != 0 {
		t.Errorf("reported again within StuckAfter")
	}
	clk.Step(time.Second)
	process()
	if n := len(rec.Events); n != 1 {
		t.Errorf("%d events after another StuckAfter, want 1", n)
	}
	p.resync()
	if v := testutil.ToFloat64(m.OldestWaiting.WithLabelValues(metav1.FinalizerDeleteDependents)); v != 120 {
		t.Errorf("oldest_waiting_owner_seconds{foregroundDeletion} = %v, want 120", v)
	}
	if v := testutil.ToFloat64(m.OldestWaiting.WithLabelValues(metav1.FinalizerOrphanDependents)); v != 0 {
		t.Errorf("oldest_waiting_owner_seconds{orphan} = %v, want 0", v)
	}
	for _, a := range actions(fake) {
		if strings.HasPrefix(a, "PATCH ") {
			t.Errorf("the finalizer was touched while blocked: %s", a)
		}
	}
}

// TestCompanionDiagnosesOnly (--mode=companion): kube-controller-manager's collector finishes
// the GC finalizers, so the processor writes nothing, whatever the owners wait for: an orphaning
// owner whose dependent still references it and a foreground owner blocked by a dependent held by
// a foreign finalizer are followed (Retry) and, after StuckAfter, each gets the DeletionStuck
// Event in the companion's words. Once nothing blocks the foreground owner, the processor is
// done with it, and leaves its finalizer to the in-tree collector (a collector would remove it).
func TestCompanionDiagnosesOnly(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fake := newFakeClient(
		widget("fg", "u-fg", "5", true, []string{metav1.FinalizerDeleteDependents}),
		widget("held", "u-held", "3", true, []string{"example.com/hold"}, refTo("fg", "u-fg")),
		widget("orph", "u-orph", "6", true, []string{metav1.FinalizerOrphanDependents}),
		widget("kept", "u-kept", "4", false, nil, refTo("orph", "u-orph")),
	)
	view := newFakeView()
	view.nodes["u-fg"] = ownerNode("fg", "u-fg", graph.FinalizerForeground)
	view.deps["u-fg"] = [][]graph.Ref{{wref("held", "u-held")}}
	view.owners["u-held"] = []graph.OwnerView{{OwnerRef: graph.OwnerRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "fg", UID: "u-fg", BlockOwnerDeletion: true}}}
	view.blocking["u-fg"] = 1
	view.nodes["u-orph"] = ownerNode("orph", "u-orph", graph.FinalizerOrphan)
	view.deps["u-orph"] = [][]graph.Ref{{wref("kept", "u-kept")}}
	rec := record.NewFakeRecorder(10)
	p := newTestProcessor(t, view, fake, Options{Clock: clk, StuckAfter: time.Minute, Events: rec, Companion: true})
	process := func(uid string, want work.Outcome) {
		t.Helper()
		if got, err := p.process(context.Background(), types.UID(uid)); got != want || err != nil {
			t.Fatalf("process(%s) = %v, %v; want %v", uid, got, err, want)
		}
	}

	process("u-fg", work.Retry)
	process("u-orph", work.Retry)
	if n := len(rec.Events); n != 0 {
		t.Fatalf("%d events before the threshold", n)
	}
	clk.Step(time.Minute)
	process("u-fg", work.Retry)
	process("u-orph", work.Retry)
	var events []string
	for range 2 {
		select {
		case ev := <-rec.Events:
			events = append(events, ev)
		default:
			t.Fatalf("events: %q, want 2", events)
		}
	}
	for i, want := range [][]string{
		{"Warning " + EventReasonStuck, "on finalizer foregroundDeletion for 1 dependent(s)", "Widget ns/held (being deleted, held by finalizers [example.com/hold])"},
		{"Warning " + EventReasonStuck, "on finalizer orphan for 1 dependent(s)", "Widget ns/kept (still references the owner: kube-controller-manager's garbage collector has not removed the reference)"},
	} {
		for _, w := range want {
			if !strings.Contains(events[i], w) {
				t.Errorf("event %q lacks %q", events[i], w)
			}
		}
	}

	view.set(func(v *fakeView) { v.blocking["u-fg"] = 0; v.deps["u-fg"] = [][]graph.Ref{{}} })
	process("u-fg", work.Done)
	for _, a := range actions(fake) {
		if !strings.HasPrefix(a, "GET ") {
			t.Errorf("companion mode sent %s", a)
		}
	}
}
