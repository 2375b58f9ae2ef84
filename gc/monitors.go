package gc

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
)

// monitor watches one resource in a loop of its own (watchloop.go) whose store is the graph
// itself: there is no informer cache, so each object is held once, in the graph's compact
// form. Stopping it ends the loop's goroutine; nothing else was registered, so a deleted CRD
// leaves nothing behind (the in-tree GC leaks a handler and its goroutines per removed
// resource: kubernetes#114066).
type monitor struct {
	res    Resource
	store  *graphStore
	lister *streamLister
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *monitor) synced() bool { return m.store.synced.Load() }

// monitors is the set of running monitors. Only the discovery loop adds and removes; workers
// read it (synced checks, resource lookups) under mu.
type monitors struct {
	client metadata.Interface
	// open opens the monitors' watches (nil: through client).
	open watchOpener
	// kick, when set, is called on every change the apiservices monitor sees once synced, and
	// after each of its relists: an APIService added, changed (available or not) or deleted
	// asks for a discovery round at once (apiwatch.go).
	kick  func()
	graph graphWriter
	// tooLarge, when set, counts streams ended by an object above the decoder's bound.
	tooLarge prometheus.Counter

	mu   sync.RWMutex
	byR  map[schema.GroupVersionResource]*monitor
	byGK map[schema.GroupKind]*monitor // the watched version of each kind
	// stopped are the resources stop ended whose objects the graph still holds as observed: it is
	// told (graph.EventUnwatched) once unwatchDue says so.
	stopped []stoppedResource

	// lists, when set, is told how many watched resources were last listed with a watch-list
	// and how many in pages, after every list and every stop; listsMu orders the reports.
	lists   func(ctx context.Context, watchList, paged int)
	listsMu sync.Mutex
}

// stoppedResource is a resource whose monitor stop ended, and when.
type stoppedResource struct {
	Resource
	at time.Time
}

func newMonitors(client metadata.Interface, g graphWriter) *monitors {
	return &monitors{
		client: client,
		graph:  g,
		byR:    map[schema.GroupVersionResource]*monitor{},
		byGK:   map[schema.GroupKind]*monitor{},
	}
}

// start begins watching r; a no-op when r is already watched.
func (ms *monitors) start(ctx context.Context, r Resource) error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if _, ok := ms.byR[r.GVR]; ok {
		return nil
	}
	store := ms.newStore(r)
	logger := klog.FromContext(ctx).WithValues("resource", GVRString(r.GVR))
	// Failures are recorded on the store, so a resource that cannot be listed is named in
	// /readyz, the metrics and the Events instead of silently holding everything back. Lists
	// stream into the graph (listing.go).
	lw := &streamLister{client: ms.client.Resource(r.GVR), open: ms.open, store: store, logger: logger, listed: ms.reportLists, tooLarge: ms.tooLarge}
	mctx, cancel := context.WithCancel(klog.NewContext(ctx, logger))
	m := &monitor{res: r, store: store, lister: lw, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		m.run(mctx)
	}()
	ms.byR[r.GVR] = m
	ms.byGK[schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}] = m
	return nil
}

// newStore is the store of r's monitor.
func (ms *monitors) newStore(r Resource) *graphStore {
	s := &graphStore{res: r, graph: ms.graph}
	if r.GVR.GroupResource() == apiServiceGVR.GroupResource() {
		s.changed = ms.kick
	}
	return s
}

// stop ends the monitor of gvr, removing its handler first so no event arrives after. Its
// resource waits in stopped, from now, until the graph can be told its objects are no longer
// watched (unwatchDue).
func (ms *monitors) stop(gvr schema.GroupVersionResource, now time.Time) {
	ms.mu.Lock()
	m, ok := ms.byR[gvr]
	if ok {
		delete(ms.byR, gvr)
		gk := schema.GroupKind{Group: gvr.Group, Kind: m.res.Kind}
		if ms.byGK[gk] == m {
			delete(ms.byGK, gk)
		}
		ms.stopped = append(ms.stopped, stoppedResource{Resource: m.res, at: now})
	}
	ms.mu.Unlock()
	if !ok {
		return
	}
	m.cancel()
	<-m.done
	ms.reportLists(context.Background())
}

// reportLists counts the watched resources by how their last list was made and tells lists.
func (ms *monitors) reportLists(ctx context.Context) {
	if ms.lists == nil {
		return
	}
	ms.listsMu.Lock()
	defer ms.listsMu.Unlock()
	var watchList, paged int
	ms.mu.RLock()
	for _, m := range ms.byR {
		switch m.lister.mode.Load() {
		case listWatchList:
			watchList++
		case listPaged:
			paged++
		}
	}
	ms.mu.RUnlock()
	ms.lists(ctx, watchList, paged)
}

// retryWatchLists makes the next list of every resource listed in pages try a watch-list
// again (once per discovery round).
func (ms *monitors) retryWatchLists() {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	for _, m := range ms.byR {
		m.lister.retryWatchList()
	}
}

