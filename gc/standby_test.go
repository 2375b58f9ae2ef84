package gc

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/leader"
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

// TestOrphanRecordsLoadedBeforeCollecting: a new leader whose graph holds a dependent of an owner
// it saw go (absent: collectable) loads the previous leader's record first, retrying while it
// fails; afterwards the reference is OwnerOrphaned (removed, the dependent kept). A load that
// never succeeds never lets the workers start. The loader waits on a fake clock between tries;
// in a synctest bubble, the test moves the clock once the loader waits on it (synctest.Wait).
func TestOrphanRecordsLoadedBeforeCollecting(t *testing.T) {
	synctest.Test(t, orphanRecordsLoadedBeforeCollecting)
}

func orphanRecordsLoadedBeforeCollecting(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	owner := widgetObj("w-u-owner", "u-owner")
	rec := &fakeOrphanRecords{fails: 2, refs: []graph.Ref{owner.Ref}}
	c := New(Options{Client: client.New(clienttest.NewFake()), OrphanRecords: rec, Clock: clk, Leader: &leader.Gate{}})
	t.Cleanup(func() { c.deleteQueue.ShutDown(); c.verifyQueue.ShutDown() })
	observe(c, owner, widgetObj("dep", "u-dep", "u-owner"))
	observeDeleted(c, "u-owner")
	if _, owners, _ := c.view("u-dep"); owners[0].State != graph.OwnerAbsent {
		t.Fatalf("before the record: %v, want Absent", owners[0].State)
	}

	done := make(chan bool)
	go func() { done <- c.loadOrphanRecords(context.Background()) }()
	for {
		synctest.Wait() // the loader is done, or waits on the clock
		select {
		case ok := <-done:
			if !ok {
				t.Fatal("loadOrphanRecords gave up")
			}
			if rec.calls != 3 {
				t.Errorf("%d loads, want 3 (two failures)", rec.calls)
			}
			if _, owners, _ := c.view("u-dep"); owners[0].State != graph.OwnerOrphaned {
				t.Errorf("after the record: %v, want Orphaned", owners[0].State)
			}
			// Forever failing: gives up only when ctx ends.
			rec.fails = 1 << 30
			ctx, cancel := context.WithCancel(context.Background())
			go func() { done <- c.loadOrphanRecords(ctx) }()
			synctest.Wait()
			if !clk.HasWaiters() {
				t.Fatal("the loader does not wait to try again")
			}
			cancel()
			if <-done {
				t.Error("loadOrphanRecords succeeded with every load failing")
			}
			return
		default:
			if !clk.HasWaiters() {
				t.Fatal("the loader neither finished nor waits to try again")
			}
			clk.Step(time.Minute)
		}
	}
}
