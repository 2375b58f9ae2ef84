package fleet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/internal/shard"
	"github.com/cascade-gc/cascade/internal/work"
)

// DefaultLeaveTimeout bounds what a replica does in a member that left the fleet (Unit.Leave):
// its admission objects deleted, its stamps lifted, and the deletions its GC finalizers hold
// finished by its collector, which runs meanwhile. An orphan deletion of 6,000 dependents at
// the member's default 20 requests a second takes five minutes; the bound is for the deletions
// under way, not for the largest one (what is left is logged and counted).
const DefaultLeaveTimeout = 2 * time.Minute

// Options are what a Fleet is made of: cmd/cascade turns the flags into them.
type Options struct {
	// Provider reports the member set. Required.
	Provider Provider
	// Build builds member m's collector on the client configuration the fleet made for it
	// (cmd/cascade: the single cluster's constructors on the member's own clients). Required.
	Build func(ctx context.Context, m Member) (Unit, error)
	// Workers is the size of the pool every member shares (--workers).
	Workers int
	// Gate opens the members' writers when this process leads (without shards).
	Gate *leader.Gate
	// Events records Warning Events on the host objects members come from (their Secrets).
	Events record.EventRecorder
	// Kubeconfig is the operator's opt-ins for the members' kubeconfigs.
	Kubeconfig KubeconfigOptions
	// QPS and Burst are each member's client budget against its own API server.
	QPS   float32
	Burst int
	// UserAgent is the members' requests' ("/MEMBER" is added).
	UserAgent string
	// Shards, when Shards.Shards is above 1, splits the members over the replicas
	// (internal/shard): Start and Identity are the fleet's own.
	Shards shard.Options
	// LeaveTimeout bounds Unit.Leave (DefaultLeaveTimeout when 0).
	LeaveTimeout time.Duration
	// ForgetHost, when set, is called with a member's API server (host:port) once the member
	// stopped and no other member here has that server: its per-host series (rest_client_*)
	// go with it.
	ForgetHost func(host string)
	// LivenessPeriod is how often each member's Unit.Check is asked (10s when 0); a member whose
	// workers stalled is stopped and started again, alone.
	LivenessPeriod time.Duration
	// StallAfter is how long the fleet's own machinery (a reconcile of the member set) may take
	// before Check fails: the process's liveness in fleet mode (5 minutes when 0).
	StallAfter time.Duration
	// RequestTimeout bounds each of a member's requests but its watches
	// (DefaultRequestTimeout when 0); their answers' bodies are bounded by MaxResponseBytes.
	RequestTimeout time.Duration
}

// Member is what Options.Build builds a member's collector from.
type Member struct {
	// Name is the member's name in the fleet.
	Name string
	// Config is its client configuration: the kubeconfig's allowed fields only, its user
	// agent and budget, its own connections and, with shards, its shard's write guard.
	Config *rest.Config
	// Gate opens its writers (the process's, or its shard's).
	Gate *leader.Gate
	// Slots is its share of the fleet's worker pool.
	Slots *work.Share
	// Mappers holds the REST mappers the members share, one per discovery document.
	Mappers *gc.SharedMappers
}

// Unit is one member's collector, built by Options.Build.
type Unit interface {
	// Run runs the member's parts until ctx ends (nil) or a part fails (its error).
	Run(ctx context.Context) error
	// Controller is the member's collector.
	Controller() *gc.Controller
	// Check says whether the member's workers stalled: work due and nothing moving for the
	// member's stall limit (its own liveness; nil: they move).
	Check() error
	// Leave removes what cascade wrote in the member, while Run still runs, as `cascade
	// uninstall` does: the stamping pass stopped, the admission objects deleted, the stamps
	// lifted (never a foreign finalizer), then, until ctx ends, the deletions that GC
	// finalizers hold are left to the collector to finish, and the orphan record is deleted
	// once none is left. It returns what was left undone.
	Leave(ctx context.Context) error
}

// Fleet runs the members.
type Fleet struct {
	opts    Options
	pool    *work.Pool
	mappers *gc.SharedMappers
	// shards, with Options.Shards.Shards above 1, holds this replica's shards of the fleet:
	// only the members of the shards it works on run here, each with its shard's gate and
	// write guard. Nil: every member runs, behind Options.Gate.
	shards *shard.Manager
	// identity is this replica's on the shards' Leases, also in the user agent of its requests
	// to the members ("" without shards).
	identity string
	// cleanups counts what became of the members that left the fleet here; restarts the
	// members restarted alone because their workers stalled.
	cleanups *prometheus.CounterVec
	restarts prometheus.Counter
	// reconciling is when the reconcile under way started (zero: none): Check.
	reconciling atomic.Int64

	// updateMu makes one update at a time: the provider's lists and the shards' starts and
	// stops both call reconcile.
	updateMu sync.Mutex

	mu      sync.Mutex
	members map[string]*runningMember // guarded by mu
	leaving map[string]*runningMember // guarded by mu: members that left the fleet, cleaning up
	synced  bool                      // guarded by mu: the provider listed once
	listed  map[string]Source         // guarded by mu: the provider's last list
	active  map[int]*leader.Gate      // guarded by mu: the shards started here (warming or held), with their gates
	wg      sync.WaitGroup
	base    context.Context // Run's: the members' contexts derive from it
}

