package gc

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/internal/work"
)

// TestStandbyEmitsNoEvents: wired as cascade wires it (a HeldRecorder on the leader gate), a standby's graph finds a reference to an owner in another
// namespace, but the OwnerRefInvalidNamespace Event waits until the replica leads; then it is
// emitted once. The count is exported at once (metrics are not writes).
func TestStandbyEmitsNoEvents(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	gate := &leader.Gate{}
	held := client.NewHeldRecorder(rec, gate)
	m := NewMetrics(prometheus.NewRegistry())
	c := New(Options{Client: client.New(clienttest.NewFake()), Metrics: m, Events: held, Leader: gate})
	t.Cleanup(func() { c.deleteQueue.ShutDown(); c.verifyQueue.ShutDown() })

	owner := graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns2", Name: "w-u-owner", UID: "u-owner"}, ResourceVersion: "1"}
	observe(c, owner, widgetObj("dep", "u-dep", "u-owner")) // dep lives in "ns"
	if n := len(rec.Events); n != 0 {
		t.Fatalf("a standby emitted %d events: %v", n, <-rec.Events)
	}
	if v := testutil.ToFloat64(m.InvalidNamespaceRefs); v != 1 {
		t.Errorf("invalid_namespace_refs_total = %v, want 1", v)
	}
	gate.Open()
	_ = held.Run(context.Background()) // sends what was held
	if n := len(rec.Events); n != 1 {
		t.Fatalf("after leading: %d events, want 1", n)
	}
	want := `Warning OwnerRefInvalidNamespace ownerRef [example.com/v1/Widget, namespace: ns, name: w-u-owner, uid: u-owner] does not exist in namespace "ns"`
	if got := <-rec.Events; got != want {
		t.Errorf("event = %q\nwant    %q", got, want)
	}
	// From now on Events go out at once.
	observe(c, widgetObj("dep2", "u-dep2", "u-owner"))
	if n := len(rec.Events); n != 1 {
		t.Errorf("leader: %d events for a new invalid reference, want 1", n)
	}
}

// fakeOrphanRecords fails its first fails loads, then returns refs.
type fakeOrphanRecords struct {
	fails, calls int
	refs         []graph.Ref
}

func (f *fakeOrphanRecords) Load(context.Context) ([]graph.Ref, error) {
	f.calls++
	if f.calls <= f.fails {
		return nil, errors.New(`configmaps "cascade-orphaned-owners" is forbidden`)
	}
	return f.refs, nil
}

// recordTestController is newWorkerTestController with an orphan record that fails its first
// fails loads, on a fake clock, and the calls of OrphanRecordDegraded.
func recordTestController(t *testing.T, fails int, refs []graph.Ref, objs ...runtime.Object) (*Controller, *fakeOrphanRecords, *clocktesting.FakeClock, *[]error, func() []string) {
	t.Helper()
	c, acts := newWorkerTestController(t, objs...)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &fakeOrphanRecords{fails: fails, refs: refs}
	var degraded []error
	c.opts.OrphanRecords, c.opts.Clock = rec, clk
	c.opts.OrphanRecordDegraded = func(_ context.Context, err error) { degraded = append(degraded, err) }
	c.record = recordGate{open: make(chan struct{}), held: map[types.UID]struct{}{}} // as New makes it with a record
	return c, rec, clk, &degraded, acts
}

// runLoader runs loadOrphanRecords until it returns or until the gate opens and it waits; in a
// synctest bubble, the clock moves by step each time the loader waits on it. It returns whether
// the loader returned.
func runLoader(t *testing.T, ctx context.Context, c *Controller, clk *clocktesting.FakeClock, step time.Duration, until func() bool) bool {
	t.Helper()
	done := make(chan struct{})
	go func() { c.loadOrphanRecords(ctx); close(done) }()
	for {
		synctest.Wait() // the loader is done, or waits on the clock
		select {
		case <-done:
			return true
		default:
		}
		if until() {
			return false
		}
		if !clk.HasWaiters() {
			t.Fatal("the loader neither finished nor waits to try again")
		}
		clk.Step(step)
	}
}

