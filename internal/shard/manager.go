package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/internal/leader"
)

// The errors of Writable.
var (
	// ErrNotHeld: this replica does not hold the shard (any more), or gives it up.
	ErrNotHeld = errors.New("this replica does not hold the shard")
	// ErrOverdue: the shard's Lease was last renewed RenewDeadline ago or more; another
	// replica may take it soon.
	ErrOverdue = errors.New("the shard's Lease was not renewed within the renew deadline")
)

// phase is where a run of Options.Start stands.
type phase int

const (
	// warming: Start runs with its gate closed; the Lease is not held (yet).
	warming phase = iota
	// taken: the Lease is held and renewed, the gate still closed until a list after the
	// take shows no shard Lease held under another shard count (confirm).
	taken
	// serving: the Lease is held and renewed; the gate is open.
	serving
	// releasing: given up. ctx ended; the Lease is renewed until Start returns, then
	// fenced (renewed once more, marked handoff) and left to expire.
	releasing
	// stopping: ctx ended and the Lease is not ours (any more); dropped once Start returns.
	stopping
)

// run is one call of Options.Start and this replica's hold on its shard's Lease.
type run struct {
	shard  int
	phase  phase
	gate   *leader.Gate
	cancel context.CancelFunc
	done   chan struct{} // closed when Start returned
	// lease is our last successful write of the shard's Lease (taken, serving, releasing: the base
	// of the next write, whose resourceVersion makes it fail if anyone else wrote since).
	lease *coordv1.Lease
	// renewed is when that write was sent, by our clock: the writers stop RenewDeadline
	// after it, and no other replica may take the shard before LeaseDuration after it.
	renewed time.Time
	// renewing: a write of its Lease is in flight (the loop sends the next one once it
	// returned).
	renewing bool
	// attempt is the Lease as sent by our last take (its resourceVersion the one it was
	// made on, "" for a create), so that a take whose reply was lost is known for ours when
	// listed.
	attempt *coordv1.Lease
}

func (r *run) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// holds reports whether r holds the shard's Lease (and so renews it).
func (r *run) holds() bool { return r.phase == taken || r.phase == serving || r.phase == releasing }

// stop ends r's context: its shard is not (or no longer) ours.
func (r *run) stop() {
	r.phase, r.lease = stopping, nil
	r.cancel()
}

// Manager holds this replica's shards: it takes its fair share of them, renews their Leases,
// stops the ones it loses and gives up the ones it holds beyond its share (see the package
// documentation for the protocol).
//
// Concurrency: Run's loop goroutine writes Leases and starts or ends runs; its renewal
// goroutines (renew) write held shards' Leases and record the outcome; the watchdog
// goroutine only stops overdue runs. All of them, and the readers (Held, Writable, ...),
// take mu for the fields below it, never across an API request.
type Manager struct {
	opts        Options
	stamp       stamp
	leases      coordinationv1.LeaseInterface
	replicaName string
	// offset is where this replica starts looking for a free shard (Of its identity).
	offset int
	// wake tells the watchdog that a deadline moved.
	wake chan struct{}
	// kick runs the loop before its next tick: a shard given up has stopped (its fence is due).
	kick chan struct{}
	// presence is our last write of our replica Lease (the loop goroutine's only).
	presence *coordv1.Lease
	// writing counts the shard Lease writes in flight (renew's goroutines).
	writing sync.WaitGroup

	mu   sync.Mutex
	runs map[int]*run  // by shard: every Start that has not returned, and every Lease we hold
	obs  []observation // by shard: the Leases as last listed
	// extra are the listed shard Leases beyond our shard count, by name (written by replicas
	// with more shards).
	extra map[string]observation
	// mixed: a shard Lease that is not free was written under another shard count; until
	// none is, no shard is taken nor opened.
	mixed bool
	// others, by shard, bound other replicas' writers in it (see writers): a shard opens no
	// sooner than LeaseDuration after the latest. anyShard does so for the Leases written
	// under another shard count (which maps members differently): in every shard.
	others   []writers
	anyShard writers
	live     []string // the live replicas' identities, sorted; this one always included
}