// New returns the fleet of opts; nothing runs until Run.
func New(opts Options) (*Fleet, error) {
	if opts.Provider == nil || opts.Build == nil {
		return nil, errors.New("fleet: a provider and a builder are required")
	}
	if opts.LeaveTimeout <= 0 {
		opts.LeaveTimeout = DefaultLeaveTimeout
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.LivenessPeriod <= 0 {
		opts.LivenessPeriod = 10 * time.Second
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = 5 * time.Minute
	}
	if opts.Gate == nil {
		opts.Gate = leader.Open()
	}
	f := &Fleet{
		opts: opts, pool: work.NewPool(max(opts.Workers, 1)), mappers: gc.NewSharedMappers(),
		cleanups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: gc.MetricsNamespace, Name: "fleet_member_cleanups_total",
			Help: "Fleet mode: members that left the fleet while this replica ran them, by what became of what cascade wrote in them: clean (admission objects and stamps removed, no GC-finalizer deletion left), incomplete (something left: the log says what; cascade uninstall --fleet-member cleans it), unreachable (the member was down: nothing removed).",
		}, []string{"result"}),
	}
	f.restarts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: gc.MetricsNamespace, Name: "fleet_member_restarts_total",
		Help: "Fleet mode: members stopped and started again, alone, because their workers stalled (work due and nothing moving for 5 minutes); a Warning Event MemberUnavailable on the member's Secret names it.",
	})
	for _, r := range []string{cleanupClean, cleanupIncomplete, cleanupUnreachable} {
		f.cleanups.WithLabelValues(r)
	}
	if opts.Shards.Shards > 1 {
		so := opts.Shards
		f.identity = leader.NewIdentity()
		so.Identity, so.Start = f.identity, f.runShard
		f.shards = shard.New(so)
	}
	return f, nil
}

// What became of a member that left the fleet (cascade_fleet_member_cleanups_total).
const (
	cleanupClean       = "clean"
	cleanupIncomplete  = "incomplete"
	cleanupUnreachable = "unreachable"
)

// Run runs the provider and the members until ctx ends.
func (f *Fleet) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("fleet")
	ctx = klog.NewContext(ctx, logger)
	f.mu.Lock()
	f.members = map[string]*runningMember{}
	f.leaving = map[string]*runningMember{}
	f.active = map[int]*leader.Gate{}
	f.base = ctx
	f.mu.Unlock()
	var shardsDone chan error
	if f.shards != nil {
		shardsDone = make(chan error, 1)
		go func() { shardsDone <- f.shards.Run(ctx) }()
	}
	err := f.opts.Provider.Run(ctx, func(set map[string]Source) {
		f.mu.Lock()
		f.listed = set
		f.mu.Unlock()
		f.reconcile()
	})
	if shardsDone != nil {
		if serr := <-shardsDone; serr != nil && ctx.Err() == nil {
			err = errors.Join(err, serr)
		}
	}
	f.mu.Lock()
	for _, m := range f.members {
		m.cancel()
	}
	for _, m := range f.leaving {
		m.cancel()
	}
	f.mu.Unlock()
	f.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// reconcile runs the members that should run here: every member the provider listed or, with
// shards, those of the shards started here.
func (f *Fleet) reconcile() {
	f.updateMu.Lock()
	defer f.updateMu.Unlock()
	f.reconciling.Store(time.Now().UnixNano())
	defer f.reconciling.Store(0)
	f.mu.Lock()
	want := map[string]Source{}
	for name, src := range f.listed {
		if f.shards == nil {
			want[name] = src
		} else if _, ok := f.active[shard.Of(name, f.opts.Shards.Shards)]; ok {
			want[name] = src
		}
	}
	f.mu.Unlock()
	f.update(f.base, want)
}

