package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/internal/fleet"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/internal/shard"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy"
	"github.com/cascade-gc/cascade/policy/watch"
)

// Fleet mode lives in internal/fleet: here the flags become its options, and a member's
// collector is built by the single cluster's constructors (buildMember) on the member's own
// clients (memberUnit).

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
	var p fleet.Provider
	switch {
	case opts.FleetSecretsNamespace != "":
		p = &fleet.SecretsProvider{Client: cs.kube, Namespace: opts.FleetSecretsNamespace, Selector: opts.FleetSecretsSelector}
	case opts.FleetClusterAPINamespace != "":
		p = &fleet.ClusterAPIProvider{Metadata: cs.metadata, Client: cs.kube, Namespace: opts.FleetClusterAPINamespace}
	default:
		p = &fleet.DirProvider{Dir: opts.FleetKubeconfigDir, Period: 2 * time.Second}
	}
	build := func(ctx context.Context, m fleet.Member) (fleet.Unit, error) {
		return buildMemberUnit(ctx, opts, m, memberEnv{
			name: m.Name, ms: ms, gate: m.Gate, slots: m.Slots, mappers: m.Mappers,
			features:        features.New(prometheus.NewRegistry()), // each member its own levels
			policyConfigMap: opts.FleetMemberPolicyConfigMap,
			fallback:        hostPolicy, fallbackAuthoritative: hostAuthoritative,
			errorText: func(s string) string { return fleet.SafeText(s, fleet.MaxErrorText) },
		})
	}
	fo := fleet.Options{
		Provider: p, Build: build, Workers: opts.Workers, Gate: a.gate, Events: events,
		Kubeconfig: fleet.KubeconfigOptions{ExecCommands: opts.FleetInsecureKubeconfigExec, InsecureTLS: opts.FleetInsecureKubeconfigTLS},
		QPS:        opts.FleetMemberQPS, Burst: opts.FleetMemberBurst, UserAgent: userAgent,
		RequestTimeout: opts.FleetMemberRequestTimeout, ForgetHost: ms.rest.Forget,
	}
	if opts.FleetShards > 1 {
		fo.Shards = shard.Options{
			Leases: cs.kube.CoordinationV1(), Namespace: opts.LeaderElectResourceNamespace, Prefix: opts.LeaderElectResourceName,
			Shards:        opts.FleetShards,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod,
		}
	}
	f, err := fleet.New(fo)
	if err != nil {
		return err
	}
	a.always = append(a.always, part{"fleet", f})
	reg.MustRegister(f.Collectors()...)
	reviews, err := reviewClient(cfg)
	if err != nil {
		return fmt.Errorf("build review client: %w", err)
	}
	// The process's liveness in fleet mode is the fleet machinery's (each member has its own,
	// and is restarted alone: internal/fleet).
	live.fleet = f.Check
	servers, err := newServers(ctx, opts, reg, f, live.check, graphs{member: fleetExplainer(f), elsewhere: f.Elsewhere}, reviews)
	if err != nil {
		return err
	}
	for _, s := range servers {
		a.always = append(a.always, part{"server " + s.flag, s})
	}
	return nil
}

// fleetExplainer routes explain by member: member name's collector answers about its objects
// while it runs here.
func fleetExplainer(f *fleet.Fleet) func(name string) (explainer, bool) {
	return func(name string) (explainer, bool) {
		c, ok := f.Controller(name)
		if !ok {
			return nil, false
		}
		return c, true
	}
}

// memberUnit is a fleet member's collector: the single cluster's parts (buildMember) on the
// member's clients (fleet.Unit).
type memberUnit struct {
	opts *Options
	cs   *clients
	gate *leader.Gate
	m    *member
	// live is the member's own liveness: its queues (scoped work metrics), with every request
	// its API server answered as progress.
	live *work.Liveness
}

// buildMemberUnit builds a member's clients on the configuration the fleet made for it (each
// request counted), checks that its API server answers, and builds its parts.
func buildMemberUnit(ctx context.Context, opts *Options, fm fleet.Member, env memberEnv) (*memberUnit, error) {
	cfg := rest.CopyConfig(fm.Config)
	cfg.Wrap(countRequests(env.ms.requests))
	// Every request the member's API server answers is progress of its workers, so that one
	// long item that keeps working (an orphan owner with 10,000 dependents) is no stall.
	var answered atomic.Uint64
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return answeredRequests{rt: rt, n: &answered} })
	env.work = env.ms.work.Scoped()
	cs, err := newClients(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := cs.disco.ServerVersion(); err != nil {
		utilnet.CloseIdleConnectionsFor(cs.hc.Transport)
		return nil, fmt.Errorf("cannot reach the member's API server %s: %w", fleet.RedactURL(cfg.Host), err)
	}
	env.cs = cs
	m, err := buildMember(ctx, opts, env)
	if err != nil {
		utilnet.CloseIdleConnectionsFor(cs.hc.Transport)
		return nil, err
	}
	live := env.work.NewLiveness(livenessStallAfter, nil).WithProgress(answered.Load)
	return &memberUnit{opts: opts, cs: cs, gate: fm.Gate, m: m, live: live}, nil
}

