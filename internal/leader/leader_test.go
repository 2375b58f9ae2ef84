package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection"
)

// TestGate: closed until opened, then open for good; Wait returns false when ctx ends first;
// Open from many goroutines at once opens it once.
func TestGate(t *testing.T) {
	var g Gate
	if g.IsOpen() {
		t.Fatal("the zero Gate is open")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if g.Wait(ctx) {
		t.Error("Wait on a closed gate with an ended ctx = true")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(g.Open)
	}
	wg.Wait()
	if !g.IsOpen() || !g.Wait(context.Background()) {
		t.Error("the gate did not open")
	}
	select {
	case <-g.Done():
	default:
		t.Error("Done not closed once open")
	}
	if !Open().IsOpen() {
		t.Error("Open() returned a closed gate")
	}
}

// TestWatchDogStuckRenewal: the liveness check (client-go's HealthzAdaptor as the Elector's
// WatchDog) passes while the leader renews its Lease and fails once the leader is stuck in a
// renewal that never returns, past the Lease's duration and the slack (issue 25.4).
func TestWatchDogStuckRenewal(t *testing.T) {
	cs := fake.NewClientset()
	var stuck atomic.Bool
	hang := make(chan struct{})
	defer close(hang)
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if stuck.Load() {
			<-hang // a renewal that never returns (until the test ends)
		}
		return false, nil, nil
	})
	dog := leaderelection.NewLeaderHealthzAdaptor(200 * time.Millisecond)
	gate := &Gate{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := New(Options{Leases: cs.CoordinationV1(), Namespace: "kube-system", Name: "cascade",
		LeaseDuration: time.Second, RenewDeadline: 800 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		Gate: gate, WatchDog: dog})
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	if !gate.Wait(ctx) {
		t.Fatal("never led")
	}
	// Leading and renewing: healthy, for several Lease durations.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := dog.Check(nil); err != nil {
			t.Fatalf("leading and renewing: %v", err)
		}
	}
	stuck.Store(true)
	var err error
	for deadline := time.Now().Add(30 * time.Second); err == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		err = dog.Check(nil)
	}
	if err == nil {
		t.Fatal("the renewal hangs, and the check still passes after 30s")
	}
	t.Logf("stuck renewal: %v", err)
}
