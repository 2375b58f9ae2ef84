package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSplit: two replicas starting together split 6 shards 3/3; a third joins and they end
// 2/2/2, and stay so. No shard has two writers at any tick (fleet.check).
func TestSplit(t *testing.T) {
	f := newFleet(t, 6)
	a, b := f.add("a"), f.add("b")
	f.ticks(20, "split 3/3", func() bool { return f.split(3, 3) })
	f.tick() // a has listed b's last take
	if a.m.LiveReplicas() != 2 || b.m.LiveReplicas() != 2 {
		t.Errorf("LiveReplicas = %d, %d; want 2, 2", a.m.LiveReplicas(), b.m.LiveReplicas())
	}
	for i := range 6 {
		want := a.id
		if b.m.Writable(i) == nil {
			want = b.id
		}
		if a.m.Holder(i) != want || b.m.Holder(i) != want {
			t.Errorf("Holder(%d) = %q in a, %q in b; want %q", i, a.m.Holder(i), b.m.Holder(i), want)
		}
	}

	c := f.add("c")
	f.ticks(60, "split 2/2/2", func() bool { return f.split(2, 2) })
	settled := f.held()
	for range 3 * int(leaseDuration/retryPeriod) {
		f.tick()
	}
	if got := f.held(); got != settled {
		t.Errorf("the split moved after it settled: %s, then %s", settled, got)
	}
	if c.m.LiveReplicas() != 3 {
		t.Errorf("LiveReplicas = %d, want 3", c.m.LiveReplicas())
	}
}

// TestSplitUneven: 7 shards over 3 replicas end 3/2/2, not 3/3/1 (one replica at the fair
// share gives one up to the one below the floor).
func TestSplitUneven(t *testing.T) {
	f := newFleet(t, 7)
	f.add("a")
	f.add("b")
	f.ticks(20, "split 4/3", func() bool { return f.split(3, 4) })
	f.add("c")
	f.ticks(60, "split 3/2/2", func() bool { return f.split(2, 3) })
}

// TestDeadReplica: a replica dies without releasing; the other takes its shards only once it
// has seen their Leases unchanged for LeaseDuration by its own clock, opens them RenewDeadline
// after its take (the dead one may have written until RenewDeadline after its last renewal: no
// member is written by two replicas less than LeaseDuration apart), and holds every shard
// within two Lease durations and a renew deadline.
func TestDeadReplica(t *testing.T) {
	f := newFleet(t, 6)
	a, b := f.add("a"), f.add("b")
	f.ticks(20, "split 3/3", func() bool { return f.split(3, 3) })
	lost := b.m.Held()
	died := f.clk.Now() // b renewed its Leases in this tick, after a had listed them
	f.kill(b)
	f.ticks(int((2*leaseDuration+renewDeadline)/retryPeriod), "held by a alone", func() bool { return len(a.m.Held()) == 6 })
	t.Logf("a held every shard %s after b died", f.clk.Now().Sub(died))
	if took := f.clk.Now().Sub(died); took > 2*leaseDuration+renewDeadline {
		t.Errorf("a held every shard %s after b died, want within %s", took, 2*leaseDuration+renewDeadline)
	}
	// a saw b's last renewal first at the tick after b's death (a steps before b).
	firstSeen := died.Add(retryPeriod)
	for _, i := range lost {
		s := f.opened(a.id, i)
		if s.openedAt.Before(firstSeen.Add(leaseDuration + renewDeadline)) {
			t.Errorf("a opened shard %d at %s, before it had seen b's Lease unchanged for %s (since %s)",
				i, s.openedAt.Format(time.TimeOnly), leaseDuration, firstSeen.Format(time.TimeOnly))
		}
		if !s.calledAt.Before(s.openedAt) {
			t.Errorf("a started shard %d at %s, not before its gate opened at %s", i, s.calledAt.Format(time.TimeOnly), s.openedAt.Format(time.TimeOnly))
		}
	}
	if a.m.LiveReplicas() != 1 {
		t.Errorf("LiveReplicas = %d, want 1", a.m.LiveReplicas())
	}
}

