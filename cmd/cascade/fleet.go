package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/internal/shard"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy"
	"github.com/cascade-gc/cascade/policy/watch"
)

// Fleet mode: one process collects in many control planes (members). A provider lists the
// members (fleet_providers.go); the fleet starts a member unit for each (buildMember: the same
// parts as the single cluster, on the member's own clients), restarts it when its kubeconfig
// changes and stops it when it goes. A member whose API server is down or whose part fails is
// restarted with backoff, alone: the others never wait for it.

// memberSource is one member as a provider lists it.
type memberSource struct {
	// kubeconfig is the member's kubeconfig (its current context is used).
	kubeconfig []byte
	// dir, when set, resolves the kubeconfig's relative file paths (the directory provider).
	dir string
	// origin says where it came from, for logs and Events: "Secret NS/NAME", "file PATH".
	origin string
	// secret is the host Secret it came from (nil: not a Secret), for Warning Events on it.
	secret *corev1.Secret
}

// provider lists the fleet's members: update is called with the whole set whenever it may
// have changed (and once at start, when the provider has synced).
type provider interface {
	Run(ctx context.Context, update func(map[string]memberSource)) error
}

// memberState is what /readyz and the metrics say of one member.
type memberState struct {
	name   string
	up     bool   // its parts run and its graph synced
	reason string // why it is not up ("" when it is)
}

// fleet is the part that runs the members.
type fleet struct {
	opts     *Options
	ms       metricSet
	gate     *leader.Gate
	events   record.EventRecorder // host Events (on a member's Secret)
	provider provider
	// pool is the workers every member shares (--workers slots, round robin between members:
	// work.Pool); each member's queues take a slot per item.
	pool *work.Pool
	// mappers are the REST mappers the members share, one per discovery document.
	mappers *gc.SharedMappers
	// hostPolicy is the host's policy in force: a member without its own takes it.
	hostPolicy              func() *policy.Compiled
	hostPolicyAuthoritative func() bool

	// shards, with --fleet-shards above 1, holds this replica's shards of the fleet
	// (internal/shard): only the members of the shards it works on run here, each with its
	// shard's gate and write guard. Nil: every member runs, behind gate.
	shards *shard.Manager
	// identity is this replica's on the shards' Leases, also in the user agent of its requests
	// to the members ("" without shards).
	identity string

	// updateMu makes one update at a time: the provider's lists and the shards' starts and
	// stops both call reconcile.
	updateMu sync.Mutex

	mu      sync.Mutex
	members map[string]*runningMember // guarded by mu
	synced  bool                      // guarded by mu: the provider listed once
	listed  map[string]memberSource   // guarded by mu: the provider's last list
	active  map[int]*leader.Gate      // guarded by mu: the shards started here (warming or held), with their gates
	wg      sync.WaitGroup
	base    context.Context // Run's: the members' contexts derive from it
}

// runningMember is one member unit and what runs it.
type runningMember struct {
	name   string
	source memberSource
	hash   [32]byte
	cancel context.CancelFunc
	done   chan struct{}
	// gate opens the member's writers: the process's, or its shard's. writable, with shards,
	// is its shard's write guard (shard.Manager.Writable); nil without.
	gate     *leader.Gate
	writable func() error

	mu     sync.Mutex
	ctrl   *gc.Controller // nil until built
	dialer *memberDialer  // its connections, while it runs
	reason string         // why it is not running ("" when it runs)
}

