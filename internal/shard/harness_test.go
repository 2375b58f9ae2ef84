package shard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/internal/leader"
)

// The timings of the scenarios (client-go's defaults, scaled down).
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// fleet is a scenario: replicas sharing one fake API server and one fake clock, stepped
// together. Each tick moves the clock by retryPeriod and steps every live replica, in the
// order they were added, then checks the invariants.
type fleet struct {
	t      *testing.T
	shards int
	api    *apiServer
	clk    *testclock.FakeClock

	mu       sync.Mutex
	starts   []*started // every Start call, in order
	events   []string   // "ID returned I" (a Start returned), "ID fenced I" (a handoff write)
	fences   map[int]time.Time
	replicas []*replica
}

type replica struct {
	id     string
	shards int
	m      *Manager
	ctx    context.Context
	cancel context.CancelFunc
	dead   bool
}

// started is one call of Options.Start.
type started struct {
	id       string
	shard    int
	ctx      context.Context
	gate     *leader.Gate
	returned chan struct{}
	// calledAt and openedAt are the clock at the first check that saw the call and its gate
	// open (zero: not yet).
	calledAt, openedAt time.Time
	// until is the end of its write window as last seen by a check while its gate was open
	// and its ctx live: its run's last recorded renewal + RenewDeadline (Writable refuses from
	// then on). returnedAt is the clock when Start returned (its writers stopped; zero: not
	// yet).
	until, returnedAt time.Time
}

// lastWrite is the latest time s's writers may have written, by what the checks saw (the
// far future while they may still write).
func (s *started) lastWrite() time.Time {
	last := s.until
	if last.IsZero() {
		last = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if !s.returnedAt.IsZero() && s.returnedAt.Before(last) {
		last = s.returnedAt
	}
	return last
}

func (s *started) live() bool { return s.ctx.Err() == nil }

func newFleet(t *testing.T, shards int) *fleet {
	f := &fleet{t: t, shards: shards, api: newAPIServer(), fences: map[int]time.Time{},
		clk: testclock.NewFakeClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))}
	f.api.written = func(verb string, l *coordv1.Lease) {
		if l.Annotations[HandoffAnnotation] != "true" {
			return
		}
		i, _ := shardIndex("cascade", l.Name)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = append(f.events, fmt.Sprintf("%s fenced %d", *l.Spec.HolderIdentity, i))
		f.fences[i] = l.Spec.RenewTime.Time
	}
	return f
}

func (f *fleet) options(id string, shards int) Options {
	return Options{
		Leases: f.api.client(), Namespace: "cascade", Prefix: "cascade", Shards: shards, Identity: id,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod, Clock: f.clk,
		Start: func(ctx context.Context, shard int, gate *leader.Gate) {
			s := &started{id: id, shard: shard, ctx: ctx, gate: gate, returned: make(chan struct{})}
			f.mu.Lock()
			f.starts = append(f.starts, s)
			f.mu.Unlock()
			<-ctx.Done() // the writers stop
			f.mu.Lock()
			f.events = append(f.events, fmt.Sprintf("%s returned %d", id, shard))
			s.returnedAt = f.clk.Now()
			f.mu.Unlock()
			close(s.returned)
		},
	}
}

// add starts a replica; it steps from the next tick on.
func (f *fleet) add(id string) *replica {
	f.t.Helper()
	return f.addCounting(id, f.shards)
}

