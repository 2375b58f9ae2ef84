package gc

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy"
)

// Options are what the controller needs from the outside world.
type Options struct {
	Discovery Discoverer
	// Metadata is the client the monitors list (and, without Streams, watch) with.
	Metadata metadata.Interface
	// Streams, when set, opens the monitors' watches on the cluster's HTTP client, decoded by
	// the monitor's own goroutine (watchloop.go); nil: through Metadata.
	Streams *Streams
	// Dynamic, with Metadata, watches CustomResourceDefinitions and APIServices: a change asks
	// for a discovery round at once, and a kind whose CRD was seen deleted can own nothing
	// (apiwatch.go). Nil: discovery is periodic only, and such kinds are kept and retried.
	Dynamic dynamic.Interface
	// Client performs GET, DELETE and PATCH (defaults to client.New(Metadata)).
	Client client.Interface
	// Mapper resolves owner references (apiVersion, kind) to resources; reset when discovery
	// sees a change.
	Mapper meta.ResettableRESTMapper
	// Events emits OwnerRefInvalidNamespace (and policy) Events; nil: none.
	Events record.EventRecorder
	// Metrics are updated; nil: a set registered nowhere.
	Metrics *Metrics
	// WorkMetrics count the workers' failed attempts; nil: a set registered nowhere.
	WorkMetrics *work.Metrics
	// Ignored resources are never watched nor collected.
	Ignored map[schema.GroupResource]struct{}
	// DiscoveryPeriod is how often discovery re-runs.
	DiscoveryPeriod time.Duration
	// OwnerReverifyPeriod is how often owners cascade never observed, found present by a live
	// GET, are checked again (backing off to 16 periods) while dependents reference them. Zero
	// means DefaultOwnerReverifyPeriod.
	OwnerReverifyPeriod time.Duration
	// SyncTimeout bounds the wait for the initial lists: after it, the graph counts as synced
	// with the resources that did sync, and the others are named (/readyz, metrics, logs).
	// Decisions that need an unsynced kind still wait for it. Zero means DefaultSyncTimeout.
	SyncTimeout time.Duration
	// Workers is the number of goroutines for each queue.
	Workers int
	// Slots, when set, is this controller's share of a pool of workers shared with other
	// controllers (a fleet's members, work.Pool): each item of its queues takes a slot while it
	// is processed. Nil: its Workers alone bound it.
	Slots *work.Share
	// ForegroundResyncPeriod is how often the dependents of every owner being deleted in the
	// foreground are handed to the workers again, whatever events arrived: a lost effect never
	// leaves a foreground owner waiting. Zero means DefaultForegroundResyncPeriod.
	ForegroundResyncPeriod time.Duration
	// AbsentCacheSize bounds the cache of owners verified absent.
	AbsentCacheSize int
	// Leader holds the workers back until it opens (leader election): a standby keeps its
	// watches and graph warm but acts on nothing. Nil means act at once. (Its Events wait
	// too: cascade's Events is an internal/client.HeldRecorder on the same gate.)
	Leader *leader.Gate
	// Finalizers, when set, receives owners being deleted with a GC finalizer (orphan and
	// foreground processing). Without it such owners are left to whoever handles them. Data
	// flows one way: the controller hands owners over and never asks anything back.
	Finalizers OwnerQueue
	// Policy, when set, returns the policy in force (watch.Watcher.Policy): its
	// ignoredResources add to Ignored every discovery round, and its collect rules feed the
	// decision on every dependent. Nil, or a nil policy, is the built-in behaviour.
	Policy func() *policy.Compiled
	// OrphanRecords, when set, is loaded once elected: owners another process recorded as
	// deleted with the orphan policy (orphanrecord.Store) are handed to the graph
	// (graph.EventOrphanRecorded), so references to them are removed, never a reason to delete.
	// Until it loads, the one decision it can change waits (a dependent collected because its
	// owners are absent); the workers run. A load failing for RecordLoadBound degrades: that
	// decision is taken without the record, OrphanRecordDegraded is told, and the load is
	// retried with backoff (orphanrecords.go).
	OrphanRecords OrphanRecords
	// OrphanRecordDegraded, when set, is called once when a failing load of OrphanRecords stops
	// holding back collection, with the load's last error (cascade: the Warning Event
	// OrphanRecordUnavailable and cascade_orphan_record_degraded_total{reason="load"}).
	OrphanRecordDegraded func(ctx context.Context, err error)
	// Member is the fleet member this controller collects in ("" for the single cluster).
	// A member's graph is reported by the fleet's own collector (cascade_member_*, with a
	// cluster label), not by the process-wide graph series, which are the single cluster's.
	Member string
	// Companion is --mode=companion: kube-controller-manager's collector collects, so nothing
	// is decided to be carried out. The graph, discovery and owner verification (reads) run
	// as usual, for Explain, the metrics and the finalizers' diagnosis; the delete workers and
	// the foreground resync do not run, no dependent is queued for them, the in-tree
	// collector's OwnerRefInvalidNamespace Events are left to it, and decisions apply no
	// collect rule (the in-tree collector knows none): Explain says what it would do.
	Companion bool
	// Clock is the clock of time-based policy rules and of the delete queue's delays
	// (clock.RealClock when nil); tests inject a fake one.
	Clock clock.WithTickerAndDelayedExecution
	// Features, when set, is told how resources are listed (the feature "list": watch_list,
	// paged, both when they differ) after every list.
	Features *features.Set
	// AfterDiscovery, when set, is called after every discovery round, failed ones too: cascade
	// detects the server's other feature levels there (the admission policy's).
	AfterDiscovery func(ctx context.Context)
	// ErrorText, when set, is how an error from the API server is shown in an explanation
	// (a fleet member's: bounded, escaped, server URLs without credentials); as it is when nil.
	ErrorText func(string) string
}