func (f *fleet) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("fleet")
	ctx = klog.NewContext(ctx, logger)
	f.members = map[string]*runningMember{}
	f.active = map[int]*leader.Gate{}
	f.base = ctx
	var shardsDone chan error
	if f.shards != nil {
		shardsDone = make(chan error, 1)
		go func() { shardsDone <- f.shards.Run(ctx) }()
	}
	err := f.provider.Run(ctx, func(set map[string]memberSource) {
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
	f.mu.Unlock()
	f.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// reconcile runs the members that should run here: every member the provider listed or, with
// shards, those of the shards started here.
func (f *fleet) reconcile() {
	f.updateMu.Lock()
	defer f.updateMu.Unlock()
	f.mu.Lock()
	want := map[string]memberSource{}
	for name, src := range f.listed {
		if f.shards == nil {
			want[name] = src
		} else if _, ok := f.active[shard.Of(name, f.opts.FleetShards)]; ok {
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
func (f *fleet) runShard(ctx context.Context, i int, gate *leader.Gate) {
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
func (f *fleet) gateOf(name string) (*leader.Gate, func() error, bool) {
	if f.shards == nil {
		return f.gate, nil, true
	}
	i := shard.Of(name, f.opts.FleetShards)
	gate, ok := f.active[i]
	return gate, func() error { return f.shards.Writable(i) }, ok
}

// elsewhere says where a member that does not run here runs: its shard and that shard's holder.
func (f *fleet) elsewhere(name string) string {
	if f.shards == nil {
		return ""
	}
	i := shard.Of(name, f.opts.FleetShards)
	if h := f.shards.Holder(i); h != "" {
		return fmt.Sprintf("it is in shard %d, held by replica %s (ask that replica)", i, h)
	}
	return fmt.Sprintf("it is in shard %d, which no replica holds now", i)
}

// update starts the members that are new, restarts those whose kubeconfig changed and stops
// those that went. A changed member's new unit starts only once its old one has stopped (never
// two writers for one member); the stops are waited for outside f.mu, so that /readyz and the
// metrics are not held up meanwhile. Only the provider's goroutine calls update.
func (f *fleet) update(ctx context.Context, set map[string]memberSource) {
	logger := klog.FromContext(ctx)
	f.mu.Lock()
	f.synced = true
	var stopping []*runningMember
	for name, m := range f.members {
		src, ok := set[name]
		if ok && sha256.Sum256(src.kubeconfig) == m.hash && src.dir == m.source.dir {
			continue
		}
		if ok {
			logger.Info("Member's kubeconfig changed: restarting it", "member", name, "origin", src.origin)
		} else {
			logger.Info("Member removed: stopping it", "member", name)
		}
		m.cancel()
		stopping = append(stopping, m)
	}
	f.mu.Unlock()
	for _, m := range stopping {
		<-m.done
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range stopping {
		delete(f.members, m.name)
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
		m := &runningMember{name: name, source: src, hash: sha256.Sum256(src.kubeconfig), cancel: cancel, done: make(chan struct{}), reason: "starting", gate: gate, writable: writable}
		f.members[name] = m
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer close(m.done)
			f.runMember(klog.NewContext(mctx, logger.WithValues("member", name)), m)
		}()
		logger.Info("Member added", "member", name, "origin", src.origin)
	}
}

// runMember builds and runs member m until its context ends, building it again with backoff
// after a failure (its API server down, a part that gave up): a failing member is isolated.
func (f *fleet) runMember(ctx context.Context, m *runningMember) {
	logger := klog.FromContext(ctx)
	backoff := time.Second
	warned := false
	for ctx.Err() == nil {
		started := time.Now()
		err := f.runMemberOnce(ctx, m)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			backoff, warned = time.Second, false // it ran for a while: a new run of failures
		}
		m.setDown(err)
		logger.Error(err, "Member failed; retrying", "retryIn", backoff)
		logger.Info("Fleet", "summary", summarizeMembers(f.states()))
		if !warned && m.source.secret != nil && f.events != nil {
			f.events.Eventf(m.source.secret, corev1.EventTypeWarning, "MemberUnavailable", "cascade cannot collect in member %s: %v", m.name, err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// runMemberOnce builds member m from its kubeconfig and runs it until ctx ends or a part fails.
func (f *fleet) runMemberOnce(ctx context.Context, m *runningMember) error {
	cfg, err := memberRESTConfig(m.source)
	if err != nil {
		return fmt.Errorf("kubeconfig from %s: %w", m.source.origin, err)
	}
	cfg.UserAgent = userAgent + "/" + m.name
	if f.identity != "" {
		cfg.UserAgent += " (replica " + f.identity + ")" // the members' audit logs tell the replicas apart
	}
	if m.writable != nil {
		// The shard's write guard once more, as the request leaves: a write that passed the
		// Edge's guard can wait in the client's rate limiter (or in a process stopped by
		// SIGSTOP) past the shard's Lease.
		writable := m.writable
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return writeGuard{rt: rt, writable: writable} })
	}
	cfg.QPS, cfg.Burst = f.opts.FleetMemberQPS, f.opts.FleetMemberBurst
	cfg.Wrap(countRequests(f.ms.requests))
	dialer := newMemberDialer()
	cfg.Dial = dialer.DialContext
	defer dialer.CloseAll()
	m.mu.Lock()
	m.dialer = dialer
	m.mu.Unlock()
	cs, err := newClients(cfg)
	if err != nil {
		return err
	}
	// Then (deferred calls run last first) the idle connections the transport still pools,
	// before the dialer closes whatever is left.
	defer utilnet.CloseIdleConnectionsFor(cs.hc.Transport)
	if _, err := cs.disco.ServerVersion(); err != nil {
		return fmt.Errorf("cannot reach the member's API server %s: %w", cfg.Host, err)
	}
	env := memberEnv{
		name: m.name, cs: cs, ms: f.ms, gate: m.gate, writable: m.writable, slots: f.pool.Share(), mappers: f.mappers,
		features:        features.New(prometheus.NewRegistry()), // each member its own levels
		policyConfigMap: f.opts.FleetMemberPolicyConfigMap,
		fallback:        f.hostPolicy, fallbackAuthoritative: f.hostPolicyAuthoritative,
	}
	u, err := buildMember(ctx, f.opts, env)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.ctrl, m.reason = u.ctrl, ""
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.ctrl = nil
		m.mu.Unlock()
	}()
	return runParts(ctx, m.gate, u)
}

// setDown records why m is not running.
func (m *runningMember) setDown(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reason = err.Error()
}

// state is m's state now.
func (m *runningMember) state() memberState {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.reason != "":
		return memberState{name: m.name, reason: m.reason}
	case m.ctrl == nil:
		return memberState{name: m.name, reason: "starting"}
	case !m.ctrl.Synced():
		return memberState{name: m.name, reason: "graph not synced yet"}
	}
	// A member whose API server went away fails no part (its watches retry): its resources that
	// can no longer be listed or watched say so, at no request's cost.
	var failing []gc.Unsynced
	for _, u := range m.ctrl.Unsynced() {
		if u.Err != "" {
			failing = append(failing, u)
		}
	}
	if len(failing) > 0 {
		return memberState{name: m.name, reason: fmt.Sprintf("%d resources cannot be listed or watched: %s: %s", len(failing), gc.GVRString(failing[0].Resource.GVR), failing[0].Err)}
	}
	return memberState{name: m.name, up: true}
}

// states is every member's state, by name.
func (f *fleet) states() []memberState {
	f.mu.Lock()
	ms := make([]*runningMember, 0, len(f.members))
	for _, m := range f.members {
		ms = append(ms, m)
	}
	f.mu.Unlock()
	out := make([]memberState, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.state())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// connections is the connections open to every member's API server.
func (f *fleet) connections() int {
	f.mu.Lock()
	ms := make([]*runningMember, 0, len(f.members))
	for _, m := range f.members {
		ms = append(ms, m)
	}
	f.mu.Unlock()
	n := 0
	for _, m := range ms {
		m.mu.Lock()
		if m.dialer != nil {
			n += m.dialer.open()
		}
		m.mu.Unlock()
	}
	return n
}

// controller is member name's collector, when it runs.
func (f *fleet) controller(name string) (*gc.Controller, bool) {
	f.mu.Lock()
	m, ok := f.members[name]
	f.mu.Unlock()
	if !ok {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ctrl, m.ctrl != nil
}

// Synced, Unsynced and Features are the fleet's /readyz: ready once the provider has listed
// the members (a member that is down never makes the process unready: the others collect);
// the members' states are summarised in Features' line.
func (f *fleet) Synced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced
}

func (f *fleet) Unsynced() []gc.Unsynced { return nil }

func (f *fleet) Features() string { return "" }

// Members is /readyz's members line: how many are up and how many not, never which nor why.
// The health port answers anyone unauthenticated, and members' names are tenants' names: they
// are in cascade_member_up on the authenticated metrics port, and the log says why each is down
// (summarizeMembers, logged on every change).
func (f *fleet) Members() string {
	up, down := 0, 0
	for _, s := range f.states() {
		if s.up {
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

// summarizeMembers is the members line of the log: "members: 48 synced, 2 not: a (connection
// refused), b (discovery: ...)", at most 10 named.
func summarizeMembers(states []memberState) string {
	up := 0
	var down []string
	for _, s := range states {
		if s.up {
			up++
			continue
		}
		reason := s.reason
		if len(reason) > 120 {
			reason = reason[:120] + "..."
		}
		down = append(down, fmt.Sprintf("%s (%s)", s.name, reason))
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

// memberRESTConfig is the client configuration of a member's kubeconfig (its current context).
func memberRESTConfig(src memberSource) (*rest.Config, error) {
	cfg, err := clientcmd.Load(src.kubeconfig)
	if err != nil {
		return nil, err
	}
	if src.dir != "" {
		// Relative paths (certificate-authority: ca.crt) are the file's directory's.
		for _, a := range cfg.AuthInfos {
			a.LocationOfOrigin = filepath.Join(src.dir, "kubeconfig")
		}
		for _, c := range cfg.Clusters {
			c.LocationOfOrigin = filepath.Join(src.dir, "kubeconfig")
		}
		if err := clientcmd.ResolveLocalPaths(cfg); err != nil {
			return nil, err
		}
	}
	return clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
}

// runParts runs a member's parts, as the process runs its own: the policy first, then the parts
// that always run, and the writers once gate opens. It returns when ctx ends (nil) or a part
// fails (its error), after every part has returned.
func runParts(ctx context.Context, gate *leader.Gate, m *member) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	start := func(p part, gated bool) {
		wg.Go(func() {
			if gated && !gate.Wait(ctx) {
				return
			}
			if err := p.c.Run(ctx); err != nil {
				cancel(fmt.Errorf("%s: %w", p.name, err))
			}
		})
	}
	if m.policy != nil {
		start(part{"policy", m.policy}, false)
		select {
		case <-m.policy.Loaded():
		case <-ctx.Done():
			wg.Wait()
			return failure(ctx)
		}
	}
	for _, p := range m.always {
		start(p, false)
	}
	for _, p := range m.writers {
		start(p, true)
	}
	<-ctx.Done()
	wg.Wait()
	return failure(ctx)
}

// --- providers ---

// secretsProvider lists members from Secrets of one host namespace: multicluster-runtime's
// kubeconfig Secrets (a label, key "kubeconfig", named after the Secret) or Cluster API's
// (type cluster.x-k8s.io/secret, named CLUSTER-kubeconfig, key "value", named CLUSTER).
type secretsProvider struct {
	client     kubernetes.Interface
	namespace  string
	selector   string // label selector ("" for Cluster API: its own rule below)
	clusterAPI bool
}

// Cluster API's kubeconfig Secret convention.
const (
	capiSecretType   = "cluster.x-k8s.io/secret"
	capiClusterLabel = "cluster.x-k8s.io/cluster-name"
	capiSuffix       = "-kubeconfig"
)

// member returns the member a Secret stands for, if any.
func (p *secretsProvider) member(s *corev1.Secret) (string, memberSource, bool) {
	origin := "Secret " + s.Namespace + "/" + s.Name
	if p.clusterAPI {
		cluster := s.Labels[capiClusterLabel]
		if string(s.Type) != capiSecretType || cluster == "" || s.Name != cluster+capiSuffix || len(s.Data["value"]) == 0 {
			return "", memberSource{}, false
		}
		return cluster, memberSource{kubeconfig: s.Data["value"], origin: origin, secret: s}, true
	}
	if len(s.Data["kubeconfig"]) == 0 {
		return "", memberSource{}, false
	}
	return s.Name, memberSource{kubeconfig: s.Data["kubeconfig"], origin: origin, secret: s}, true
}

func (p *secretsProvider) Run(ctx context.Context, update func(map[string]memberSource)) error {
	factory := informers.NewSharedInformerFactoryWithOptions(p.client, 0, informers.WithNamespace(p.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = p.selector
			if p.clusterAPI {
				o.FieldSelector = "type=" + capiSecretType
			}
		}))
	inf := factory.Core().V1().Secrets().Informer()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	lister := factory.Core().V1().Secrets().Lister().Secrets(p.namespace)
	for {
		secrets, err := lister.List(labels.Everything())
		if err != nil {
			return err
		}
		set := map[string]memberSource{}
		for _, s := range secrets {
			if name, src, ok := p.member(s); ok {
				set[name] = src
			}
		}
		update(set)
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			// A burst of changes (a rotation touches several Secrets) is taken together.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// dirProvider lists members from the kubeconfig files of a directory, read again every period.
type dirProvider struct {
	dir    string
	period time.Duration
}

func (p *dirProvider) Run(ctx context.Context, update func(map[string]memberSource)) error {
	var last map[string][32]byte
	for {
		set, err := p.read()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot read the fleet's kubeconfig directory; keeping the members", "dir", p.dir)
		} else {
			sums := make(map[string][32]byte, len(set))
			for name, src := range set {
				sums[name] = sha256.Sum256(src.kubeconfig)
			}
			if last == nil || !mapsEqual(sums, last) {
				update(set)
				last = sums
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.period):
		}
	}
}

// read is the members the directory holds now: each regular file (not hidden: a mounted
// Secret's ..data links are skipped) named after the file without its extension.
func (p *dirProvider) read() (map[string]memberSource, error) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, err
	}
	set := map[string]memberSource{}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		path := filepath.Join(p.dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		name := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name()))
		set[name] = memberSource{kubeconfig: b, dir: p.dir, origin: "file " + path}
	}
	return set, errors.Join(errs...)
}

func mapsEqual(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// addFleet adds fleet mode's parts to a: the host's Events and policy (the members' fallback),
// the provider the flags name, the fleet, its metrics and the servers.
func (a *app) addFleet(ctx context.Context, opts *Options, cfg *rest.Config, cs *clients, ms metricSet, reg *prometheus.Registry, live liveness) error {
	recorder := client.NewRecorder(ctx, scheme.Scheme, corev1.EventSource{Component: gc.EventComponent},
		&typedcorev1.EventSinkImpl{Interface: cs.kube.CoreV1().Events("")})
	events := client.NewHeldRecorder(recorder, a.gate)
	a.always = append(a.always, part{"host event writer", recorder}, part{"host events", events})

	builtin := policy.Builtin()
	hostPolicy, hostAuthoritative := func() *policy.Compiled { return builtin }, func() bool { return true }
	if opts.PolicyConfigMap != "" {
		ns, name, _ := watch.ParseName(opts.PolicyConfigMap) // validated with the flags
		a.policy = watch.New(watch.Options{
			Client: cs.kube, Namespace: ns, Name: name, Events: events, Metrics: ms.policy,
			Timeout: max(opts.StartupTimeout, time.Second), Unwatched: opts.IgnoredPolicyResources(),
		})
		hostPolicy, hostAuthoritative = a.policy.Policy, a.policy.Authoritative
	}
	var p provider
	switch {
	case opts.FleetSecretsNamespace != "":
		p = &secretsProvider{client: cs.kube, namespace: opts.FleetSecretsNamespace, selector: opts.FleetSecretsSelector}
	case opts.FleetClusterAPINamespace != "":
		p = &secretsProvider{client: cs.kube, namespace: opts.FleetClusterAPINamespace, selector: capiClusterLabel, clusterAPI: true}
	default:
		p = &dirProvider{dir: opts.FleetKubeconfigDir, period: 2 * time.Second}
	}
	f := &fleet{
		opts: opts, ms: ms, gate: a.gate, events: events, provider: p, pool: work.NewPool(opts.Workers), mappers: gc.NewSharedMappers(),
		hostPolicy: hostPolicy, hostPolicyAuthoritative: hostAuthoritative,
	}
	if opts.FleetShards > 1 {
		f.identity = leader.NewIdentity()
		f.shards = shard.New(shard.Options{
			Leases: cs.kube.CoordinationV1(), Namespace: opts.LeaderElectResourceNamespace, Prefix: opts.LeaderElectResourceName,
			Shards: opts.FleetShards, Identity: f.identity,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod,
			Start: f.runShard,
		})
	}
	a.always = append(a.always, part{"fleet", f})
	reg.MustRegister(&fleetCollector{f: f})
	reviews, err := reviewClient(cfg)
	if err != nil {
		return fmt.Errorf("build review client: %w", err)
	}
	servers, err := newServers(ctx, opts, reg, f, live.check, graphs{member: f.explainer, elsewhere: f.elsewhere}, reviews)
	if err != nil {
		return err
	}
	for _, s := range servers {
		a.always = append(a.always, part{"server " + s.flag, s})
	}
	return nil
}

// explainer is member name's collector, which answers the explain endpoints about its objects
// while it runs.
func (f *fleet) explainer(name string) (explainer, bool) {
	c, ok := f.controller(name)
	if !ok {
		return nil, false
	}
	return c, true
}

// fleetCollector exports the per-member series at scrape time, at most 5 per member (removed
// with it, as they are read from the running members): up, objects in its graph, owners
// waiting on a GC finalizer, its delete queue's depth; and the members by state.
type fleetCollector struct{ f *fleet }

var (
	descMembers = prometheus.NewDesc(gc.MetricsNamespace+"_fleet_members",
		"Fleet mode: members by state (up: its collector runs and its graph synced; down: not, see /readyz for why).", []string{"state"}, nil)
	descMemberUp = prometheus.NewDesc(gc.MetricsNamespace+"_member_up",
		"Fleet mode: 1 when the member's collector runs and its graph synced, else 0.", []string{"member"}, nil)
	descMemberObjects = prometheus.NewDesc(gc.MetricsNamespace+"_member_graph_objects",
		"Fleet mode: observed objects in the member's dependency graph.", []string{"member"}, nil)
	descMemberWaiting = prometheus.NewDesc(gc.MetricsNamespace+"_member_owners_waiting",
		"Fleet mode: the member's owners being deleted with a GC finalizer (orphan and foregroundDeletion).", []string{"member"}, nil)
	descMemberQueue = prometheus.NewDesc(gc.MetricsNamespace+"_member_delete_queue_depth",
		"Fleet mode: dependents waiting in the member's delete queue.", []string{"member"}, nil)
	descFleetConns = prometheus.NewDesc(gc.MetricsNamespace+"_fleet_connections",
		"Fleet mode: connections open to the members' API servers (each member has its own).", nil, nil)
	descShardsHeld = prometheus.NewDesc(gc.MetricsNamespace+"_fleet_shards_held",
		"Sharded fleet mode (--fleet-shards above 1): the shards whose Lease this replica holds.", nil, nil)
	descReplicas = prometheus.NewDesc(gc.MetricsNamespace+"_fleet_replicas",
		"Sharded fleet mode: the live replicas this replica sees (their own Leases), which set its fair share of the shards.", nil, nil)
)

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMembers, descMemberUp, descMemberObjects, descMemberWaiting, descMemberQueue, descFleetConns, descShardsHeld, descReplicas} {
		ch <- d
	}
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	up, down := 0, 0
	for _, s := range c.f.states() {
		v := 0.0
		if s.up {
			v = 1
			up++
		} else {
			down++
		}
		ch <- prometheus.MustNewConstMetric(descMemberUp, prometheus.GaugeValue, v, s.name)
		ctrl, ok := c.f.controller(s.name)
		if !ok {
			continue
		}
		st := ctrl.GraphStats()
		ch <- prometheus.MustNewConstMetric(descMemberObjects, prometheus.GaugeValue, float64(st.Observed), s.name)
		ch <- prometheus.MustNewConstMetric(descMemberWaiting, prometheus.GaugeValue, float64(st.WaitingOrphan+st.WaitingForeground), s.name)
		ch <- prometheus.MustNewConstMetric(descMemberQueue, prometheus.GaugeValue, float64(ctrl.DeleteQueueDepth()), s.name)
	}
	ch <- prometheus.MustNewConstMetric(descFleetConns, prometheus.GaugeValue, float64(c.f.connections()))
	if c.f.shards != nil {
		ch <- prometheus.MustNewConstMetric(descShardsHeld, prometheus.GaugeValue, float64(len(c.f.shards.Held())))
		ch <- prometheus.MustNewConstMetric(descReplicas, prometheus.GaugeValue, float64(c.f.shards.LiveReplicas()))
	}
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(up), "up")
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(down), "down")
}

// writeGuard sends a request that writes (any method but GET, HEAD and OPTIONS: lists and
// watches are GETs) only while writable says this replica may write, checked as the request
// leaves the client, after its rate limiter; it refuses the others without a request.
type writeGuard struct {
	rt       http.RoundTripper
	writable func() error
}

// WrappedRoundTripper lets client-go reach the transport under it (utilnet.CloseIdleConnectionsFor).
func (g writeGuard) WrappedRoundTripper() http.RoundTripper { return g.rt }

func (g writeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if err := g.writable(); err != nil {
			return nil, fmt.Errorf("%s %s not sent: %w: %w", req.Method, req.URL.Path, client.ErrNotWritable, err)
		}
	}
	return g.rt.RoundTrip(req)
}

// memberDialer gives a member connections of its own: a rest.Config with a Dial is never
// shared through client-go's transport cache (which would hand members with the same CA one
// transport, as if their API servers were one), and CloseAll ends the member's connections when
// it stops, so that a removed member leaves no connection, and no goroutine reading one, behind.
type memberDialer struct {
	d     net.Dialer
	mu    sync.Mutex
	conns map[*memberConn]struct{}
}

func newMemberDialer() *memberDialer {
	return &memberDialer{d: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, conns: map[*memberConn]struct{}{}}
}

func (md *memberDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := md.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	mc := &memberConn{Conn: c, md: md}
	md.mu.Lock()
	md.conns[mc] = struct{}{}
	md.mu.Unlock()
	return mc, nil
}

// CloseAll closes every connection still open.
func (md *memberDialer) CloseAll() {
	md.mu.Lock()
	conns := make([]*memberConn, 0, len(md.conns))
	for c := range md.conns {
		conns = append(conns, c)
	}
	md.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// open is the number of connections open now.
func (md *memberDialer) open() int {
	md.mu.Lock()
	defer md.mu.Unlock()
	return len(md.conns)
}

type memberConn struct {
	net.Conn
	md   *memberDialer
	once sync.Once
}

func (c *memberConn) Close() error {
	c.once.Do(func() {
		c.md.mu.Lock()
		delete(c.md.conns, c)
		c.md.mu.Unlock()
	})
	return c.Conn.Close()
}