// addCounting starts a replica that counts shards shards (a new version of the fleet's
// configuration, mid rollout).
func (f *fleet) addCounting(id string, shards int) *replica {
	f.t.Helper()
	opts := f.options(id, shards)
	if errs := opts.Validate(nil); len(errs) > 0 {
		f.t.Fatalf("options: %v", errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	r := &replica{id: id, shards: shards, m: New(opts), ctx: ctx, cancel: cancel}
	f.replicas = append(f.replicas, r)
	return r
}

// kill ends replica r as a crash does: its writers are gone, its Leases left as they are.
func (f *fleet) kill(r *replica) {
	r.dead = true
	r.cancel()
	f.settle()
}

// tick moves the clock by retryPeriod and steps every live replica.
func (f *fleet) tick() {
	f.t.Helper()
	f.clk.Step(retryPeriod)
	for _, r := range f.replicas {
		if !r.dead {
			r.m.step(r.ctx)
		}
	}
	f.settle()
	f.check()
}

// ticks ticks until done holds (checked after each tick), at most n times.
func (f *fleet) ticks(n int, what string, done func() bool) {
	f.t.Helper()
	for range n {
		f.tick()
		if done() {
			return
		}
	}
	f.t.Fatalf("after %d ticks: not %s; held: %s", n, what, f.held())
}

// settle waits until every run of a live replica has reached Start, and every Start whose
// ctx ended has returned: then the next step sees them.
func (f *fleet) settle() {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f.settled() {
		if time.Now().After(deadline) {
			f.t.Fatal("Start calls did not settle")
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *fleet) settled() bool {
	f.mu.Lock()
	gates := map[*leader.Gate]bool{}
	for _, s := range f.starts {
		gates[s.gate] = true
		select {
		case <-s.returned:
		default:
			if !s.live() {
				f.mu.Unlock()
				return false
			}
		}
	}
	f.mu.Unlock()
	for _, r := range f.replicas {
		if r.dead {
			continue
		}
		r.m.mu.Lock()
		for _, run := range r.m.runs {
			if !gates[run.gate] {
				r.m.mu.Unlock()
				return false
			}
		}
		r.m.mu.Unlock()
	}
	return true
}

// check asserts, after every tick, that no shard has two writers: at most one Start per
// shard is live with its gate open, at most one replica finds it Writable, and that one holds
// its Lease and runs that Start; that replicas counting shards differently never write at
// once; and that no member is written by two replicas less than a Lease duration apart: a
// Start whose gate opens, in a replica other than the last one to open that shard's gate,
// opens at least LeaseDuration after the other's writers' last possible write (its Start
// returned, or its Lease RenewDeadline past its last renewal); between replicas counting
// shards differently (which map members differently), whatever the shards.
func (f *fleet) check() {
	f.t.Helper()
	now := f.clk.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	byID := map[string]*replica{}
	for _, r := range f.replicas {
		byID[r.id] = r
	}
	open := map[int][]*started{}
	for _, s := range f.starts {
		if s.calledAt.IsZero() {
			s.calledAt = now
		}
		if s.gate.IsOpen() && s.openedAt.IsZero() {
			s.openedAt = now
		}
		if !s.live() || !s.gate.IsOpen() {
			continue
		}
		if r := byID[s.id]; r != nil {
			r.m.mu.Lock()
			if run := r.m.runs[s.shard]; run != nil && run.gate == s.gate && run.phase == serving {
				if end := run.renewed.Add(renewDeadline); end.After(s.until) {
					s.until = end
				}
			}
			r.m.mu.Unlock()
		}
		if s.until.IsZero() || now.Before(s.until) {
			open[s.shard] = append(open[s.shard], s)
		}
	}
	counts := map[int][]string{} // shard count → replicas with a shard Writable
	most := f.shards
	for _, r := range f.replicas {
		most = max(most, r.shards)
	}
	for i := range most {
		if len(open[i]) > 1 {
			f.t.Fatalf("%s: shard %d has %d writers: %s and %s", now.Format(time.TimeOnly), i, len(open[i]), open[i][0].id, open[i][1].id)
		}
		var writable []string
		for _, r := range f.replicas {
			if !r.dead && r.m.Writable(i) == nil {
				writable = append(writable, r.id)
				counts[r.shards] = append(counts[r.shards], r.id)
			}
		}
		if len(writable) > 1 {
			f.t.Fatalf("%s: shard %d Writable in %v", now.Format(time.TimeOnly), i, writable)
		}
		if len(writable) == 1 {
			if len(open[i]) != 1 || open[i][0].id != writable[0] {
				f.t.Fatalf("%s: shard %d Writable in %s, but its open Start is not", now.Format(time.TimeOnly), i, writable[0])
			}
			if h := f.leaseHolder(i); h != writable[0] {
				f.t.Fatalf("%s: shard %d Writable in %s, but its Lease names %q", now.Format(time.TimeOnly), i, writable[0], h)
			}
		}
	}
	if len(counts) > 1 {
		f.t.Fatalf("%s: replicas counting shards differently write at once: %v", now.Format(time.TimeOnly), counts)
	}
	for _, p := range f.starts {
		for _, q := range f.starts {
			if p.openedAt.IsZero() || q.openedAt.IsZero() || p.id == q.id || q.openedAt.Before(p.openedAt) {
				continue
			}
			if p.shard != q.shard && byID[p.id].shards == byID[q.id].shards {
				continue
			}
			if gap := q.openedAt.Sub(p.lastWrite()); gap < leaseDuration {
				f.t.Fatalf("%s: shard %d: %s opened its gate at %s, %s after %s's last possible write in shard %d (at %s); want at least %s",
					now.Format(time.TimeOnly), q.shard, q.id, q.openedAt.Format(time.TimeOnly), gap, p.id, p.shard, p.lastWrite().Format(time.TimeOnly), leaseDuration)
			}
		}
	}
}

func (f *fleet) leaseHolder(i int) string {
	l, err := f.api.CoordinationV1().Leases("cascade").Get(context.Background(), shardLeaseName("cascade", i), metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return holderOf(l)
}

// held is who holds what, for failure messages.
func (f *fleet) held() string {
	s := ""
	for _, r := range f.replicas {
		s += fmt.Sprintf("%s=%v ", r.id, r.m.Held())
	}
	return s
}

// split reports whether the live replicas hold every shard, each between floor and ceil.
func (f *fleet) split(floor, ceil int) bool {
	seen := map[int]bool{}
	for _, r := range f.replicas {
		if r.dead {
			continue
		}
		h := r.m.Held()
		if len(h) < floor || len(h) > ceil {
			return false
		}
		for _, i := range h {
			seen[i] = true
		}
	}
	return len(seen) == f.shards
}

// startsOf are the Start calls of replica id for shard i.
func (f *fleet) startsOf(id string, i int) []*started {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*started
	for _, s := range f.starts {
		if s.id == id && s.shard == i {
			out = append(out, s)
		}
	}
	return out
}

// opened is the one Start of id for shard i whose gate opened.
func (f *fleet) opened(id string, i int) *started {
	f.t.Helper()
	for _, s := range f.startsOf(id, i) {
		if !s.openedAt.IsZero() {
			return s
		}
	}
	f.t.Fatalf("%s never opened the gate of shard %d", id, i)
	return nil
}

func (f *fleet) eventIndex(e string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Index(f.events, e)
}
