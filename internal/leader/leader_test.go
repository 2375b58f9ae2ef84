package leader

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestStatusOnLease: the leader's status rides on its Lease writes: set once it leads, updated
// by the renewals, never written by a standby, and removed when the leader releases the Lease.
func TestStatusOnLease(t *testing.T) {
	cs := fake.NewClientset()
	var generation atomic.Int64
	leaderStatus := func() map[string]string {
		return map[string]string{"cascade.dev/mode": "collector", "cascade.dev/policy-generation": strconv.FormatInt(generation.Load(), 10)}
	}
	opts := func(gate *Gate, status func() map[string]string) Options {
		return Options{Leases: cs.CoordinationV1(), Namespace: "cascade-system", Name: "cascade",
			LeaseDuration: time.Second, RenewDeadline: 800 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
			Gate: gate, Status: status}
	}
	annotations := func() map[string]string {
		l, err := cs.CoordinationV1().Leases("cascade-system").Get(context.Background(), "cascade", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return l.Annotations
	}
	eventually := func(what string, cond func(map[string]string) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if cond(annotations()) {
				return
			}
		}
		t.Fatalf("%s: annotations %v", what, annotations())
	}

	leaderCtx, stopLeader := context.WithCancel(context.Background())
	defer stopLeader()
	gate := &Gate{}
	leaderDone := make(chan error, 1)
	go func() { leaderDone <- New(opts(gate, leaderStatus)).Run(leaderCtx) }()
	if !gate.Wait(leaderCtx) {
		t.Fatal("never led")
	}
	eventually("leading", func(a map[string]string) bool {
		return a["cascade.dev/mode"] == "collector" && a["cascade.dev/policy-generation"] == "0"
	})

	// A standby reads the Lease and never writes its own status.
	standbyCtx, stopStandby := context.WithCancel(context.Background())
	standbyGate := &Gate{}
	standbyDone := make(chan error, 1)
	go func() {
		standbyDone <- New(opts(standbyGate, func() map[string]string { return map[string]string{"cascade.dev/mode": "standby"} })).Run(standbyCtx)
	}()
	generation.Store(2)
	eventually("a renewal after the change", func(a map[string]string) bool { return a["cascade.dev/policy-generation"] == "2" })
	for range 10 {
		if a := annotations(); a["cascade.dev/mode"] != "collector" || standbyGate.IsOpen() {
			t.Fatalf("with a standby: annotations %v, standby leads: %t", a, standbyGate.IsOpen())
		}
		time.Sleep(30 * time.Millisecond)
	}
	stopStandby()
	if err := <-standbyDone; err != nil {
		t.Fatalf("standby: %v", err)
	}

	stopLeader()
	if err := <-leaderDone; err != nil {
		t.Fatalf("leader: %v", err)
	}
	if a := annotations(); len(a) != 0 {
		t.Errorf("released: annotations %v, want none", a)
	}
}