// New returns a Manager; Run checks its options (Options.Validate).
func New(opts Options) *Manager {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Manager{
		opts:        opts,
		stamp:       stamp{id: opts.Identity, duration: opts.LeaseDuration, shards: opts.Shards},
		replicaName: replicaLeaseName(opts.Prefix, opts.Identity),
		offset:      Of(opts.Identity, opts.Shards),
		wake:        make(chan struct{}, 1),
		kick:        make(chan struct{}, 1),
		runs:        map[int]*run{},
		obs:         make([]observation, max(opts.Shards, 0)),
		others:      make([]writers, max(opts.Shards, 0)),
		anyShard:    writers{},
		live:        []string{opts.Identity},
	}
	if opts.Leases != nil {
		m.leases = opts.Leases.Leases(opts.Namespace)
	}
	return m
}

// Run holds shards until ctx ends, then stops every shard (waiting for each Start to
// return), releases the Leases it held and deletes its replica Lease. It returns an error
// only for invalid options. Run is called once.
func (m *Manager) Run(ctx context.Context) error {
	if errs := m.opts.Validate(field.NewPath("shard")); len(errs) > 0 {
		return errs.ToAggregate()
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("identity", m.opts.Identity))
	var wg sync.WaitGroup
	wg.Go(func() { m.watch(ctx) })
	ticker := m.opts.Clock.NewTicker(m.opts.RetryPeriod)
	for ctx.Err() == nil {
		m.step(ctx)
		select {
		case <-ctx.Done():
		case <-ticker.C():
		case <-m.kick:
		}
	}
	ticker.Stop()
	m.shutdown(context.WithoutCancel(ctx))
	wg.Wait()
	return nil
}

// Held returns the shards this replica holds and writes in now, ascending (a shard being
// given up is not among them).
func (m *Manager) Held() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var held []int
	for i, r := range m.runs {
		if r.phase == serving {
			held = append(held, i)
		}
	}
	slices.Sort(held)
	return held
}

// Holder returns the holder of the shard's Lease as last seen: this replica's identity for
// a shard it holds, "" for a shard that is free (no Lease, no holder, or expired).
func (m *Manager) Holder(shard int) string {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runs[shard]; r != nil && (r.phase == taken || r.phase == serving) {
		return m.opts.Identity
	}
	if shard < 0 || shard >= len(m.obs) || m.obs[shard].free(now) {
		return ""
	}
	return m.obs[shard].holder
}

// Writable is the write guard of a shard's members, called before every write: nil only
// while this replica holds the shard and its Lease was renewed less than RenewDeadline ago
// by the local clock. A process paused (SIGSTOP) past its Lease refuses the writes it
// resumes with, even before its loop runs again.
func (m *Manager) Writable(shard int) error {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[shard]
	if r == nil || r.phase != serving {
		return fmt.Errorf("shard %d: %w", shard, ErrNotHeld)
	}
	if age := now.Sub(r.renewed); age >= m.opts.RenewDeadline {
		return fmt.Errorf("shard %d: renewed %s ago: %w", shard, age, ErrOverdue)
	}
	return nil
}

// LiveReplicas is how many replicas renew their replica Lease under this replica's shard
// count, this one included.
func (m *Manager) LiveReplicas() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// step is one turn of the loop: stop overdue shards, renew, observe, balance; after a take,
// list again and open the shard (confirm).
func (m *Manager) step(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	m.expire(ctx)
	m.renewPresence(ctx)
	m.renew(ctx)
	// A shard taken opens after a list made since its take (this loop's second list, or a
	// later loop's first), and not before LeaseDuration after the last possible write of the
	// other replicas seen in it (openAtLocked).
	if m.observe(ctx) && (!m.balance(ctx) || m.observe(ctx)) {
		m.confirm(ctx)
	}
}