const (
	// DefaultForegroundResyncPeriod is the default of Options.ForegroundResyncPeriod.
	DefaultForegroundResyncPeriod = 30 * time.Second
	// DefaultSyncTimeout is the default of Options.SyncTimeout (in-tree waits as long, PR #125796).
	DefaultSyncTimeout = 30 * time.Second
)

// OwnerQueue takes owners that carry the orphan or foregroundDeletion finalizer
// (finalizers.Processor).
type OwnerQueue interface {
	// Enqueue asks for the owner to be (re)examined. It must not block.
	Enqueue(uid types.UID)
}

// OwnerQueueFunc is an OwnerQueue of one function (cascade's wiring builds the collector before
// the processor that reads its graph, and hands owners over through one of these).
type OwnerQueueFunc func(uid types.UID)

// Enqueue calls f.
func (f OwnerQueueFunc) Enqueue(uid types.UID) { f(uid) }

// OrphanRecords loads the owners recorded as deleted with the orphan policy
// (orphanrecord.Store).
type OrphanRecords interface {
	Load(ctx context.Context) ([]graph.Ref, error)
}

// Controller keeps the dependency graph current from metadata-only watches of every deletable
// resource and collects dependents whose owners are gone.
//
// Concurrency: the graph is written only under mu's write lock, through apply (apply.go) by
// the monitors' loops (graphStore), the owner-verification workers' answers, the orphan
// record's load (orphanrecords.go) and the discovery loop's unwatched resources (ghosts.go),
// and by the discovery loop's once-a-round Compact (sync.go). Everything else (the delete
// workers, View, Explain, metrics) reads it under the read lock. The discovery loop alone
// starts and stops monitors.
//
// The methods live in files named by concern: sync.go (discovery rounds and the initial
// sync), apply.go (feeding the graph and dispatching its effects), decide.go (the decision on
// a dependent, for the workers and Explain alike), workers.go (carrying decisions out,
// verifying owners), foreground.go, orphanrecords.go, invalidns.go (the
// OwnerRefInvalidNamespace Events), view.go (read access).
type Controller struct {
	opts Options

	mu sync.RWMutex
	g  *graph.Graph // guarded by mu

	resMu     sync.RWMutex
	resources ResourceSet // guarded by resMu; written by the discovery loop only

	monitors *monitors
	api      *apiWatch // nil without Options.Dynamic (apiwatch.go)
	// failedGroups are the groups the last discovery round could not discover ("" when the
	// round failed as a whole): no kind of theirs is taken for gone (gonekinds.go).
	failedGroups atomic.Pointer[map[string]struct{}]
	mappings     *mappingCache // the mapper's answers until its next reset (mappings.go)
	absent       *AbsentCache
	nsLabels     *client.NamespaceLabels // for the policy's namespace selectors
	latency      *latencyTracker         // nil without metrics

	// deleteQueue holds dependents to decide on; verifyQueue claimed owner identities that
	// need a live check.
	deleteQueue *work.Queue[types.UID]
	verifyQueue *work.Queue[graph.Ref]

	discovered atomic.Bool // first discovery round done
	synced     atomic.Bool // the graph counts as synced (Synced): initial lists in, or SyncTimeout passed

	// leading is set once this replica's workers run: the gate opened (cascade_leader).
	leading atomic.Bool

	// record holds back the decisions the orphan record can change until it loaded
	// (orphanrecords.go); heldMu guards its held set.
	record recordGate
	heldMu sync.Mutex
}

