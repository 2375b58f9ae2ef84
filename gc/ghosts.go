package gc

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/graph"
)

// Ghosts: objects of a resource cascade stopped watching (issue 10.4).
//
// When discovery no longer lists a resource (its CRD was deleted, its preferred version
// switched, its group went away), its monitor is stopped, and what the graph observed of its
// objects goes stale: nothing would tell it when they change or go. Left as they were, they
// would be ghosts: solid owners keeping their dependents forever, blocking dependents holding
// foreground owners forever. So once monitors.unwatchDue says so (at once when the kind is
// gone, its CRD seen deleted; after GhostGrace when no version of the kind is watched any more
// for another reason, so a resource missing from discovery for a moment never releases the
// foreground owners its objects block; after the new version's initial list when the preferred
// version switched), the graph is told (graph.EventUnwatched): every object of that apiVersion
// and kind it still holds as observed is no longer a dependent anyone knows of (a foreground
// owner it blocked is rechecked), and, if other objects reference it, becomes a virtual owner
// whose claims are verified with a live GET like any owner cascade never observed. Nothing is
// decided on a ghost: a live one is found present (if its old version is still served) or
// observed again at its new version; one found absent lets its dependents be collected; one
// whose kind can no longer be mapped keeps them, as any owner of an unknown kind does.

// GhostGrace is how long the objects of a resource that dropped out of discovery, while its kind
// is not known gone, stay observed as they were (monitors.unwatchDue).
const GhostGrace = 5 * time.Minute

// unwatchStopped tells the graph about the stopped resources that are due, after their
// monitors returned, and dispatches the effects (the claims to verify, the foreground owners to
// recheck) as any event's. It runs every discovery round.
func (c *Controller) unwatchStopped(ctx context.Context) {
	logger := klog.FromContext(ctx)
	gone := func(gk schema.GroupKind) bool {
		if c.api == nil {
			return false
		}
		_, g := c.api.seenGone(gk)
		return g
	}
	for _, r := range c.monitors.unwatchDue(c.opts.Clock.Now(), GhostGrace, gone) {
		apiVersion := r.GVR.GroupVersion().String()
		ghosts := c.GraphStats().PerResource[apiVersion+", Kind="+r.Kind]
		c.apply(graph.Event{Type: graph.EventUnwatched, Object: graph.Object{Ref: graph.Ref{APIVersion: apiVersion, Kind: r.Kind}}})
		if ghosts > 0 {
			logger.Info("Objects of a resource no longer watched are no longer observed; claims on them will be verified",
				"resource", GVRString(r.GVR), "kind", r.Kind, "objects", ghosts)
		}
	}
}