// runShard is the shards' Start (shard.Options): the members of shard i run here, their graphs
// warming while gate is closed, their writers once it opens (the shard's Lease held), until ctx
// ends; it returns once every one of them has stopped, so that no writer of the shard is left
// when the Lease may go to another replica.
func (f *Fleet) runShard(ctx context.Context, i int, gate *leader.Gate) {
	f.mu.Lock()
	f.active[i] = gate
	f.mu.Unlock()
	f.reconcile()
	<-ctx.Done()
	f.mu.Lock()
	delete(f.active, i)
	f.mu.Unlock()
	f.reconcile() // stops the shard's members and waits for them
}

// gateOf is the gate and write guard of a member's writers: its shard's, or the process's;
// false when its shard stopped here since the list update works from was made (the member is
// not started). Called with f.mu held.
func (f *Fleet) gateOf(name string) (*leader.Gate, func() error, bool) {
	if f.shards == nil {
		return f.opts.Gate, nil, true
	}
	i := shard.Of(name, f.opts.Shards.Shards)
	gate, ok := f.active[i]
	return gate, func() error { return f.shards.Writable(i) }, ok
}

// Check is the fleet machinery's liveness, the process's /healthz in fleet mode: it fails when a
// reconcile of the member set has not ended for Options.StallAfter (every stop it waits for is
// bounded, so that is a stall of the fleet itself), never for one member (members are
// restarted alone: runMemberOnce).
func (f *Fleet) Check() error {
	if t := f.reconciling.Load(); t != 0 {
		if d := time.Since(time.Unix(0, t)); d > f.opts.StallAfter {
			return fmt.Errorf("the fleet's reconcile of its members has not ended for %s", d.Round(time.Second))
		}
	}
	return nil
}

// Elsewhere says where a member that does not run here runs: its shard and that shard's
// holder ("" without shards).
func (f *Fleet) Elsewhere(name string) string {
	if f.shards == nil {
		return ""
	}
	i := shard.Of(name, f.opts.Shards.Shards)
	if h := f.shards.Holder(i); h != "" {
		return fmt.Sprintf("it is in shard %d, held by replica %s (ask that replica)", i, h)
	}
	return fmt.Sprintf("it is in shard %d, which no replica holds now", i)
}