// unwatchDue returns the stopped resources whose objects the graph is to stop holding as
// observed now (graph.EventUnwatched), and forgets them. Their monitors have returned, so no
// late event of theirs can follow. A stopped resource is due
//   - when no version of its kind is watched any more: at once when its kind is gone (its CRD
//     was seen deleted, which happens only once every object of it was deleted), else once it
//     has been stopped for grace. A resource that merely dropped out of discovery (kube-apiserver
//     restarting, before its CRDs are served again; an aggregated API down; a discovery round
//     that missed it) keeps its objects observed meanwhile: they keep their dependents and hold
//     the foreground owners they block, as the in-tree collector's graph keeps the nodes of a
//     resource it stopped watching. Found by the chaos suite (issue 22): a foreground owner
//     finished 1 s after kube-apiserver restarted, while a Sprocket blocking it existed, because
//     sprockets was missing from one discovery round;
//   - when another version of its kind is watched (the preferred version switched), only once
//     that version's monitor has synced: its complete list has then observed again, at the new
//     version, every object that still exists, and what is left at the old version is what
//     went while neither version was watched. Until then the objects stay observed as they
//     were: they keep their dependents and hold foreground owners, a wait on an incomplete view
//     that never deletes anything (and a new version that cannot be listed is reported
//     unsynced).
//
// A resource whose own version is watched again is forgotten: that monitor's lists decide
// about its objects, including those that vanished.
func (ms *monitors) unwatchDue(now time.Time, grace time.Duration, gone func(schema.GroupKind) bool) []Resource {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var due []Resource
	waiting := ms.stopped[:0]
	for _, r := range ms.stopped {
		gk := schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}
		m, ok := ms.byGK[gk]
		switch {
		case !ok && (gone(gk) || now.Sub(r.at) >= grace):
			due = append(due, r.Resource)
		case !ok:
			waiting = append(waiting, r)
		case m.res.GVR.Version == r.GVR.Version:
			// watched again at its version
		case m.synced():
			due = append(due, r.Resource)
		default:
			waiting = append(waiting, r)
		}
	}
	clear(ms.stopped[len(waiting):])
	ms.stopped = waiting
	return due
}

// stopAll ends every monitor (shutdown).
func (ms *monitors) stopAll() {
	ms.mu.RLock()
	gvrs := make([]schema.GroupVersionResource, 0, len(ms.byR))
	for gvr := range ms.byR {
		gvrs = append(gvrs, gvr)
	}
	ms.mu.RUnlock()
	for _, gvr := range gvrs {
		ms.stop(gvr, time.Time{})
	}
	ms.mu.Lock()
	ms.stopped = nil // shutting down: nothing to tell the graph
	ms.mu.Unlock()
}

// allSynced reports whether every monitor has delivered its initial list.
func (ms *monitors) allSynced() bool {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	for _, m := range ms.byR {
		if !m.synced() {
			return false
		}
	}
	return true
}

// isWatched reports whether some version of the kind gk is watched.
func (ms *monitors) isWatched(gk schema.GroupKind) bool {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	_, ok := ms.byGK[gk]
	return ok
}

// kindSynced reports whether the kind gk is watched and its initial list is in the graph.
func (ms *monitors) kindSynced(gk schema.GroupKind) bool {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	m, ok := ms.byGK[gk]
	return ok && m.synced()
}

// ofKind returns the monitor of the watched version of apiVersion's group and kind, and the
// version apiVersion names.
func (ms *monitors) ofKind(apiVersion, kind string) (*monitor, string, bool) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, "", false
	}
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	m, ok := ms.byGK[gv.WithKind(kind).GroupKind()]
	return m, gv.Version, ok
}

// resourceFor returns the watched resource of an observed object's apiVersion and kind.
func (ms *monitors) resourceFor(apiVersion, kind string) (Resource, bool) {
	m, version, ok := ms.ofKind(apiVersion, kind)
	if !ok || m.res.GVR.Version != version {
		return Resource{}, false
	}
	return m.res, true
}

// Unsynced is a watched resource whose view in the graph is not complete: its initial list
// never arrived, or listing or watching it failed since its last complete list.
type Unsynced struct {
	Resource Resource
	// Synced: the initial list arrived once (the view is stale, not missing).
	Synced bool
	// Err is the last list or watch error, "" when the initial list is merely still running.
	Err string
}

// unsynced returns the watched resources whose view is not complete, sorted by name.
func (ms *monitors) unsynced() []Unsynced {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	var out []Unsynced
	for _, m := range ms.byR {
		synced, failure := m.synced(), m.store.lastFailure()
		if !synced || failure != "" {
			out = append(out, Unsynced{Resource: m.res, Synced: synced, Err: failure})
		}
	}
	slices.SortFunc(out, func(a, b Unsynced) int { return strings.Compare(GVRString(a.Resource.GVR), GVRString(b.Resource.GVR)) })
	return out
}

// catchingUp returns the resources that synced once and whose watch ended after since without
// a watch open again: relisting after an expired watch, reconnecting, or failing (but for a
// resource no longer served: its CRD deleted, nothing is written there). What was written there
// meanwhile has not reached the graph yet.
func (ms *monitors) catchingUp(since time.Time) []Resource {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	var out []Resource
	for _, m := range ms.byR {
		if at := m.store.staleSince.Load(); at != 0 && at > since.UnixNano() && m.synced() && !m.store.notServed.Load() {
			out = append(out, m.res)
		}
	}
	slices.SortFunc(out, func(a, b Resource) int { return strings.Compare(GVRString(a.GVR), GVRString(b.GVR)) })
	return out
}

// kindUnsynced reports whether the watched version of apiVersion/kind is unsynced, with its
// resource.
func (ms *monitors) kindUnsynced(apiVersion, kind string) (Resource, bool) {
	m, _, ok := ms.ofKind(apiVersion, kind)
	if !ok {
		return Resource{}, false
	}
	return m.res, !m.synced() || m.store.lastFailure() != ""
}

// counts returns how many monitors run and how many have synced.
func (ms *monitors) counts() (total, synced int) {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	for _, m := range ms.byR {
		total++
		if m.synced() {
			synced++
		}
	}
	return total, synced
}

// watched returns every watched resource.
func (ms *monitors) watched() []Resource {
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	out := make([]Resource, 0, len(ms.byR))
	for _, m := range ms.byR {
		out = append(out, m.res)
	}
	return out
}
