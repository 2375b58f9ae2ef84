package gc

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy"
)

// Deps are what the controller needs from the outside world.
type Deps struct {
	Discovery Discoverer
	// Metadata is the client the reflectors list and watch with.
	Metadata metadata.Interface
	// Dynamic, with Metadata, watches CustomResourceDefinitions and APIServices: a change asks
	// for a discovery round at once, and a kind whose CRD was seen deleted can own nothing
	// (apiwatch.go). Nil: discovery is periodic only, and such kinds are kept and retried.
	Dynamic dynamic.Interface
	// Client performs GET, DELETE and PATCH (defaults to client.New(Metadata)).
	Client client.Interface
	// Mapper resolves owner references (apiVersion, kind) to resources; reset when discovery
	// sees a change.
	Mapper meta.ResettableRESTMapper
	// Recorder emits OwnerRefInvalidNamespace events.
	Recorder record.EventRecorder
	Metrics  *Metrics
	// WorkMetrics, when set, count the workers' failed attempts.
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
	// ForegroundResyncPeriod is how often the dependents of every owner being deleted in the
	// foreground are handed to the workers again, whatever events arrived: a lost effect never
	// leaves a foreground owner waiting. Zero means DefaultForegroundResyncPeriod.
	ForegroundResyncPeriod time.Duration
	// AbsentCacheSize bounds the cache of owners verified absent.
	AbsentCacheSize int
	// Elected, when set, holds the workers back until it is closed (leader election): a
	// standby keeps its watches and graph warm but acts on nothing. Nil means act at once.
	Elected <-chan struct{}
	// Finalizers, when set, receives owners being deleted with a GC finalizer (orphan and
	// foreground processing). Without it such owners are left to whoever handles them. Data
	// flows one way: the controller hands owners over and never asks anything back.
	Finalizers OwnerQueue
	// Policy, when set, returns the policy in force (watch.Watcher.Policy): its
	// ignoredResources add to Ignored every discovery round, and its collect rules feed the
	// decision on every dependent. Nil, or a nil policy, is the built-in behaviour.
	Policy func() *policy.Compiled
	// OrphanRecords, when set, is loaded once elected, before any worker starts: owners another
	// process recorded as deleted with the orphan policy (orphanrecord.Store) are handed to the
	// graph (graph.EventOrphanRecorded), so references to them are removed, never a reason to
	// delete. Until it loads, nothing is collected (retried with backoff).
	OrphanRecords OrphanRecords
	// Clock is the clock of time-based policy rules and of the delete queue's delays
	// (clock.RealClock when nil); tests inject a fake one.
	Clock clock.WithTicker
}

const (
	// DefaultForegroundResyncPeriod is the default of Deps.ForegroundResyncPeriod.
	DefaultForegroundResyncPeriod = 30 * time.Second
	// DefaultSyncTimeout is the default of Deps.SyncTimeout (in-tree waits as long, PR #125796).
	DefaultSyncTimeout = 30 * time.Second
)

// OwnerQueue takes owners that carry the orphan or foregroundDeletion finalizer
// (finalizers.Processor).
type OwnerQueue interface {
	// Enqueue asks for the owner to be (re)examined. It must not block.
	Enqueue(uid types.UID)
}

// OrphanRecords loads the owners recorded as deleted with the orphan policy
// (orphanrecord.Store).
type OrphanRecords interface {
	Load(ctx context.Context) ([]graph.Ref, error)
}