// sourceHash tells two versions of a member's source apart: a change restarts the member.
func sourceHash(src Source) [32]byte {
	h := sha256.New()
	h.Write(src.Kubeconfig)
	if src.Err != nil {
		h.Write([]byte{0})
		h.Write([]byte(src.Err.Error()))
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// update engages and disengages members so that those of set run here:
//   - a member new to this replica is started;
//   - one whose source changed (a rotation) is stopped, then started again: never two writers
//     for one member, and nothing removed from it;
//   - one still in the fleet but no longer run here (its shard moved or stopped) is stopped,
//     nothing removed;
//   - one that left the fleet (no longer listed by the provider) is told to leave: it removes
//     what cascade wrote in it, then stops (runningMember.leave), in its own goroutine, so that
//     no other member waits on it; a member of that name added back, or its shard stopped
//     here, ends its leaving first.
//
// The stops are waited for outside f.mu, so that /readyz and the metrics are not held up
// meanwhile. Only reconcile calls update.
func (f *Fleet) update(ctx context.Context, set map[string]Source) {
	logger := klog.FromContext(ctx)
	f.mu.Lock()
	f.synced = true
	var stopping []*runningMember
	for name, m := range f.members {
		src, ok := set[name]
		if ok && sourceHash(src) == m.hash {
			continue
		}
		_, listed := f.listed[name]
		switch {
		case ok:
			logger.Info("Member's kubeconfig changed: restarting it", "member", name, "origin", src.Origin)
		case listed:
			logger.Info("Member no longer runs here (its shard stopped here): stopping it", "member", name)
		default:
			logger.Info("Member left the fleet: removing what cascade wrote in it, then stopping it", "member", name, "within", f.opts.LeaveTimeout)
			close(m.leave)
			delete(f.members, name)
			f.leaving[name] = m
			continue
		}
		m.cancel()
		stopping = append(stopping, m)
	}
	for name, m := range f.leaving {
		_, back := set[name]
		if _, _, ok := f.gateOf(name); back || !ok {
			m.cancel()
			stopping = append(stopping, m)
		}
	}
	f.mu.Unlock()
	for _, m := range stopping {
		<-m.done
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range stopping {
		if f.members[m.name] == m {
			delete(f.members, m.name)
		}
		if f.leaving[m.name] == m {
			delete(f.leaving, m.name)
		}
	}
	for name, src := range set {
		if _, ok := f.members[name]; ok {
			continue
		}
		gate, writable, ok := f.gateOf(name)
		if !ok {
			continue // its shard stopped meanwhile: the next reconcile leaves it out
		}
		mctx, cancel := context.WithCancel(ctx)
		m := &runningMember{
			name: name, source: src, hash: sourceHash(src), cancel: cancel, done: make(chan struct{}), leave: make(chan struct{}),
			reason: "starting", gate: gate, writable: writable,
		}
		f.members[name] = m
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer close(m.done)
			defer f.forget(m)
			defer func() { f.forgetHost(m, m.hostOf()) }()
			f.runMember(klog.NewContext(mctx, logger.WithValues("member", name)), m)
		}()
		logger.Info("Member added", "member", name, "origin", src.Origin)
	}
}

// forgetHost calls Options.ForgetHost with m's API server once m has stopped, unless another
// member here has the same one.
func (f *Fleet) forgetHost(m *runningMember, host string) {
	if f.opts.ForgetHost == nil || host == "" {
		return
	}
	f.mu.Lock()
	for _, set := range []map[string]*runningMember{f.members, f.leaving} {
		for _, o := range set {
			if o != m && o.hostOf() == host {
				f.mu.Unlock()
				return
			}
		}
	}
	f.mu.Unlock()
	f.opts.ForgetHost(host)
}

// forget drops m from the leaving members once it has stopped.
func (f *Fleet) forget(m *runningMember) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaving[m.name] == m {
		delete(f.leaving, m.name)
	}
}

// MemberState is what /readyz and the metrics say of one member.
type MemberState struct {
	Name   string
	Up     bool   // its parts run and its graph synced
	Reason string // why it is not up ("" when it is): bounded and escaped
}

// running is the members that run here now, those leaving the fleet among them (last).
func (f *Fleet) running() (members, leaving []*runningMember) {
	f.mu.Lock()
	defer f.mu.Unlock()
	members = make([]*runningMember, 0, len(f.members))
	for _, m := range f.members {
		members = append(members, m)
	}
	for _, m := range f.leaving {
		leaving = append(leaving, m)
	}
	return members, leaving
}

// States is every member's state, by name: a member that left the fleet is listed, down,
// until it has been cleaned and stopped.
func (f *Fleet) States() []MemberState {
	ms, leaving := f.running()
	out := make([]MemberState, 0, len(ms)+len(leaving))
	for _, m := range ms {
		out = append(out, m.state())
	}
	for _, m := range leaving {
		out = append(out, MemberState{Name: m.name, Reason: "left the fleet: removing what cascade wrote in it, then stopping"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Connections is the number of connections open to the members' API servers.
func (f *Fleet) Connections() int {
	n := 0
	ms, leaving := f.running()
	for _, m := range append(ms, leaving...) {
		m.mu.Lock()
		if m.dialer != nil {
			n += m.dialer.open()
		}
		m.mu.Unlock()
	}
	return n
}

// Controller is member name's collector, when it runs here: explain's routing by member.
func (f *Fleet) Controller(name string) (*gc.Controller, bool) {
	f.mu.Lock()
	m, ok := f.members[name]
	f.mu.Unlock()
	if !ok {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unit == nil {
		return nil, false
	}
	c := m.unit.Controller()
	return c, c != nil
}

// Synced, Unsynced and Features are the fleet's /readyz: ready once the provider has listed
// the members (a member that is down never makes the process unready: the others collect);
// the members' states are summarised in Members' line.
func (f *Fleet) Synced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced
}

func (f *Fleet) Unsynced() []gc.Unsynced { return nil }

func (f *Fleet) Features() string { return "" }

// Members is /readyz's members line: how many are up and how many not, never which nor why.
// The health port answers anyone unauthenticated, and members' names are tenants' names: they
// are in cascade_member_up on the authenticated metrics port, and the log says why each is down
// (SummarizeMembers, logged on every change).
func (f *Fleet) Members() string {
	up, down := 0, 0
	for _, s := range f.States() {
		if s.Up {
			up++
		} else {
			down++
		}
	}
	if down == 0 {
		return fmt.Sprintf("members: %d synced", up)
	}
	return fmt.Sprintf("members: %d synced, %d not (cascade_member_up names them; the log says why)", up, down)
}

// SummarizeMembers is the members line of the log: "members: 48 synced, 2 not: a (connection
// refused), b (discovery: ...)", at most 10 named, each reason at most 240 bytes.
func SummarizeMembers(states []MemberState) string {
	up := 0
	var down []string
	for _, s := range states {
		if s.Up {
			up++
			continue
		}
		down = append(down, fmt.Sprintf("%s (%s)", s.Name, SafeText(s.Reason, 240)))
	}
	line := fmt.Sprintf("members: %d synced", up)
	if len(down) == 0 {
		return line
	}
	line += fmt.Sprintf(", %d not: ", len(down))
	if len(down) > 10 {
		down = append(down[:10], fmt.Sprintf("and %d more", len(down)-10))
	}
	return line + strings.Join(down, ", ")
}