// TestPausedProcess: a replica whose loop does not run (SIGSTOP) finds its shards not
// Writable RenewDeadline after their last renewal, with nothing else running; its watchdog
// then ends their Start contexts, before LeaseDuration.
func TestPausedProcess(t *testing.T) {
	f := newFleet(t, 6)
	a := f.add("a")
	f.ticks(10, "all held", func() bool { return len(a.m.Held()) == 6 })
	f.clk.Step(renewDeadline - time.Millisecond) // the last renewal was at the last tick
	for i := range 6 {
		if err := a.m.Writable(i); err != nil {
			t.Fatalf("Writable(%d) = %v just before the renew deadline", i, err)
		}
	}
	f.clk.Step(time.Millisecond)
	for i := range 6 {
		if err := a.m.Writable(i); !errors.Is(err, ErrOverdue) {
			t.Fatalf("Writable(%d) = %v at the renew deadline, want ErrOverdue", i, err)
		}
	}
	f.mu.Lock()
	live := 0
	for _, s := range f.starts {
		if s.live() {
			live++
		}
	}
	f.mu.Unlock()
	if live != 6 {
		t.Fatalf("%d Start contexts live before the watchdog ran, want 6 (no loop ran)", live)
	}
	go a.m.watch(a.ctx)
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range f.starts {
		select {
		case <-s.returned:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("the watchdog did not stop shard %d", s.shard)
		}
	}
	if h := a.m.Held(); len(h) != 0 {
		t.Errorf("Held() = %v after the watchdog stopped every shard", h)
	}
	if err := a.m.Writable(0); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Writable(0) = %v, want ErrNotHeld", err)
	}
}

// TestRenewalFailure: a replica whose Lease writes fail keeps writing until RenewDeadline
// after its last renewal, then stops its shards (Start's ctx ends), before LeaseDuration; the
// other takes them after LeaseDuration.
func TestRenewalFailure(t *testing.T) {
	f := newFleet(t, 6)
	a, b := f.add("a"), f.add("b")
	f.ticks(20, "split 3/3", func() bool { return f.split(3, 3) })
	lost := b.m.Held()
	renewed := f.clk.Now()
	f.api.setFail(func(verb string, l *coordv1.Lease) error {
		if holderOf(l) == b.id {
			return apierrors.NewInternalError(errors.New("etcd is down"))
		}
		return nil
	})
	for f.clk.Now().Before(renewed.Add(leaseDuration)) {
		f.tick()
		overdue := !f.clk.Now().Before(renewed.Add(renewDeadline))
		for _, i := range lost {
			s := f.opened(b.id, i)
			if s.live() == overdue {
				t.Fatalf("%s after the last renewal: shard %d's Start live = %v", f.clk.Now().Sub(renewed), i, s.live())
			}
			if err := b.m.Writable(i); (err == nil) == overdue {
				t.Fatalf("%s after the last renewal: Writable(%d) = %v", f.clk.Now().Sub(renewed), i, err)
			}
			if h := a.m.Holder(i); h != b.id {
				t.Fatalf("%s after the last renewal: a sees shard %d held by %q", f.clk.Now().Sub(renewed), i, h)
			}
		}
	}
	f.ticks(int((leaseDuration+renewDeadline)/retryPeriod), "held by a alone", func() bool { return len(a.m.Held()) == 6 })
	for _, i := range lost {
		if s := f.opened(a.id, i); s.openedAt.Before(renewed.Add(leaseDuration + renewDeadline)) {
			t.Errorf("a opened shard %d at %s, before b's last renewal + LeaseDuration + RenewDeadline (b's writers may have written until its RenewDeadline)", i, s.openedAt.Format(time.TimeOnly))
		}
	}
}

