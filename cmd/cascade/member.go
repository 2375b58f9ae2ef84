package main

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/finalizers"
	"github.com/cascade-gc/cascade/finalizers/orphanrecord"
	"github.com/cascade-gc/cascade/finalizers/stamp"
	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy"
	"github.com/cascade-gc/cascade/policy/watch"
)

// memberEnv is what one collected cluster is built from: the single cluster cascade serves, or
// one member of a fleet (fleet.go). Both are built by buildMember: a fleet member is today's
// single-cluster collector on its own clients.
type memberEnv struct {
	// name is the fleet member's name; "" for the single cluster.
	name string
	cs   *clients
	// ms is the process's metrics, shared by every member (counters add up across members).
	ms metricSet
	// reg is the registry parts that register their own metrics use (companion mode, dry run):
	// the single cluster only, which is the one member that can run in those modes.
	reg prometheus.Registerer
	// gate opens when this process leads (a sharded fleet's member: when its shard is held):
	// the member's writers wait for it.
	gate *leader.Gate
	// mappers, in a fleet, holds the REST mappers the members share (one per discovery
	// document); nil: the member's own mapper (the single cluster).
	mappers *gc.SharedMappers
	// slots is this member's share of the fleet's workers (nil: the single cluster, whose
	// --workers are its own).
	slots *work.Share
	// features is this cluster's feature levels (each member has its own).
	features *features.Set
	// policyConfigMap is the policy's ConfigMap in this cluster, NAMESPACE/NAME ("": none).
	policyConfigMap string
	// fallback and fallbackAuthoritative, when set, are the policy in force while
	// policyConfigMap does not exist in this cluster (a fleet member without a policy of its
	// own takes the host's).
	fallback              func() *policy.Compiled
	fallbackAuthoritative func() bool
	// work, when set, is the work metrics of this cluster's queues (a fleet member's scoped
	// ones, for a liveness check of its own); nil: the process's.
	work *work.Metrics
	// errorText, when set, is how the member's API errors are shown to those who explain its
	// objects (a fleet member's: internal/fleet's SafeText).
	errorText func(string) string
}

// member is one collected cluster's parts, ready to run (runParts).
type member struct {
	ctrl *gc.Controller
	// policy is read first: nothing decides before the policy ConfigMap was (nil: none).
	policy *watch.Watcher
	// always run from the start, standbys too (watches, held Events); writers once the gate
	// opens, the stamping pass among them.
	always, writers []part
	// stamping is the default-propagation pass, which a fleet member that leaves the fleet
	// stops first (memberUnit.Leave): it would put back what leaving removes.
	stamping *stoppable
	// edge is the cluster's API edge, every write of its parts goes through it.
	edge client.Edge
}

