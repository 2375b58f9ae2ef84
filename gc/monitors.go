package gc

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// monitor is one metadata-only informer for one resource, with the handler that feeds the
// graph. Stopping it removes the handler and ends the informer's goroutines, so a deleted CRD
// leaves nothing behind (the in-tree GC leaks both: kubernetes#114066).
type monitor struct {
	res      Resource
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
	cancel   context.CancelFunc
	done     chan struct{}
}

func (m *monitor) synced() bool { return m.reg.HasSynced() && m.informer.HasSynced() }

// monitors is the set of running monitors. Only the discovery loop adds and removes; workers
// read it (synced checks, resource lookups) under mu.
type monitors struct {
	client  metadata.Interface
	handler func(Resource) cache.ResourceEventHandler

	mu   sync.RWMutex
	byR  map[schema.GroupVersionResource]*monitor
	byGK map[schema.GroupKind]*monitor // the watched version of each kind
}

func newMonitors(client metadata.Interface, handler func(Resource) cache.ResourceEventHandler) *monitors {
	return &monitors{
		client:  client,
		handler: handler,
		byR:     map[schema.GroupVersionResource]*monitor{},
		byGK:    map[schema.GroupKind]*monitor{},
	}
}

// start begins watching r; a no-op when r is already watched.
func (ms *monitors) start(ctx context.Context, r Resource) error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if _, ok := ms.byR[r.GVR]; ok {
		return nil
	}
	inf := metadatainformer.NewFilteredMetadataInformer(ms.client, r.GVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(trim); err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(ms.handler(r))
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("resource", GVRString(r.GVR))))
	m := &monitor{res: r, informer: inf, reg: reg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		inf.RunWithContext(mctx)
	}()
	ms.byR[r.GVR] = m
	ms.byGK[schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}] = m
	return nil
}

// stop ends the monitor of gvr, removing its handler first so no event arrives after.
func (ms *monitors) stop(gvr schema.GroupVersionResource) {
	ms.mu.Lock()
	m, ok := ms.byR[gvr]
	if ok {
		delete(ms.byR, gvr)
		gk := schema.GroupKind{Group: gvr.Group, Kind: m.res.Kind}
		if ms.byGK[gk] == m {
			delete(ms.byGK, gk)
		}
	}
	ms.mu.Unlock()
	if !ok {
		return
	}
	_ = m.informer.RemoveEventHandler(m.reg)
	m.cancel()
	<-m.done
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
		ms.stop(gvr)
	}
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

// resourceFor returns the watched resource of an observed object's apiVersion and kind.
func (ms *monitors) resourceFor(apiVersion, kind string) (Resource, bool) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return Resource{}, false
	}
	ms.mu.RLock()
	defer ms.mu.RUnlock()
	m, ok := ms.byGK[gv.WithKind(kind).GroupKind()]
	if !ok || m.res.GVR.Version != gv.Version {
		return Resource{}, false
	}
	return m.res, true
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
