package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy/watch"
)

// component is every part cascade runs: built with New(options), run with Run(ctx), which
// returns nil when ctx ends and an error only when the part cannot go on (then everything
// stops and cascade exits with it).
type component interface {
	Run(ctx context.Context) error
}

type part struct {
	name string
	c    component
}

// app is the collector process: every part built once from the flags, and the one leader gate
// that decides when the writers start.
type app struct {
	gate *leader.Gate
	// policy is read first: nothing decides before the policy ConfigMap was (nil: built in).
	policy *watch.Watcher
	// always run from the start, standbys too (watches, servers, the Lease, held Events);
	// writers run once the gate opens.
	always, writers []part
}

// newApp builds every part: clients, metrics, the API edge (where --dry-run is decided), the
// Event recorder, the policy, the collector and the writers. Nothing runs until run.
func newApp(ctx context.Context, opts *Options) (*app, error) {
	logger := klog.FromContext(ctx)
	cfg, err := restConfig(opts)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build discovery client: %w", err)
	}
	if err := waitForServer(ctx, disco, cfg.Host, opts.StartupTimeout); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ms := newMetricSet(reg)
	ms.rest.Hook()                       // client-go's request metrics (rest_client_*), every client
	cfg.Wrap(countRequests(ms.requests)) // every request but discovery's is counted
	work.SetQueueMetrics(ms.queues)      // before any queue is created
	cs, err := newClients(cfg)
	if err != nil {
		return nil, err
	}

	a := &app{gate: leader.Open()}
	live := liveness{workers: ms.work.NewLiveness(livenessStallAfter, nil)}
	// elect adds the elector that opens the gate, with the status the leader publishes on its
	// Lease (cascade status reads it; nil: none).
	var elect func(status func() map[string]string)
	sharded := opts.Fleet() && opts.FleetShards > 1
	if sharded && opts.LeaderElect {
		logger.Info("Sharded fleet: every replica collects in the members of the shards it holds (their Leases); the leader-election Lease is not taken", "shards", opts.FleetShards)
	}
	if opts.LeaderElect && !sharded {
		a.gate = &leader.Gate{}
		live.lease = leaderelection.NewLeaderHealthzAdaptor(leaseRenewalSlack)
		elect = func(status func() map[string]string) {
			a.always = append(a.always, part{"leader election", leader.New(leader.Options{
				Leases: cs.kube.CoordinationV1(), Namespace: opts.LeaderElectResourceNamespace, Name: opts.LeaderElectResourceName,
				LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod, Gate: a.gate,
				WatchDog: live.lease, Status: status,
			})})
		}
	}
	if opts.Fleet() {
		if elect != nil {
			elect(nil) // a fleet's leader publishes no status on its Lease (yet: docs/fleet.md)
		}
		if err := a.addFleet(ctx, opts, cfg, cs, ms, reg, live); err != nil {
			return nil, err
		}
		logger.Info("cascade started in fleet mode", "host", cfg.Host, "memberWorkers", opts.FleetMemberWorkers, "memberQPS", opts.FleetMemberQPS, "leaderElect", opts.LeaderElect)
		return a, nil
	}
	m, err := buildMember(ctx, opts, memberEnv{cs: cs, ms: ms, reg: reg, gate: a.gate, features: ms.features, policyConfigMap: opts.PolicyConfigMap})
	if err != nil {
		return nil, err
	}
	a.policy = m.policy
	if elect != nil {
		var policySource func() (int, string)
		if m.policy != nil {
			policySource = m.policy.Source
		}
		elect(leaderStatus(opts.Mode, policySource, m.ctrl.Synced, m.ctrl.Unsynced, ms.features.Summary))
	}
	a.always = append(a.always, m.always...)
	a.writers = append(a.writers, m.writers...)
	reviews, err := reviewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("build review client: %w", err)
	}
	servers, err := newServers(ctx, opts, reg, readyState{m.ctrl, ms.features}, live.check, graphs{single: m.ctrl}, reviews)
	if err != nil {
		return nil, err
	}
	for _, s := range servers {
		a.always = append(a.always, part{"server " + s.flag, s})
	}
	logger.Info("cascade started", "server", cfg.Host, "workers", opts.Workers, "qps", opts.QPS, "burst", opts.Burst, "leaderElect", opts.LeaderElect, "mode", opts.Mode, "dryRun", opts.DryRun)
	return a, nil
}

// readyState is what /readyz reports: the collector's sync and the feature levels in use.
type readyState struct {
	*gc.Controller
	features *features.Set
}

func (r readyState) Features() string { return r.features.Summary() }

// detectAdmission asks discovery which version of the MutatingAdmissionPolicy the server
// serves and records the level (features.Set logs a change); a failure keeps the level in use.
func detectAdmission(ctx context.Context, disco features.GroupVersionResources, set *features.Set) {
	a, err := features.DetectAdmission(ctx, disco)
	if ctx.Err() != nil {
		return // shutting down
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot tell which MutatingAdmissionPolicy version the API server serves; keeping the level in use until the next discovery round", "level", set.Level(features.AdmissionPolicy))
		return
	}
	set.Use(ctx, features.AdmissionPolicy, a.Level())
}

// run reads the policy, then runs every part until ctx ends or one fails (losing the Lease
// included): the writers once this replica leads. It returns the first failure.
func (a *app) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	start := func(p part, gated bool) {
		wg.Go(func() {
			if gated && !a.gate.Wait(ctx) {
				return
			}
			if err := p.c.Run(ctx); err != nil {
				cancel(fmt.Errorf("%s: %w", p.name, err))
			}
		})
	}
	if a.policy != nil {
		start(part{"--policy-configmap", a.policy}, false)
		select {
		case <-a.policy.Loaded():
		case <-ctx.Done():
			wg.Wait()
			return failure(ctx)
		}
	}
	for _, p := range a.always {
		start(p, false)
	}
	for _, p := range a.writers {
		start(p, true)
	}
	<-ctx.Done()
	klog.FromContext(ctx).Info("Shutting down")
	wg.Wait()
	return failure(ctx)
}

// failure is why ctx ended: nil for a signal (or the caller's cancel), else the part's error.
func failure(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