// buildMember builds the parts that collect in one cluster: its API edge (where --dry-run is
// decided), Event recorder, policy, orphan record, collector, finalizers and stamping pass.
// Nothing runs until the parts do.
func buildMember(ctx context.Context, opts *Options, env memberEnv) (*member, error) {
	logger := klog.FromContext(ctx)
	cs, ms := env.cs, env.ms
	m := &member{}
	edge := client.NewEdge(cs.metadata, cs.kube)
	if cs.deletes != nil {
		edge.Objects = client.NewDirect(cs.metadata, cs.deletes)
	}
	companion := opts.Mode == client.ModeCompanion
	if companion {
		edge = edge.Companion(env.reg)
		logger.Info("Companion mode: kube-controller-manager's garbage collector collects; cascade applies defaultPropagation, diagnoses stuck deletions, explains and exports metrics, and never deletes an object nor removes an ownerReference or a GC finalizer")
	}
	if opts.DryRun {
		// Shadow mode's role lists and watches but gets nothing on "*" (get there includes
		// nodes/proxy, the kubelet's API): its reads of objects are lists by name.
		edge.Objects = client.NewListReads(cs.metadata)
		var dry *client.DryRun
		edge, dry = edge.DryRun(env.reg, opts.DryRunDivergenceAfter)
		m.always = append(m.always, part{"dry-run divergence", dry})
		logger.Info("Dry run: deciding everything, writing nothing", "divergenceAfter", opts.DryRunDivergenceAfter)
	}
	// Events about this cluster's objects go to this cluster's API server.
	recorder := client.NewRecorder(ctx, scheme.Scheme, corev1.EventSource{Component: gc.EventComponent}, edge.Events)
	m.always = append(m.always, part{"event writer", recorder})
	events := client.NewHeldRecorder(recorder, env.gate)
	m.always = append(m.always, part{"events", events})

	// The policy in force: one pointer until it changes (the stamping pass syncs the admission
	// objects when the pointer changes; policy.Builtin makes a new one on every call).
	builtin := policy.Builtin()
	inForce, authoritative := func() *policy.Compiled { return builtin }, func() bool { return true }
	if env.fallback != nil {
		inForce, authoritative = env.fallback, env.fallbackAuthoritative
	}
	if env.policyConfigMap != "" {
		ns, name, _ := watch.ParseName(env.policyConfigMap) // validated with the flags
		policyMetrics := ms.policy
		if env.name != "" {
			policyMetrics = nil // per member: its gauges would overwrite each other's
		}
		m.policy = watch.New(watch.Options{
			Client: cs.kube, Namespace: ns, Name: name, Events: events, Metrics: policyMetrics,
			Served: watch.ServedBy(cs.disco), Timeout: max(opts.StartupTimeout, time.Second),
			Companion: companion, Unwatched: opts.IgnoredPolicyResources(),
		})
		if env.fallback == nil {
			inForce, authoritative = m.policy.Policy, m.policy.Authoritative
		} else {
			w, fallback, fallbackAuth := m.policy, env.fallback, env.fallbackAuthoritative
			inForce = func() *policy.Compiled {
				if w.Present() {
					return w.Policy()
				}
				return fallback()
			}
			authoritative = func() bool {
				if w.Present() {
					return w.Authoritative()
				}
				return fallbackAuth()
			}
		}
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
	case opts.DryRun:
		// Shadow mode removes no orphan finalizer either, and its role reads no ConfigMap but
		// the policy's (deploy/overlays/shadow).
		logger.Info("Dry run: no orphan record (--orphan-record-configmap): cascade removes no orphan finalizer")
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
		Member:                 env.name,
		Policy:                 inForce,
		Leader:                 env.gate,
		Discovery:              cs.disco,
		Metadata:               cs.metadata,
		Streams:                cs.streams,
		Dynamic:                cs.dynamic,
		Client:                 edge.Objects,
		Mapper:                 env.mapper(),
		Events:                 events,
		Metrics:                ms.gc,
		WorkMetrics:            env.workMetrics(),
		Ignored:                opts.IgnoredGroupResources(),
		DiscoveryPeriod:        env.discoveryPeriod(opts),
		SyncTimeout:            opts.SyncTimeout,
		OwnerReverifyPeriod:    opts.OwnerReverifyPeriod,
		Workers:                env.workers(opts),
		Slots:                  env.slots,
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
		Features:  env.features,
		AfterDiscovery: func(ctx context.Context) {
			detectAdmission(ctx, cs.disco, env.features)
		},
		ErrorText: env.errorText,
	})
	m.ctrl = ctrl
	fin = finalizers.New(finalizers.Options{
		Client:       edge.Objects,
		View:         ctrl,
		Workers:      env.workers(opts),
		Slots:        env.slots,
		OrphanRecord: orphans,
		RecordWindow: opts.OrphanRecordTTL,
		ResyncPeriod: opts.FinalizerResyncPeriod,
		PatchWorkers: env.workers(opts),
		Metrics:      ms.finalizers,
		WorkMetrics:  env.workMetrics(),
		Events:       events,
		StuckAfter:   opts.StuckAfter,
		Companion:    companion,
		CatchUpWait:  max(opts.SyncTimeout, finalizers.DefaultCatchUpWait),
	})
	m.always = append(m.always, part{"collector", ctrl})
	m.edge = edge
	m.stamping = newStoppable(stamp.New(stamp.Options{
		Client:        edge.Objects,
		Admission:     edge.Admission,
		View:          ctrl,
		Policy:        inForce,
		Authoritative: authoritative,
		AdmissionLevel: func() string {
			return env.features.Level(features.AdmissionPolicy)
		},
		Rate:        opts.DefaultPropagationRate,
		Period:      opts.DefaultPropagationPeriod,
		Metrics:     ms.defaults,
		WorkMetrics: env.workMetrics(),
		Events:      events,
	}))
	m.writers = append(m.writers, part{"finalizers", fin}, part{"default propagation", m.stamping})
	if records != nil {
		m.writers = append(m.writers, part{"orphan record pruning", records})
	}
	return m, nil
}

// workMetrics is the work metrics of the cluster's queues: its own scoped ones, or the
// process's.
func (env memberEnv) workMetrics() *work.Metrics {
	if env.work != nil {
		return env.work
	}
	return env.ms.work
}

// workers is the workers of each queue: --workers for the single cluster, --fleet-member-workers
// for a fleet member (whose items also take a slot of the fleet's pool of --workers).
func (env memberEnv) workers(opts *Options) int {
	if env.name != "" {
		return opts.FleetMemberWorkers
	}
	return opts.Workers
}

// discoveryPeriod is the period of discovery's safety net: --discovery-period for the single
// cluster, --fleet-member-discovery-period for a fleet member (whose watches of CRDs and
// APIServices ask for the rounds that matter: polling a thousand members is what the fleet
// must not do).
func (env memberEnv) discoveryPeriod(opts *Options) time.Duration {
	if env.name != "" {
		return opts.FleetMemberDiscoveryPeriod
	}
	return opts.DiscoveryPeriod
}

// mapper is the member's REST mapper: the fleet's shared one for its discovery document, or
// its own.
func (env memberEnv) mapper() meta.ResettableRESTMapper {
	if env.mappers != nil {
		return env.mappers.Mapper(env.cs.disco)
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.cs.disco))
}

// stoppable runs a part until its context ends or Stop is called, whichever comes first.
type stoppable struct {
	c    component
	stop chan struct{}
	once sync.Once
	done chan struct{} // closed when Run has returned
}

func newStoppable(c component) *stoppable {
	return &stoppable{c: c, stop: make(chan struct{}), done: make(chan struct{})}
}

func (s *stoppable) Run(ctx context.Context) error {
	defer close(s.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	select {
	case <-s.stop:
		return nil // stopped before it started
	default:
	}
	return s.c.Run(ctx)
}

// Stop stops the part and waits, at most until ctx ends, for it to return (a part whose writers
// never started, its gate closed, is waited for until ctx ends: Stop is for a running one).
func (s *stoppable) Stop(ctx context.Context) error {
	s.once.Do(func() { close(s.stop) })
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