// expire stops every shard whose Lease was last renewed RenewDeadline ago or more, and
// returns how long until the next would be (0: none held).
func (m *Manager) expire(ctx context.Context) time.Duration {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Duration
	for i, r := range m.runs {
		if !r.holds() {
			continue
		}
		left := r.renewed.Add(m.opts.RenewDeadline).Sub(now)
		if left <= 0 {
			klog.FromContext(ctx).Error(ErrOverdue, "Shard lost: stopping it", "shard", i, "renewed", r.renewed)
			r.stop()
			continue
		}
		if next == 0 || left < next {
			next = left
		}
	}
	return next
}

// watch stops overdue shards at their deadline, whether or not the loop runs (a renewal
// stuck in a slow API server), until ctx ends.
func (m *Manager) watch(ctx context.Context) {
	for {
		var fire <-chan time.Time
		var timer clock.Timer
		if next := m.expire(ctx); next > 0 {
			timer = m.opts.Clock.NewTimer(next)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-m.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// signal tells the watchdog that a deadline moved.
func (m *Manager) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// request bounds one API request.
func (m *Manager) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.opts.RenewDeadline)
}

// renewPresence creates or renews our replica Lease: the others count us live from it.
func (m *Manager) renewPresence(ctx context.Context) {
	now := m.opts.Clock.Now()
	ctx, cancel := m.request(ctx)
	defer cancel()
	var l *coordv1.Lease
	var err error
	if m.presence != nil {
		l, err = m.leases.Update(ctx, m.stamp.renewed(m.presence, now), metav1.UpdateOptions{})
	} else {
		l, err = m.leases.Create(ctx, m.stamp.newLease(m.opts.Namespace, m.replicaName, ReplicaLabel, m.opts.Prefix, now), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // left by an earlier failed attempt of ours
			if l, err = m.leases.Get(ctx, m.replicaName, metav1.GetOptions{}); err == nil {
				l, err = m.leases.Update(ctx, m.stamp.renewed(l, now), metav1.UpdateOptions{})
			}
		}
	}
	if err != nil {
		m.presence = nil // read it again next time
		klog.FromContext(ctx).Error(err, "Renewing this replica's Lease failed", "lease", m.replicaName)
		return
	}
	m.presence = l
}

// renew renews the Leases of the shards held, fences the ones given up whose Start
// returned, and drops the runs that ended. The writes go out in parallel, each recorded as it
// returns, so that one slow request holds up neither the others' renewals nor their
// recording. renew waits for them at most RetryPeriod: a write still in flight then goes on
// alone, and its shard's next write waits for it (the next one's base is its result); the
// other shards are renewed again at the next loop.
func (m *Manager) renew(ctx context.Context) {
	if ctx.Err() != nil {
		return // shutdown stops and releases what is held
	}
	logger := klog.FromContext(ctx)
	type write struct {
		r     *run
		base  *coordv1.Lease
		fence bool
	}
	var writes []write
	m.mu.Lock()
	for i, r := range m.runs {
		if r.returned() && (r.phase == warming || r.phase == stopping) {
			if !r.renewing { // else it may still land: the shard is taken again after it
				delete(m.runs, i)
			}
			continue
		}
		if !r.holds() || r.renewing {
			continue
		}
		fence := r.returned()
		if fence && r.phase != releasing {
			logger.Error(nil, "Start returned while the shard was held: giving it up", "shard", i)
			r.phase = releasing
			r.cancel()
		}
		r.renewing = true
		writes = append(writes, write{r: r, base: r.lease, fence: fence})
	}
	m.mu.Unlock()
	if len(writes) == 0 {
		return
	}

	var wg sync.WaitGroup
	for _, w := range writes {
		wg.Add(1)
		m.writing.Add(1)
		go func() {
			defer m.writing.Done()
			defer wg.Done()
			m.write(ctx, w.r, w.base, w.fence)
		}()
	}
	all := make(chan struct{})
	go func() {
		wg.Wait()
		close(all)
	}()
	timer := m.opts.Clock.NewTimer(m.opts.RetryPeriod)
	defer timer.Stop()
	select {
	case <-all:
	case <-timer.C():
		logger.V(2).Info("A shard Lease write is slow: it goes on while the loop does")
	case <-ctx.Done():
	}
}

// write renews r's Lease from base (fenced: marked handoff, the last write of a shard given
// up), and records the outcome at once: the renewal (Writable and the watchdog time from
// it), the shard lost, or given up.
func (m *Manager) write(ctx context.Context, r *run, base *coordv1.Lease, fence bool) {
	logger := klog.FromContext(ctx)
	sent := m.opts.Clock.Now()
	l := m.stamp.renewed(base, sent)
	if fence {
		l = m.stamp.fenced(base, sent)
	}
	rctx, cancel := m.request(ctx)
	got, err := m.leases.Update(rctx, l, metav1.UpdateOptions{})
	cancel()

	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.signal()
	r.renewing = false
	if !r.holds() {
		return // the watchdog stopped it meanwhile
	}
	gone := apierrors.IsConflict(err) || apierrors.IsNotFound(err)
	switch {
	case fence && (err == nil || gone):
		logger.Info("Shard given up", "shard", r.shard, "freeAt", sent.Add(m.opts.LeaseDuration), "fenced", err == nil)
		r.phase, r.lease = stopping, nil
		if m.runs[r.shard] == r {
			delete(m.runs, r.shard)
		}
	case err == nil:
		r.lease, r.renewed = got, sent
	case gone:
		logger.Error(err, "Shard lost: its Lease was taken or deleted; stopping it", "shard", r.shard)
		r.stop()
	default:
		logger.Error(err, "Renewing a shard's Lease failed; retrying", "shard", r.shard, "fence", fence, "renewed", r.renewed)
	}
}

// observe lists the replica Leases (who is live) and the shard Leases (who holds what, and
// since when each is unchanged). It reports false when the shard Leases could not be listed:
// nothing is balanced on an old view.
func (m *Manager) observe(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	rctx, cancel := m.request(ctx)
	defer cancel()
	replicas, err := m.leases.List(rctx, metav1.ListOptions{LabelSelector: ReplicaLabel + "=" + m.opts.Prefix})
	if err != nil {
		logger.Error(err, "Listing the replica Leases failed")
	} else {
		now := m.opts.Clock.Now()
		live := []string{m.opts.Identity}
		for k := range replicas.Items {
			r := recordOf(&replicas.Items[k], m.opts.LeaseDuration)
			// A replica counting shards differently shares none of ours: it waits (mixed).
			if r.holder != "" && r.shards == m.opts.Shards && now.Before(r.renewTime.Add(r.duration)) {
				live = append(live, r.holder)
			}
		}
		slices.Sort(live)
		m.mu.Lock()
		m.live = slices.Compact(live)
		m.mu.Unlock()
	}

	shards, err := m.leases.List(rctx, metav1.ListOptions{LabelSelector: ShardLabel + "=" + m.opts.Prefix})
	if err != nil {
		logger.Error(err, "Listing the shard Leases failed")
		return false
	}
	now := m.opts.Clock.Now() // after the response: every record listed was written before
	records := make([]record, len(m.obs))
	extra := map[string]record{}
	for k := range shards.Items {
		l := &shards.Items[k]
		if i, ok := shardIndex(m.opts.Prefix, l.Name); ok && i < len(records) {
			records[i] = recordOf(l, m.opts.LeaseDuration)
		} else {
			extra[l.Name] = recordOf(l, m.opts.LeaseDuration)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mixed := false
	for name, rec := range extra {
		o, ok := m.extra[name]
		if !ok || !o.same(rec) {
			m.noteLocked(-1, o.record, rec, false, now)
			o = observation{record: rec, since: now}
		}
		if m.extra == nil {
			m.extra = map[string]observation{}
		}
		m.extra[name] = o
		mixed = mixed || !o.free(now)
	}
	for name, o := range m.extra {
		if _, ok := extra[name]; !ok {
			m.noteLocked(-1, o.record, record{}, false, now)
			delete(m.extra, name)
		}
	}
	for i, rec := range records {
		if o := m.obs[i]; !o.same(rec) || o.since.IsZero() {
			m.noteLocked(i, o.record, rec, m.oursLocked(i, o.record, rec), now)
			m.obs[i] = observation{record: rec, since: now}
		}
		mixed = mixed || (rec.exists && rec.shards != m.opts.Shards && !m.obs[i].free(now))
		if r := m.runs[i]; r != nil && r.holds() && (!rec.exists || rec.holder != m.opts.Identity) {
			logger.Error(nil, "Shard lost: its Lease names another holder or is gone; stopping it", "shard", i, "holder", rec.holder)
			r.stop()
		}
	}
	if mixed != m.mixed {
		if mixed {
			logger.Info("A shard Lease is held under another shard count: taking no shard until none is", "shards", m.opts.Shards)
		} else {
			logger.Info("Every shard Lease held is under this shard count again", "shards", m.opts.Shards)
		}
	}
	m.mixed = mixed
	m.anyShard.prune(now, m.opts.LeaseDuration)
	for _, w := range m.others {
		w.prune(now, m.opts.LeaseDuration)
	}
	return true
}

// noteLocked records what a shard Lease's change from prev to cur, first listed at now,
// tells of other replicas' writers: in shard i (-1: a Lease beyond our shard count), or in
// every shard for a Lease written under another shard count. ours: the change is our own
// take, made on prev's version. m.mu is held.
//
//   - prev named another holder: unless ours, the change came after that holder's last
//     renewal we saw, and it may have renewed once more just before it (then the Lease was
//     deleted, or rewritten by someone else): its writers may write until RenewDeadline
//     after now.
//   - cur names another holder, not handed off: it renewed before now; the same bound.
//   - cur is handed off by another holder: that holder's writers, in every hold it had,
//     stopped before it wrote it, so by its renewTime (its clock; now if later).
func (m *Manager) noteLocked(i int, prev, cur record, ours bool, now time.Time) {
	in := func(r record) writers {
		if i < 0 || r.shards != m.opts.Shards {
			return m.anyShard
		}
		if m.others[i] == nil {
			m.others[i] = writers{}
		}
		return m.others[i]
	}
	other := func(r record) bool { return r.exists && r.holder != "" && r.holder != m.opts.Identity }
	if other(prev) && !ours {
		in(prev).until(prev.holder, now.Add(m.opts.RenewDeadline))
	}
	if other(cur) {
		if cur.handoff {
			at := now
			if !cur.renewTime.IsZero() && cur.renewTime.Before(now) {
				at = cur.renewTime
			}
			in(cur).stopped(cur.holder, at)
		} else {
			in(cur).until(cur.holder, now.Add(m.opts.RenewDeadline))
		}
	}
}

// oursLocked reports whether shard i's Lease changed from prev to cur by our own take on
// prev's version (its reply lost or not): no one else wrote it in between. m.mu is held.
func (m *Manager) oursLocked(i int, prev, cur record) bool {
	r := m.runs[i]
	if r == nil || r.attempt == nil || !cur.exists || cur.holder != m.opts.Identity || r.attempt.Spec.RenewTime == nil {
		return false
	}
	base := ""
	if prev.exists {
		base = prev.lease.ResourceVersion
	}
	sent := r.attempt.Spec.RenewTime.Time.Truncate(time.Microsecond)
	return r.attempt.ResourceVersion == base && sent.Equal(cur.renewTime.Truncate(time.Microsecond))
}

// openAtLocked is the earliest shard i may open: LeaseDuration after the last possible
// write of every other replica's writers seen in it (or in any shard, under another shard
// count). m.mu is held.
func (m *Manager) openAtLocked(i int) time.Time {
	last := m.anyShard.last()
	if l := m.others[i].last(); l.After(last) {
		last = l
	}
	return last.Add(m.opts.LeaseDuration)
}

// balance gives a shard up, or warms and takes one, as plan decides. It reports whether it
// took one. (It first opens the shards taken earlier whose confirming list failed.)
func (m *Manager) balance(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	now := m.opts.Clock.Now()
	m.mu.Lock()
	m.confirmLocked(ctx)
	v := m.viewLocked(now)
	d := plan(v)
	if d.shed >= 0 {
		r := m.runs[d.shed]
		q, ceil := v.shares()
		logger.Info("Giving a shard up: stopping its writers", "shard", d.shed, "held", len(v.serving), "fairShare", ceil, "floor", q, "liveReplicas", len(v.live))
		m.releaseLocked(r)
	}
	for _, i := range d.drop {
		logger.V(2).Info("No longer warming a shard", "shard", i)
		m.runs[i].stop()
	}
	for _, i := range d.start {
		logger.V(2).Info("Warming a shard to take", "shard", i, "holder", m.obs[i].holder)
		m.startLocked(ctx, i)
	}
	var r *run
	var read *coordv1.Lease
	if d.take >= 0 {
		r, read = m.runs[d.take], m.obs[d.take].lease
	}
	m.mu.Unlock()
	return r != nil && m.take(ctx, r, read)
}

// confirm opens the shards taken since the last list (confirmLocked).
func (m *Manager) confirm(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.confirmLocked(ctx)
}

// releaseLocked gives r's shard up: its ctx ends, and the loop runs again as soon as Start
// returned, to fence the Lease. m.mu is held.
func (m *Manager) releaseLocked(r *run) {
	r.phase = releasing
	r.cancel()
	go func() {
		<-r.done
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}()
}

// confirmLocked opens the gates of the shards taken since the last list, now that a list
// after their take shows no shard Lease held under another shard count: two replicas that
// count differently cannot both get there, as each lists after its own take. When one is,
// they are given up before any writer ran. m.mu is held.
func (m *Manager) confirmLocked(ctx context.Context) {
	now := m.opts.Clock.Now()
	for i, r := range m.runs {
		if r.phase != taken {
			continue
		}
		if m.mixed {
			klog.FromContext(ctx).Info("Giving a shard up unopened: a shard Lease is held under another shard count", "shard", i)
			m.releaseLocked(r)
			continue
		}
		if now.Before(m.openAtLocked(i)) {
			continue
		}
		klog.FromContext(ctx).Info("Holding a shard: writers may start", "shard", i)
		r.phase = serving
		r.gate.Open()
	}
}

// viewLocked is what plan decides from. m.mu is held.
func (m *Manager) viewLocked(now time.Time) view {
	n := len(m.obs)
	v := view{
		me: m.opts.Identity, live: m.live,
		holder: make([]string, n), free: make([]bool, n), stale: make([]bool, n), soon: make([]bool, n), busy: make([]bool, n),
		offset: m.offset, mixed: m.mixed,
	}
	for i, o := range m.obs {
		r := m.runs[i]
		switch {
		case o.free(now):
			v.free[i] = true
			v.stale[i] = !now.Before(o.freeAt().Add(m.opts.LeaseDuration))
		case o.holder == m.opts.Identity && (r == nil || r.phase == warming):
			// Our own record, not held: a take whose reply was lost, or a shard lost or given
			// up whose Start has returned. Only this process writes its identity, and no
			// writer of that shard runs here (one run per shard): ours to take again.
			v.free[i] = true
		case o.handoff || !slices.Contains(m.live, o.holder):
			v.soon[i] = true
		default:
			v.holder[i] = o.holder
		}
	}
	for i, r := range m.runs {
		v.busy[i] = true
		switch r.phase {
		case warming:
			v.candidates = append(v.candidates, i)
		case taken, serving:
			v.serving = append(v.serving, i)
		case releasing:
			v.releasing = true
		case stopping:
		}
	}
	slices.Sort(v.serving)
	slices.Sort(v.candidates)
	return v
}

// startLocked calls Start for shard i, its gate closed. m.mu is held.
func (m *Manager) startLocked(ctx context.Context, i int) {
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("shard", i)))
	r := &run{shard: i, phase: warming, gate: &leader.Gate{}, cancel: cancel, done: make(chan struct{})}
	m.runs[i] = r
	go func() {
		defer close(r.done)
		m.opts.Start(ctx, i, r.gate)
	}()
}

// take writes the shard's Lease naming this replica, on read (nil: there is none) with its
// resourceVersion, and reports whether it did. Its gate opens after the next list
// (confirmLocked).
func (m *Manager) take(ctx context.Context, r *run, read *coordv1.Lease) bool {
	logger := klog.FromContext(ctx)
	now := m.opts.Clock.Now()
	rctx, cancel := m.request(ctx)
	defer cancel()
	var l *coordv1.Lease
	if read == nil {
		l = m.stamp.newLease(m.opts.Namespace, shardLeaseName(m.opts.Prefix, r.shard), ShardLabel, m.opts.Prefix, now)
	} else {
		l = m.stamp.taken(read, now)
	}
	m.mu.Lock()
	r.attempt = l.DeepCopy()
	m.mu.Unlock()
	var got *coordv1.Lease
	var err error
	if read == nil {
		got, err = m.leases.Create(rctx, l, metav1.CreateOptions{})
	} else {
		got, err = m.leases.Update(rctx, l, metav1.UpdateOptions{})
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case r.phase != warming:
		// Not reached: only the loop goroutine (this one) ends a warming run.
	case err == nil:
		logger.Info("Took a shard's Lease", "shard", r.shard, "previousHolder", holderOf(read), "opensAt", m.openAtLocked(r.shard))
		r.phase, r.lease, r.renewed = taken, got, now
		m.signal()
		return true
	case apierrors.IsConflict(err):
		logger.V(2).Info("Another replica took the shard first", "shard", r.shard)
		r.stop()
	case apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err):
		logger.V(2).Info("The shard's Lease changed; looking again", "shard", r.shard, "err", err)
	default:
		logger.Error(err, "Taking a shard's Lease failed; retrying", "shard", r.shard)
	}
	return false
}