// New builds a controller; nothing runs until Run.
func New(opts Options) *Controller {
	if opts.Ignored == nil {
		opts.Ignored = DefaultIgnoredResources()
	}
	if opts.Client == nil && opts.Metadata != nil {
		opts.Client = client.New(opts.Metadata)
	}
	if opts.ForegroundResyncPeriod <= 0 {
		opts.ForegroundResyncPeriod = DefaultForegroundResyncPeriod
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.OwnerReverifyPeriod <= 0 {
		opts.OwnerReverifyPeriod = DefaultOwnerReverifyPeriod
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Leader == nil {
		opts.Leader = leader.Open()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	c := &Controller{
		opts:        opts,
		g:           graph.New(),
		resources:   ResourceSet{},
		mappings:    newMappingCache(),
		absent:      NewAbsentCache(opts.AbsentCacheSize),
		nsLabels:    client.NewNamespaceLabels(opts.Clock),
		deleteQueue: work.NewQueue("attempt_to_delete", work.Options[types.UID]{Metrics: opts.WorkMetrics, Clock: opts.Clock, Share: opts.Slots}),
		verifyQueue: work.NewQueue("verify_owner", work.Options[graph.Ref]{Metrics: opts.WorkMetrics, Share: opts.Slots}),
		record:      recordGate{open: make(chan struct{}), held: map[types.UID]struct{}{}},
	}
	if opts.OrphanRecords == nil {
		close(c.record.open) // no record: nothing to wait for
		c.record.held = nil
	}
	c.monitors = newMonitors(opts.Metadata, c)
	if opts.Metrics != nil {
		c.monitors.tooLarge = opts.Metrics.WatchEventsTooLarge
	}
	if opts.Streams != nil {
		c.monitors.open = opts.Streams.open
	}
	if opts.Features != nil {
		c.monitors.lists = func(ctx context.Context, watchList, paged int) {
			var levels []string
			if watchList > 0 {
				levels = append(levels, features.LevelWatchList)
			}
			if paged > 0 {
				levels = append(levels, features.LevelPaged)
			}
			opts.Features.Use(ctx, features.List, levels...)
		}
	}
	if opts.Dynamic != nil && opts.Metadata != nil {
		c.api = newAPIWatch(opts.Dynamic, opts.Metadata)
		c.monitors.kick = c.api.kick
	}
	if opts.Member == "" {
		c.opts.Metrics.registerGraph(c)
	}
	c.latency = newLatencyTracker(c.opts.Metrics.CollectionDuration, time.Now)
	return c
}

// Run discovers resources now and every DiscoveryPeriod, runs the workers once elected, and
// returns when ctx ends and everything has stopped. As in sample-controller, it returns an
// error only when it cannot start: what fails later is retried and reported, never fatal.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	switch {
	case c.opts.Discovery == nil:
		return errors.New("gc: no discovery client")
	case c.opts.DiscoveryPeriod <= 0:
		return fmt.Errorf("gc: discovery period %v must be positive", c.opts.DiscoveryPeriod)
	case c.opts.Workers < 1:
		return fmt.Errorf("gc: %d workers; at least one is needed", c.opts.Workers)
	case c.opts.Client == nil:
		return errors.New("gc: no API client")
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting collector", "discoveryPeriod", c.opts.DiscoveryPeriod, "workers", c.opts.Workers)
	var wg sync.WaitGroup
	wg.Go(func() {
		if !c.opts.Leader.IsOpen() {
			if !c.opts.Leader.Wait(ctx) {
				return
			}
			logger.Info("Elected leader: starting workers")
		}
		// The record loads beside the workers: only the decisions it can change wait for it.
		wg.Go(func() { c.loadOrphanRecords(ctx) })
		c.lead()
		wg.Go(func() { c.verifyQueue.Run(ctx, c.opts.Workers, c.verifyOwner) })
		wg.Go(func() { c.runReverify(ctx) })
		if c.opts.Companion {
			logger.Info("Companion mode: kube-controller-manager's garbage collector collects; cascade verifies owners, explains and diagnoses, and deletes nothing")
			return
		}
		wg.Go(func() { c.deleteQueue.Run(ctx, c.opts.Workers, c.attemptToDelete) })
		wg.Go(func() { c.runForegroundResync(ctx) })
	})
	wg.Go(func() { c.watchInitialSync(ctx) })

	// A change to a CRD or an APIService asks for a round at once (apiwatch.go); the period
	// stays as the safety net.
	var rediscover <-chan struct{}
	if c.api != nil {
		rediscover = c.api.rediscover
		wg.Go(func() { c.api.run(ctx) })
	}
	t := time.NewTicker(c.opts.DiscoveryPeriod)
	defer t.Stop()
	for {
		c.syncResources(ctx)
		var again <-chan time.Time
		if c.api != nil && c.api.unmet(c.Resources()) {
			again = time.After(expectRetry) // a CRD established but not discovered yet
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-again:
		case <-rediscover:
			select { // coalesce the burst one change makes
			case <-ctx.Done():
			case <-time.After(RediscoverDelay):
			}
			select {
			case <-rediscover:
			default:
			}
		}
		if ctx.Err() != nil {
			logger.Info("Stopping collector")
			c.deleteQueue.ShutDown()
			c.verifyQueue.ShutDown()
			c.monitors.stopAll()
			wg.Wait()
			logger.Info("Collector stopped")
			return nil
		}
	}
}