// Controller keeps the dependency graph current from metadata-only watches of every deletable
// resource and collects dependents whose owners are gone.
//
// Concurrency: the monitors' reflectors are the writers of the graph (through graphStore),
// serialized by mu (Apply is the only mutator). Workers read the graph under mu's read lock and never mutate it except by
// applying verification answers through apply. The discovery loop alone starts and stops
// monitors.
type Controller struct {
	deps Deps

	mu sync.RWMutex
	g  *graph.Graph // guarded by mu

	resMu     sync.RWMutex
	resources ResourceSet // guarded by resMu; written by the discovery loop only

	monitors *monitors
	api      *apiWatch // nil without Deps.Dynamic (apiwatch.go)
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
	synced     atomic.Bool // every monitor of the first round delivered its initial list

	// leading is set once this replica may write (elected, or no election). Until then the
	// Events the graph's effects ask for wait in pendingEvents (at most maxPendingEvents), so a
	// standby sends nothing, and the new leader reports what its warm graph found.
	leading       atomic.Bool
	eventsMu      sync.Mutex
	pendingEvents []graph.InvalidRef // guarded by eventsMu
}

// maxPendingEvents bounds the Events a standby keeps for when it leads; older ones are dropped
// (their count stays in cascade_invalid_namespace_refs_total).
const maxPendingEvents = 1000

// New builds a controller; nothing runs until Run.
func New(deps Deps) *Controller {
	if deps.Ignored == nil {
		deps.Ignored = DefaultIgnoredResources()
	}
	if deps.Client == nil && deps.Metadata != nil {
		deps.Client = client.New(deps.Metadata)
	}
	if deps.ForegroundResyncPeriod <= 0 {
		deps.ForegroundResyncPeriod = DefaultForegroundResyncPeriod
	}
	if deps.SyncTimeout <= 0 {
		deps.SyncTimeout = DefaultSyncTimeout
	}
	if deps.OwnerReverifyPeriod <= 0 {
		deps.OwnerReverifyPeriod = DefaultOwnerReverifyPeriod
	}
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	c := &Controller{
		deps:        deps,
		g:           graph.New(),
		resources:   ResourceSet{},
		mappings:    newMappingCache(),
		absent:      NewAbsentCache(deps.AbsentCacheSize),
		nsLabels:    client.NewNamespaceLabels(deps.Clock),
		deleteQueue: work.NewQueue("attempt_to_delete", work.Options[types.UID]{Metrics: deps.WorkMetrics, Clock: deps.Clock}),
		verifyQueue: work.NewQueue("verify_owner", work.Options[graph.Ref]{Metrics: deps.WorkMetrics}),
	}
	c.monitors = newMonitors(deps.Metadata, c)
	if deps.Dynamic != nil && deps.Metadata != nil {
		c.api = newAPIWatch(deps.Dynamic, deps.Metadata)
	}
	c.leading.Store(deps.Elected == nil)
	if deps.Metrics != nil {
		deps.Metrics.registerGraph(c)
		c.latency = newLatencyTracker(deps.Metrics.CollectionDuration, time.Now)
	}
	return c
}

// Run discovers resources now and every DiscoveryPeriod, runs the workers once elected, and
// returns when ctx ends and everything has stopped. As in sample-controller, it returns an
// error only when it cannot start: what fails later is retried and reported, never fatal.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	switch {
	case c.deps.Discovery == nil:
		return errors.New("gc: no discovery client")
	case c.deps.DiscoveryPeriod <= 0:
		return fmt.Errorf("gc: discovery period %v must be positive", c.deps.DiscoveryPeriod)
	case c.deps.Workers < 1:
		return fmt.Errorf("gc: %d workers; at least one is needed", c.deps.Workers)
	case c.deps.Client == nil:
		return errors.New("gc: no API client")
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting collector", "discoveryPeriod", c.deps.DiscoveryPeriod, "workers", c.deps.Workers)
	var wg sync.WaitGroup
	wg.Go(func() {
		if c.deps.Elected != nil {
			select {
			case <-c.deps.Elected:
				logger.Info("Elected leader: starting workers")
			case <-ctx.Done():
				return
			}
		}
		if !c.loadOrphanRecords(ctx) {
			return
		}
		c.lead()
		wg.Go(func() { c.deleteQueue.Run(ctx, c.deps.Workers, c.attemptToDelete) })
		wg.Go(func() { c.verifyQueue.Run(ctx, c.deps.Workers, c.verifyOwner) })
		wg.Go(func() { c.runForegroundResync(ctx) })
		wg.Go(func() { c.runReverify(ctx) })
	})
	wg.Go(func() { c.watchInitialSync(ctx) })

	// A change to a CRD or an APIService asks for a round at once (apiwatch.go); the period
	// stays as the safety net.
	var rediscover <-chan struct{}
	if c.api != nil {
		rediscover = c.api.rediscover
		wg.Go(func() { c.api.run(ctx) })
	}
	t := time.NewTicker(c.deps.DiscoveryPeriod)
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