// TestHandoff: a replica giving shards up to a newcomer stops their writers before it fences
// the Lease (renewed once more, marked handoff), and the newcomer, warming meanwhile, opens
// its gate only LeaseDuration after that fence.
func TestHandoff(t *testing.T) {
	f := newFleet(t, 6)
	a := f.add("a")
	f.ticks(10, "all held", func() bool { return len(a.m.Held()) == 6 })
	b := f.add("b")
	f.ticks(40, "split 3/3", func() bool { return f.split(3, 3) })
	for _, i := range b.m.Held() {
		returned, fenced := f.eventIndex(fmt.Sprintf("a returned %d", i)), f.eventIndex(fmt.Sprintf("a fenced %d", i))
		if returned < 0 || fenced < 0 || returned > fenced {
			t.Errorf("shard %d: Start returned at event %d, fence at event %d; want the fence after", i, returned, fenced)
		}
		f.mu.Lock()
		fence := f.fences[i]
		f.mu.Unlock()
		s := f.opened(b.id, i)
		t.Logf("shard %d: fenced at %s, b opened it %s later", i, fence.Format(time.TimeOnly), s.openedAt.Sub(fence))
		if s.openedAt.Before(fence.Add(leaseDuration)) {
			t.Errorf("b opened shard %d at %s, before the fence at %s + %s", i, s.openedAt.Format(time.TimeOnly), fence.Format(time.TimeOnly), leaseDuration)
		}
		if !s.calledAt.Before(s.openedAt) {
			t.Errorf("b started shard %d at %s, not before its gate opened at %s", i, s.calledAt.Format(time.TimeOnly), s.openedAt.Format(time.TimeOnly))
		}
		l, err := f.api.CoordinationV1().Leases("cascade").Get(context.Background(), shardLeaseName("cascade", i), metav1.GetOptions{})
		if err != nil || holderOf(l) != b.id || l.Annotations[HandoffAnnotation] != "" {
			t.Errorf("shard %d's Lease after the take: %v, %v (want held by b, no handoff mark)", i, l, err)
		}
	}
}