func holderOf(l *coordv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// shutdown stops every shard, waits for each Start to return, then fences the shard Leases
// held (renewed once more and marked handoff, now that their writers have stopped: another
// replica takes each LeaseDuration later, so that no member is written by two replicas less
// than LeaseDuration apart) and deletes the replica Lease.
func (m *Manager) shutdown(ctx context.Context) {
	logger := klog.FromContext(ctx)
	m.writing.Wait() // Run's ctx ended: they end soon; the fences start from their outcome
	var held []*coordv1.Lease
	var runs []*run
	m.mu.Lock()
	for _, r := range m.runs {
		if r.holds() {
			held = append(held, r.lease)
		}
		r.stop()
		runs = append(runs, r)
	}
	m.mu.Unlock()
	for _, r := range runs {
		<-r.done
	}
	for _, l := range held {
		rctx, cancel := m.request(ctx)
		_, err := m.leases.Update(rctx, m.stamp.fenced(l, m.opts.Clock.Now()), metav1.UpdateOptions{})
		cancel()
		if err != nil {
			logger.Error(err, "Fencing a shard's Lease failed: it is free once it expires", "lease", l.Name)
		}
	}
	m.mu.Lock()
	clear(m.runs)
	m.mu.Unlock()
	rctx, cancel := m.request(ctx)
	defer cancel()
	if err := m.leases.Delete(rctx, m.replicaName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		logger.Error(err, "Deleting this replica's Lease failed", "lease", m.replicaName)
	}
	m.presence = nil
}