// loadOrphanRecords hands the recorded orphaned owners to the graph, retrying until it works;
// false when ctx ended first.
func (c *Controller) loadOrphanRecords(ctx context.Context) bool {
	if c.deps.OrphanRecords == nil {
		return true
	}
	logger := klog.FromContext(ctx)
	backoff := time.Second
	for {
		refs, err := c.deps.OrphanRecords.Load(ctx)
		if err == nil {
			for _, r := range refs {
				c.apply(graph.Event{Type: graph.EventOrphanRecorded, Object: graph.Object{Ref: r}})
			}
			logger.Info("Loaded the orphan record", "owners", len(refs))
			return true
		}
		logger.Error(err, "Cannot load the orphan record; collecting nothing until it loads", "retryIn", backoff)
		select {
		case <-ctx.Done():
			return false
		case <-c.deps.Clock.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// runForegroundResync hands the dependents of every owner being deleted in the foreground to
// the delete workers every ForegroundResyncPeriod. The graph asks once, when an owner enters
// foreground deletion; this makes that level-driven, so nothing depends on one effect having
// led anywhere. Deciding on a dependent that needs nothing costs no API call.
func (c *Controller) runForegroundResync(ctx context.Context) {
	t := time.NewTicker(c.deps.ForegroundResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.resyncForeground()
		}
	}
}

func (c *Controller) resyncForeground() {
	var deps []types.UID
	c.mu.RLock()
	for _, uid := range c.g.DeletingOwners() {
		if n, ok := c.g.Node(uid); ok && n.Finalizers.Has(graph.FinalizerForeground) {
			for _, d := range c.g.Dependents(uid) {
				deps = append(deps, d.UID)
			}
		}
	}
	c.mu.RUnlock()
	for _, uid := range deps {
		c.deleteQueue.Add(uid)
	}
}

// Ready reports whether the graph counts as synced: the first discovery round completed and its
// monitors delivered their initial lists, or SyncTimeout passed (see Unsynced for those that
// did not). From then on the graph reflects the cluster, but for the unsynced resources.
func (c *Controller) Ready() bool { return c.synced.Load() }

// Unsynced returns the watched resources whose view is not complete (initial list missing, or
// listing or watching failing since the last complete list), sorted by name.
func (c *Controller) Unsynced() []Unsynced { return c.monitors.unsynced() }

func (c *Controller) watchInitialSync(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	for {
		all := c.discovered.Load() && c.monitors.allSynced()
		if all || (c.discovered.Load() && time.Since(start) >= c.deps.SyncTimeout) {
			c.synced.Store(true)
			c.mu.RLock()
			st := c.g.Stats()
			c.mu.RUnlock()
			logger.Info("Dependency graph synced", "duration", time.Since(start).Round(time.Millisecond), "nodes", st.Nodes, "virtual", st.Virtual)
			if !all {
				for _, u := range c.monitors.unsynced() {
					logger.Error(nil, "Resource not synced; proceeding without it: decisions that need it wait, and it is retried with backoff",
						"resource", GVRString(u.Resource.GVR), "syncTimeout", c.deps.SyncTimeout, "lastError", u.Err)
				}
			}
			// The initial lists were decoded in full and are garbage now; the graph keeps a
			// fraction of them. Hand the peak back to the OS once instead of holding it.
			debug.FreeOSMemory()
			if c.deps.Metrics != nil {
				c.deps.Metrics.GraphSyncSeconds.Set(time.Since(start).Seconds())
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Resources returns a copy of the watched resource set.
func (c *Controller) Resources() ResourceSet {
	c.resMu.RLock()
	defer c.resMu.RUnlock()
	out := make(ResourceSet, len(c.resources))
	for k, v := range c.resources {
		out[k] = v
	}
	return out
}

// syncResources runs one discovery round and starts and stops monitors to match. A failed
// group keeps the resources it had, so a broken aggregated API never removes what is already
// watched nor stops collection elsewhere.
func (c *Controller) syncResources(ctx context.Context) {
	logger := klog.FromContext(ctx)
	res, err := DiscoverDeletable(ctx, c.deps.Discovery, c.ignored())
	failed := map[string]struct{}{}
	for gv := range res.FailedGroups {
		failed[gv.Group] = struct{}{}
	}
	if err != nil {
		failed[""] = struct{}{}
	}
	c.failedGroups.Store(&failed)
	if err != nil {
		c.deps.Metrics.DiscoveryErrors.WithLabelValues("all").Inc()
		logger.Error(err, "Discovery failed; keeping the resources already watched")
		return
	}
	old := c.Resources()
	next := res.Resources
	for gv, gerr := range res.FailedGroups {
		c.deps.Metrics.DiscoveryErrors.WithLabelValues(gv.String()).Inc()
		logger.Error(gerr, "Failed to discover API group; keeping its resources and collecting the others", "groupVersion", gv.String())
		for gvr, r := range old {
			if gvr.Group == gv.Group {
				next[gvr] = r
			}
		}
	}
	added, removed := old.Diff(next)
	// The REST mapper is refreshed every round, as in-tree: a kind can change scope or gain a
	// version without the set of deletable resources changing (and a mapping error for an
	// owner kind is retried against fresh discovery).
	if c.deps.Mapper != nil {
		c.deps.Mapper.Reset()
		c.mappings.clear()
	}
	for _, gvr := range removed {
		c.monitors.stop(gvr, c.deps.Clock.Now())
		c.deps.Metrics.ResourceWatched.DeleteLabelValues(gvr.Group, gvr.Version, gvr.Resource)
		logger.Info("Stopped watching resource", "resource", GVRString(gvr))
	}
	for _, gvr := range added {
		r := next[gvr]
		if c.deps.Metadata != nil {
			if err := c.monitors.start(ctx, r); err != nil {
				logger.Error(err, "Cannot watch resource", "resource", GVRString(gvr))
				delete(next, gvr)
				continue
			}
		}
		c.deps.Metrics.ResourceWatched.WithLabelValues(gvr.Group, gvr.Version, gvr.Resource).Set(1)
		logger.V(2).Info("Watching resource", "resource", GVRString(gvr), "kind", r.Kind, "namespaced", r.Namespaced)
	}
	// The objects of resources stopped now or in an earlier round (ghosts.go).
	c.unwatchStopped(ctx)
	c.resMu.Lock()
	c.resources = next
	c.resMu.Unlock()
	// Give back what churn left behind (namespaces, kinds and nodes that went): O(nodes), once
	// per round, under the write lock.
	c.mu.Lock()
	st := c.g.Compact()
	c.mu.Unlock()
	if st.FreedNamespaces > 0 || st.FreedKinds > 0 {
		logger.V(2).Info("Compacted the dependency graph", "freedNamespaces", st.FreedNamespaces, "freedKinds", st.FreedKinds, "namespaces", st.Namespaces, "kinds", st.Kinds, "nodeSlots", st.NodeSlots)
	}
	if len(added) > 0 || len(removed) > 0 {
		logger.Info("Deletable resources discovered", "count", len(next), "added", len(added), "removed", len(removed))
	}
	c.discovered.Store(true)
}

// observedExcept lists the observed objects of one kind that are not in seen (a complete
// list's deletions).
func (c *Controller) observedExcept(apiVersion, kind string, seen *graph.UIDSet) []graph.Ref {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.ObservedOfExcept(apiVersion, kind, seen)
}

// apply feeds one event to the graph and dispatches its effects.
func (c *Controller) apply(ev graph.Event) {
	c.mu.Lock()
	eff := c.g.Apply(ev)
	c.latency.observe(ev, eff) // under the lock: it sees events in the graph's order
	c.mu.Unlock()
	if eff.IsZero() {
		return
	}
	for _, uid := range eff.AttemptDelete {
		c.deleteQueue.Add(uid)
	}
	for _, ref := range eff.VerifyOwner {
		c.verifyQueue.Add(ref)
	}
	for _, inv := range eff.InvalidNamespace {
		c.reportInvalidNamespace(inv)
	}
	if c.deps.Finalizers != nil {
		for _, uids := range [][]types.UID{eff.AttemptOrphan, eff.Foreground, eff.RecheckOwner} {
			for _, uid := range uids {
				c.deps.Finalizers.Enqueue(uid)
			}
		}
	}
}

// EventComponent is the source component of cascade's events.
const EventComponent = "cascade"

// EventReasonInvalidNamespace is the in-tree reason for a reference to a namespaced owner in
// another namespace.
const EventReasonInvalidNamespace = "OwnerRefInvalidNamespace"

// reportInvalidNamespace emits the in-tree Warning on the dependent:
// ownerRef [apiVersion/Kind, namespace: ns, name: n, uid: u] does not exist in namespace "ns".
func (c *Controller) reportInvalidNamespace(inv graph.InvalidRef) {
	if c.deps.Metrics != nil {
		c.deps.Metrics.InvalidNamespaceRefs.Inc()
	}
	if c.deps.Recorder == nil {
		return
	}
	if !c.leading.Load() {
		c.eventsMu.Lock()
		if c.leading.Load() { // lead() ran meanwhile: emit now
			c.eventsMu.Unlock()
			c.emitInvalidNamespace(inv)
			return
		}
		if len(c.pendingEvents) == maxPendingEvents {
			c.pendingEvents = c.pendingEvents[1:]
		}
		c.pendingEvents = append(c.pendingEvents, inv)
		c.eventsMu.Unlock()
		return
	}
	c.emitInvalidNamespace(inv)
}

// lead lets this replica write from now on and emits the Events it held back as a standby.
func (c *Controller) lead() {
	c.eventsMu.Lock()
	c.leading.Store(true)
	pending := c.pendingEvents
	c.pendingEvents = nil
	c.eventsMu.Unlock()
	for _, inv := range pending {
		c.emitInvalidNamespace(inv)
	}
}

func (c *Controller) emitInvalidNamespace(inv graph.InvalidRef) {
	owner := graph.Ref{APIVersion: inv.Owner.APIVersion, Kind: inv.Owner.Kind, Namespace: inv.Dependent.Namespace, Name: inv.Owner.Name, UID: inv.Owner.UID}
	involved := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: inv.Dependent.APIVersion, Kind: inv.Dependent.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: inv.Dependent.Namespace, Name: inv.Dependent.Name, UID: inv.Dependent.UID},
	}
	c.deps.Recorder.Eventf(involved, "Warning", EventReasonInvalidNamespace,
		"ownerRef %s does not exist in namespace %q", owner.String(), inv.Dependent.Namespace)
}

// view returns the graph's node and owners of uid under the read lock.
func (c *Controller) view(uid types.UID) (graph.NodeView, []graph.OwnerView, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n, ok := c.g.Node(uid)
	if !ok {
		return n, nil, false
	}
	return n, c.g.Owners(uid), true
}

// GraphStats returns the graph's counts (for metrics and tests).
func (c *Controller) GraphStats() graph.Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.Stats()
}

// String is for logs.
func (r Resource) String() string {
	return fmt.Sprintf("%s (%s, namespaced=%t)", GVRString(r.GVR), r.Kind, r.Namespaced)
}
