package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/finalizers"
	"github.com/cascade-gc/cascade/finalizers/orphanrecord"
	"github.com/cascade-gc/cascade/finalizers/stamp"
	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/policy"
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
	stop            func() // after every part has returned
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
	workqueue.SetProvider(ms.queues)     // before any queue is created
	cs, err := newClients(cfg)
	if err != nil {
		return nil, err
	}

	a := &app{gate: leader.Open()}
	live := liveness{workers: ms.work.NewLiveness(livenessStallAfter, nil)}
	if opts.LeaderElect {
		a.gate = &leader.Gate{} // the elector that opens it is built with the collector, below
		live.lease = leaderelection.NewLeaderHealthzAdaptor(leaseRenewalSlack)
	}
	edge := client.NewEdge(cs.metadata, cs.kube)
	companion := opts.Mode == client.ModeCompanion
	if companion {
		edge = edge.Companion(reg)
		logger.Info("Companion mode: kube-controller-manager's garbage collector collects; cascade applies defaultPropagation, diagnoses stuck deletions, explains and exports metrics, and never deletes an object nor removes an ownerReference or a GC finalizer")
	}
	if opts.DryRun {
		// Shadow mode's role lists and watches but gets nothing on "*" (get there includes
		// nodes/proxy, the kubelet's API): its reads of objects are lists by name.
		edge.Objects = client.NewListReads(cs.metadata)
		var dry *client.DryRun
		edge, dry = edge.DryRun(reg, opts.DryRunDivergenceAfter)
		a.always = append(a.always, part{"dry-run divergence", dry})
		logger.Info("Dry run: deciding everything, writing nothing", "divergenceAfter", opts.DryRunDivergenceAfter)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(edge.Events)
	a.stop = broadcaster.Shutdown
	events := client.NewHeldRecorder(broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: gc.EventComponent}), a.gate)
	a.always = append(a.always, part{"events", events})

	// The policy in force: one pointer until it changes (the stamping pass syncs the admission
	// objects when the pointer changes; policy.Builtin makes a new one on every call).
	builtin := policy.Builtin()
	inForce, authoritative := func() *policy.Compiled { return builtin }, func() bool { return true }
	if opts.PolicyConfigMap != "" {
		ns, name, _ := watch.ParseName(opts.PolicyConfigMap) // validated with the flags
		a.policy = watch.New(watch.Options{
			Client: cs.kube, Namespace: ns, Name: name, Events: events, Metrics: ms.policy,
			Served: watch.ServedBy(disco), Timeout: max(opts.StartupTimeout, time.Second),
			Companion: companion, Unwatched: opts.IgnoredPolicyResources(),
		})
		inForce, authoritative = a.policy.Policy, a.policy.Authoritative
	}

	// The orphan record: written before an orphan finalizer is removed, loaded once elected.
	// Parts that read each other are declared first: nothing runs before all are set.
	var (
		ctrl    *gc.Controller
		fin     *finalizers.Processor
		records *orphanrecord.Store
		loader  gc.OrphanRecords
		orphans finalizers.OrphanRecord
	)
	switch {
	case companion:
		logger.Info("Companion mode: no orphan record (--orphan-record-configmap): cascade removes no orphan finalizer")
	case opts.OrphanRecordConfigMap != "":
		ns, name, _ := watch.ParseName(opts.OrphanRecordConfigMap) // validated with the flags
		records = orphanrecord.New(orphanrecord.Options{
			ConfigMaps: edge.ConfigMaps(ns), Name: name, TTL: opts.OrphanRecordTTL, Metrics: ms.orphanRecord,
			Synced: func() bool { return ctrl.Synced() },
		})
		loader, orphans = records, records
	default:
		logger.Info("No orphan record (--orphan-record-configmap is empty): after a restart or failover, a dependent created just before its owner's orphan deletion may be collected")
	}

	// Data flows one way: the collector hands owners being deleted with a GC finalizer to the
	// processor, which reads the collector's graph.
	ctrl = gc.New(gc.Options{
		Policy:                 inForce,
		Leader:                 a.gate,
		Discovery:              disco,
		Metadata:               cs.metadata,
		Dynamic:                cs.dynamic,
		Client:                 edge.Objects,
		Mapper:                 restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
		Events:                 events,
		Metrics:                ms.gc,
		WorkMetrics:            ms.work,
		Ignored:                opts.IgnoredGroupResources(),
		DiscoveryPeriod:        opts.DiscoveryPeriod,
		SyncTimeout:            opts.SyncTimeout,
		OwnerReverifyPeriod:    opts.OwnerReverifyPeriod,
		Workers:                opts.Workers,
		AbsentCacheSize:        opts.AbsentOwnerCacheSize,
		ForegroundResyncPeriod: opts.FinalizerResyncPeriod,
		Finalizers:             gc.OwnerQueueFunc(func(uid types.UID) { fin.Enqueue(uid) }),
		OrphanRecords:          loader,
		OrphanRecordDegraded: func(ctx context.Context, err error) {
			ms.finalizers.RecordDegraded.WithLabelValues(finalizers.RecordDegradedLoad).Inc()
			ns, name, _ := watch.ParseName(opts.OrphanRecordConfigMap)
			events.Eventf(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, corev1.EventTypeWarning, finalizers.EventReasonRecordUnavailable,
				"Cannot load the orphan record for %s: collecting without it (a dependent that gained its reference just before its owner's orphan deletion by another process may be collected): %v", gc.RecordLoadBound, err)
		},
		Companion: companion,
		Features:  ms.features,
		AfterDiscovery: func(ctx context.Context) {
			detectAdmission(ctx, disco, ms.features)
		},
	})
	fin = finalizers.New(finalizers.Options{
		Client:       edge.Objects,
		View:         ctrl,
		Workers:      opts.Workers,
		OrphanRecord: orphans,
		RecordWindow: opts.OrphanRecordTTL,
		ResyncPeriod: opts.FinalizerResyncPeriod,
		PatchWorkers: opts.Workers,
		Metrics:      ms.finalizers,
		WorkMetrics:  ms.work,
		Events:       events,
		StuckAfter:   opts.StuckAfter,
		Companion:    companion,
	})
	if opts.LeaderElect {
		// The leader publishes its status on the Lease (cascade status reads it).
		var policySource func() (int, string)
		if a.policy != nil {
			policySource = a.policy.Source
		}
		a.always = append(a.always, part{"leader election", leader.New(leader.Options{
			Leases: cs.kube.CoordinationV1(), Namespace: opts.LeaderElectResourceNamespace, Name: opts.LeaderElectResourceName,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod, Gate: a.gate,
			WatchDog: live.lease,
			Status:   leaderStatus(opts.Mode, policySource, ctrl.Synced, ctrl.Unsynced, ms.features.Summary),
		})})
	}
	reviews, err := reviewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("build review client: %w", err)
	}
	servers, err := newServers(ctx, opts, reg, readyState{ctrl, ms.features}, live.check, ctrl.DebugGraph, ctrl.ExplainNamed, reviews)
	if err != nil {
		return nil, err
	}
	a.always = append(a.always, part{"collector", ctrl})
	for _, s := range servers {
		a.always = append(a.always, part{"server " + s.flag, s})
	}
	a.writers = append(a.writers, part{"finalizers", fin}, part{"default propagation", stamp.New(stamp.Options{
		Client:        edge.Objects,
		Admission:     edge.Admission,
		View:          ctrl,
		Policy:        inForce,
		Authoritative: authoritative,
		AdmissionLevel: func() string {
			return ms.features.Level(features.AdmissionPolicy)
		},
		Rate:        opts.DefaultPropagationRate,
		Period:      opts.DefaultPropagationPeriod,
		Metrics:     ms.defaults,
		WorkMetrics: ms.work,
		Events:      events,
	})})
	if records != nil {
		a.writers = append(a.writers, part{"orphan record pruning", records})
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
	defer a.stop()
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
