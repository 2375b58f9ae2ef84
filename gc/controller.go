package gc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// Deps are what the controller needs from the outside world.
type Deps struct {
	Discovery discovery.ServerResourcesInterfaceWithContext
	Metrics   *Metrics
	// Ignored resources are never watched nor collected.
	Ignored map[schema.GroupResource]struct{}
	// DiscoveryPeriod is how often discovery re-runs.
	DiscoveryPeriod time.Duration
}

// Controller discovers deletable resources and keeps the watched set current.
//
// Concurrency: Run's goroutine is the only writer of resources; Resources and Ready may be
// called from any goroutine.
type Controller struct {
	deps Deps

	mu        sync.RWMutex
	resources ResourceSet // guarded by mu

	ready atomic.Bool // first discovery round done
}

// New builds a controller; nothing runs until Run.
func New(deps Deps) *Controller {
	if deps.Ignored == nil {
		deps.Ignored = DefaultIgnoredResources()
	}
	return &Controller{deps: deps, resources: ResourceSet{}}
}

// Run discovers resources now and every DiscoveryPeriod until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting discovery", "period", c.deps.DiscoveryPeriod)
	t := time.NewTicker(c.deps.DiscoveryPeriod)
	defer t.Stop()
	for {
		c.syncResources(ctx)
		select {
		case <-ctx.Done():
			logger.Info("Stopped discovery")
			return nil
		case <-t.C:
		}
	}
}

// Ready reports whether the first discovery round has completed.
func (c *Controller) Ready() bool { return c.ready.Load() }

// Resources returns a copy of the watched resource set.
func (c *Controller) Resources() ResourceSet {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(ResourceSet, len(c.resources))
	for k, v := range c.resources {
		out[k] = v
	}
	return out
}

// syncResources runs one discovery round and applies the difference. A failed group keeps the
// resources it had, so a broken aggregated API never removes what is already watched.
func (c *Controller) syncResources(ctx context.Context) {
	logger := klog.FromContext(ctx)
	res, err := DiscoverDeletable(ctx, c.deps.Discovery, c.deps.Ignored)
	if err != nil {
		c.deps.Metrics.DiscoveryErrors.WithLabelValues("all").Inc()
		logger.Error(err, "Discovery failed; keeping the resources already watched")
		return
	}
	c.mu.RLock()
	old := c.resources
	c.mu.RUnlock()
	next := res.Resources
	for gv, gerr := range res.FailedGroups {
		c.deps.Metrics.DiscoveryErrors.WithLabelValues(gv.String()).Inc()
		logger.Error(gerr, "Failed to discover API group; keeping its resources", "groupVersion", gv.String())
		for gvr, r := range old {
			if gvr.GroupVersion() == gv || gvr.Group == gv.Group {
				next[gvr] = r
			}
		}
	}
	added, removed := old.Diff(next)
	if len(added) == 0 && len(removed) == 0 {
		c.ready.Store(true)
		return
	}
	for _, gvr := range added {
		r := next[gvr]
		c.deps.Metrics.ResourceWatched.WithLabelValues(gvr.Group, gvr.Version, gvr.Resource).Set(1)
		logger.Info("Watching resource", "resource", GVRString(gvr), "kind", r.Kind, "namespaced", r.Namespaced)
	}
	for _, gvr := range removed {
		c.deps.Metrics.ResourceWatched.DeleteLabelValues(gvr.Group, gvr.Version, gvr.Resource)
		logger.Info("Stopped watching resource", "resource", GVRString(gvr))
	}
	c.mu.Lock()
	c.resources = next
	c.mu.Unlock()
	logger.Info("Deletable resources discovered", "count", len(next), "added", len(added), "removed", len(removed))
	c.ready.Store(true)
}

// String is for logs.
func (r Resource) String() string {
	return fmt.Sprintf("%s (%s, namespaced=%t)", GVRString(r.GVR), r.Kind, r.Namespaced)
}