// TestOrphanRecordLoadHoldsOnlyCollection (issue 32.5): while the orphan record fails to load,
// the one decision it can change waits: a dependent whose owner is absent is not deleted (the
// owner may be a recorded orphan), and goes back to the queue when the gate opens. Everything
// else goes on at once: a dependent of an owner waiting in the foreground is deleted. Failing
// for RecordLoadBound degrades (told once); the load goes on and its owners still reach the
// graph when it works. Must never be deleted: "dep" before the gate opens.
func TestOrphanRecordLoadHoldsOnlyCollection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		yes := true
		c, rec, clk, degraded, acts := recordTestController(t, 1<<30, []graph.Ref{widgetObj("w-u-owner", "u-owner").Ref},
			clienttest.Widget("ns", "dep", "u-dep", "3", clienttest.OwnerRef("u-owner", nil)),
			clienttest.Widget("ns", "fg-dep", "u-fg-dep", "3", clienttest.OwnerRef("u-fg", &yes)))
		fg := widgetObj("w-u-fg", "u-fg")
		fg.Deleting, fg.Finalizers = true, graph.FinalizerForeground
		fgDep := widgetObj("fg-dep", "u-fg-dep", "u-fg")
		fgDep.Owners[0].BlockOwnerDeletion = true
		observe(c, widgetObj("w-u-owner", "u-owner"), widgetObj("dep", "u-dep", "u-owner"), fg, fgDep)
		observeDeleted(c, "u-owner")

		ctx := context.Background()
		queued := 0
		for c.deleteQueue.Len() > 0 { // what the observations queued: both dependents
			queued++
			c.deleteQueue.ProcessNext(ctx, func(ctx context.Context, uid types.UID) (work.Outcome, error) {
				out, err := c.attemptToDelete(ctx, uid)
				if out != work.Done || err != nil {
					t.Fatalf("%s: %v, %v", uid, out, err)
				}
				return out, err
			})
		}
		if queued != 2 {
			t.Fatalf("%d dependents queued by the observations, want 2", queued)
		}
		want := []string{"DELETE widgets.v1.example.com ns/fg-dep uid=u-fg-dep rv=3 propagation=Background"}
		if got := acts(); !slices.Equal(got, want) {
			t.Fatalf("while the record does not load:\n%q\nwant only the foreground's delete\n%q", got, want)
		}

		// Failing: the gate stays closed until RecordLoadBound has passed since the first failure.
		start := clk.Now()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		runLoader(t, ctx, c, clk, time.Second, c.recordLoaded)
		if waited := clk.Since(start); waited < RecordLoadBound || waited > RecordLoadBound+time.Second {
			t.Errorf("the gate opened after %s, want %s", waited, RecordLoadBound)
		}
		if len(*degraded) != 1 {
			t.Errorf("OrphanRecordDegraded told %d times, want once", len(*degraded))
		}
		if c.deleteQueue.Len() != 1 {
			t.Errorf("%d dependents queued again when the gate opened, want 1 (dep)", c.deleteQueue.Len())
		}
		if got := acts(); len(got) != 1 {
			t.Errorf("API calls after the gate opened, before the workers: %q", got[1:])
		}

		// The load is still retried and reaches the graph when it works: the reference to the
		// recorded owner is then OwnerOrphaned (removed, never a reason to delete).
		rec.fails = rec.calls + 1
		for range 3 {
			synctest.Wait()
			clk.Step(30 * time.Second)
		}
		synctest.Wait()
		if _, owners, _ := c.view("u-dep"); owners[0].State != graph.OwnerOrphaned {
			t.Errorf("after the late load: %v, want Orphaned", owners[0].State)
		}
		if len(*degraded) != 1 {
			t.Errorf("OrphanRecordDegraded told %d times, want once", len(*degraded))
		}
	})
}

// TestOrphanRecordLoadedWithinTheBound: a load that works after two failures opens the gate
// before the bound, with the recorded owner in the graph, and degrades nothing: the dependent
// held back loses its reference to the recorded owner instead of being deleted. Must never be
// deleted: "dep" (its owner is a recorded orphan).
func TestOrphanRecordLoadedWithinTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, rec, clk, degraded, acts := recordTestController(t, 2, []graph.Ref{widgetObj("w-u-owner", "u-owner").Ref},
			clienttest.Widget("ns", "dep", "u-dep", "3", clienttest.OwnerRef("u-owner", nil)))
		observe(c, widgetObj("w-u-owner", "u-owner"), widgetObj("dep", "u-dep", "u-owner"))
		observeDeleted(c, "u-owner")
		if _, owners, _ := c.view("u-dep"); owners[0].State != graph.OwnerAbsent {
			t.Fatalf("before the record: %v, want Absent", owners[0].State)
		}
		ctx := context.Background()
		if got, err := c.attemptToDelete(ctx, "u-dep"); got != work.Done || err != nil {
			t.Fatalf("u-dep: %v, %v", got, err)
		}
		if !runLoader(t, ctx, c, clk, time.Second, func() bool { return false }) {
			t.Fatal("the loader did not return after loading")
		}
		if rec.calls != 3 || !c.recordLoaded() || len(*degraded) != 0 {
			t.Errorf("%d loads, gate open %v, degraded %d times; want 3, true, 0", rec.calls, c.recordLoaded(), len(*degraded))
		}
		if c.deleteQueue.Len() != 1 || !c.deleteQueue.ProcessNext(ctx, c.attemptToDelete) {
			t.Fatalf("%d dependents queued again when the record loaded, want 1 (dep)", c.deleteQueue.Len())
		}
		want := []string{smpRemove("dep", "u-dep", "u-owner")}
		if got := acts(); !slices.Equal(got, want) {
			t.Errorf("actions:\n%q\nwant\n%q", got, want)
		}
	})
}