// TestRun: Run holds shards on its ticker and, when ctx ends, stops them (Start returned),
// fences their Leases (renewed once more, marked handoff: free LeaseDuration later) and deletes
// its replica Lease.
func TestRun(t *testing.T) {
	f := newFleet(t, 1)
	m := New(f.options("a", 1))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	wait := func(what string, done func() bool) {
		for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("Run: %s", what)
			}
		}
	}
	wait("the first step opened no shard", func() bool { return len(m.Held()) == 1 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	for _, s := range f.starts {
		select {
		case <-s.returned:
		default:
			t.Errorf("Run returned before Start of shard %d", s.shard)
		}
	}
	leases := f.api.CoordinationV1().Leases("cascade")
	l, err := leases.Get(context.Background(), shardLeaseName("cascade", 0), metav1.GetOptions{})
	if err != nil || l.Annotations[HandoffAnnotation] != "true" || holderOf(l) != "a" {
		t.Errorf("the shard's Lease after Run: %v, %v (want fenced: a's, marked handoff)", l, err)
	}
	if _, err := leases.Get(context.Background(), replicaLeaseName("cascade", "a"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("replica Lease after Run: %v, want NotFound", err)
	}
	if err := New(Options{}).Run(context.Background()); err == nil {
		t.Error("Run with no options = nil")
	}
}

// TestShardCountChange: a replica counting 7 shards joins a fleet of 6 (a rollout changing
// the count): it takes nothing while a shard Lease is held under 6, and takes every shard
// once the replica of 6 is gone and its Leases expired.
func TestShardCountChange(t *testing.T) {
	f := newFleet(t, 6)
	a := f.add("a")
	f.ticks(20, "all held", func() bool { return len(a.m.Held()) == 6 })
	b := f.addCounting("b", 7)
	for range 2 * int(leaseDuration/retryPeriod) {
		f.tick()
		if h := b.m.Held(); len(h) > 0 {
			t.Fatalf("b (7 shards) holds %v beside a (6 shards)", h)
		}
	}
	if len(a.m.Held()) != 6 {
		t.Errorf("a holds %v, want all 6", a.m.Held())
	}
	f.kill(a)
	f.ticks(3*int(leaseDuration/retryPeriod), "held by b alone", func() bool { return len(b.m.Held()) == 7 })
}

// TestShardCountRace: replicas counting 6 and 7 shards take a shard each in the same turn,
// before either listed the other's: each lists again before opening its gate, sees the
// other's Lease and gives its shard up unopened. Then one count wins and holds everything.
func TestShardCountRace(t *testing.T) {
	f := newFleet(t, 6)
	a, b := f.add("a"), f.addCounting("b", 7)
	f.clk.Step(retryPeriod)
	for _, r := range []*replica{a, b} {
		r.m.renewPresence(r.ctx)
		if !r.m.observe(r.ctx) {
			t.Fatal("observe failed")
		}
	}
	for _, r := range []*replica{a, b} {
		if !r.m.balance(r.ctx) || r.m.Holder(r.m.offset) != r.id {
			t.Fatalf("%s did not take shard %d: the race is not exercised", r.id, r.m.offset)
		}
	}
	for _, r := range []*replica{a, b} {
		if !r.m.observe(r.ctx) {
			t.Fatal("observe failed")
		}
		r.m.confirm(r.ctx)
	}
	f.settle()
	f.check()
	f.tick()
	for _, r := range []*replica{a, b} {
		if h := r.m.Held(); len(h) > 0 {
			t.Fatalf("%s opened %v although the other count held a Lease", r.id, h)
		}
	}
	f.ticks(6*int(leaseDuration/retryPeriod), "one count holding every shard", func() bool {
		return len(a.m.Held()) == 6 && len(b.m.Held()) == 0 || len(a.m.Held()) == 0 && len(b.m.Held()) == 7
	})
}

// TestSlowRenewal: one shard's renewal hangs (a slow API server, a slow etcd key). The
// others' renewals are recorded as they return and go on every RetryPeriod: only the hanging
// shard is overdue (its watchdog stops it RenewDeadline after its last recorded renewal),
// the others stay Writable throughout; once the hanging request ends, the shard is taken
// again.
func TestSlowRenewal(t *testing.T) {
	f := newFleet(t, 6)
	a := f.add("a")
	f.ticks(10, "all held", func() bool { return len(a.m.Held()) == 6 })
	const slow = 5
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	f.api.setDelay(func(verb string, l *coordv1.Lease) {
		if verb == "update" && l.Name == shardLeaseName("cascade", slow) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
	})
	var steps sync.WaitGroup
	t.Cleanup(func() {
		unblock()
		steps.Wait()
	})
	step := func() chan struct{} {
		done := make(chan struct{})
		steps.Add(1)
		go func() {
			defer steps.Done()
			defer close(done)
			a.m.step(a.ctx)
		}()
		return done
	}
	returned := func(done chan struct{}, within time.Duration) bool {
		select {
		case <-done:
			return true
		case <-time.After(within):
			return false
		}
	}
	go a.m.watch(a.ctx)

	f.clk.Step(retryPeriod)
	t0 := f.clk.Now()
	done := step()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow renewal was not sent")
	}
	leases := f.api.CoordinationV1().Leases("cascade")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		renewed := 0
		for i := range 6 {
			if l, err := leases.Get(context.Background(), shardLeaseName("cascade", i), metav1.GetOptions{}); err == nil && l.Spec.RenewTime.Time.Equal(t0) {
				renewed++
			}
		}
		if renewed == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the 5 other renewals written", renewed)
		}
	}
	stuck := false
	for elapsed := time.Second; elapsed <= 2*renewDeadline; elapsed += time.Second {
		f.clk.Step(time.Second)
		if elapsed%retryPeriod == 0 { // a tick: the loop runs again, once its last step returned
			if returned(done, 10*time.Second) {
				done = step()
				returned(done, 10*time.Second)
			} else if !stuck {
				stuck = true
				t.Logf("t0+%s: the loop is still in its step of t0", elapsed)
			}
		}
		for i := range 6 {
			err := a.m.Writable(i)
			switch {
			case i != slow && err != nil:
				t.Fatalf("t0+%s: Writable(%d) = %v while only shard %d's renewal hangs", elapsed, i, err, slow)
			case i == slow && elapsed >= renewDeadline-retryPeriod && err == nil:
				t.Fatalf("t0+%s: Writable(%d) = nil, %s after its last recorded renewal", elapsed, i, elapsed+retryPeriod)
			}
		}
		f.check()
	}
	unblock()
	if !returned(done, 10*time.Second) {
		t.Fatal("the step did not return once the slow renewal did")
	}
	f.settle()
	f.ticks(10, "all held again", func() bool { return len(a.m.Held()) == 6 })
}