// Check is the member's own liveness (fleet.Unit): its workers stalled, work due and nothing
// moving, neither an item finished nor a request answered, for livenessStallAfter.
func (u *memberUnit) Check() error { return u.live.Check() }

// answeredRequests counts the requests its API server answered (any status but 5xx), watches
// aside: a watch that is opened again says nothing of the workers.
type answeredRequests struct {
	rt http.RoundTripper
	n  *atomic.Uint64
}

// WrappedRoundTripper lets client-go reach the transport under it (utilnet.CloseIdleConnectionsFor).
func (a answeredRequests) WrappedRoundTripper() http.RoundTripper { return a.rt }

func (a answeredRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.rt.RoundTrip(req)
	if err == nil && resp.StatusCode < http.StatusInternalServerError && req.URL.Query().Get("watch") == "" {
		a.n.Add(1)
	}
	return resp, err
}

func (u *memberUnit) Controller() *gc.Controller { return u.m.ctrl }

func (u *memberUnit) Run(ctx context.Context) error {
	// The idle connections the transport still pools are closed once it stops, before the
	// fleet's dialer closes whatever is left.
	defer utilnet.CloseIdleConnectionsFor(u.cs.hc.Transport)
	return runParts(ctx, u.gate, u.m)
}

// Leave removes what cascade wrote in a member that left the fleet, as `cascade uninstall`
// does, while the member's collector and finalizers still run: the stamping pass stopped (it
// would put things back), the admission objects deleted (no create is stamped any more), the
// stamps lifted from every object not being deleted (never a foreign finalizer); then, until
// ctx ends, the collector finishes the deletions that GC finalizers hold (stamped ones
// included: their finalizers belong to their deletion now) and the dependents it is deleting;
// last, the orphan record, no longer needed, is deleted.
func (u *memberUnit) Leave(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if err := u.m.stamping.Stop(ctx); err != nil {
		return fmt.Errorf("the stamping pass did not stop: %w", err)
	}
	un := newUninstaller(ctx, u.cs, u.m.edge)
	var problems []error
	if _, err := un.deleteAdmission(ctx); err != nil {
		problems = append(problems, err)
	}
	counts, discoErr, err := un.unstampAll(ctx)
	if err != nil {
		return errors.Join(append(problems, err)...)
	}
	if discoErr != nil {
		problems = append(problems, fmt.Errorf("some API groups could not be discovered, their stamps were not lifted: %w", discoErr))
	}
	total := resourceCounts{removed: map[string]int{}}
	for _, c := range counts {
		total.add(c)
	}
	if total.failed > 0 {
		problems = append(problems, fmt.Errorf("%d stamped objects could not be unstamped", total.failed))
	}
	logger.Info("Member left the fleet: admission objects deleted, stamps lifted", "stamped", total.stamped, "unstamped", total.unstamped, "beingDeleted", total.deleting)
	if err := u.drain(ctx); err != nil {
		return errors.Join(append(problems, err)...)
	}
	if err := u.deleteOrphanRecord(ctx); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}

// drain waits, until ctx ends, for the member's collector to be synced with no owner being
// deleted with a GC finalizer and no dependent waiting to be deleted.
func (u *memberUnit) drain(ctx context.Context) error {
	for {
		st := u.m.ctrl.GraphStats()
		waiting, queued := st.WaitingOrphan+st.WaitingForeground, u.m.ctrl.DeleteQueueDepth()
		synced := u.m.ctrl.Synced()
		if synced && waiting == 0 && queued == 0 {
			return nil
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return fmt.Errorf("deletions still under way when the bound ran out (graph synced: %t, owners held by a GC finalizer: %d, dependents to delete: %d): %w", synced, waiting, queued, err)
		}
	}
}

// deleteOrphanRecord deletes the member's orphan record ConfigMap (--orphan-record-configmap),
// once no orphan deletion is left to need it.
func (u *memberUnit) deleteOrphanRecord(ctx context.Context) error {
	if u.opts.OrphanRecordConfigMap == "" {
		return nil
	}
	ns, name, _ := watch.ParseName(u.opts.OrphanRecordConfigMap) // validated with the flags
	configMaps := corev1.SchemeGroupVersion.WithResource("configmaps")
	cm, err := u.m.edge.Objects.Get(ctx, configMaps, ns, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the orphan record %s/%s: %w", ns, name, err)
	}
	t := client.Target{GVR: configMaps, Namespace: ns, Name: name, UID: cm.UID}
	if err := client.Delete(ctx, u.m.edge.Objects, t, "", ""); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the orphan record %s/%s: %w", ns, name, err)
	}
	return nil
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
