package gc

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// kindGone reports whether the kind gk, which has no REST mapping, is gone for good: its CRD
// was seen deleted, the last discovery round reached its group, and a live check started now
// finds nothing serving it (apiwatch.go). An owner of that kind cannot exist, so a reference
// naming it is absent. Anything uncertain answers false: the reference is kept and retried.
// A cluster-scoped dependent (dependentNS "") never loses an owner of a kind whose CRD was
// namespaced: such a reference is never collectable, as for a kind that is served.
func (c *Controller) kindGone(ctx context.Context, gk schema.GroupKind, dependentNS string) bool {
	if c.api == nil {
		return false
	}
	namespaced, gone := c.api.seenGone(gk)
	if !gone || namespaced && dependentNS == "" {
		return false
	}
	if failed := c.failedGroups.Load(); failed == nil {
		return false // no discovery round yet
	} else if _, all := (*failed)[""]; all {
		return false
	} else if _, group := (*failed)[gk.Group]; group {
		return false
	}
	gone, err := c.api.confirmGone(ctx, gk)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot confirm that a deleted CRD's kind is still served by nothing; its references are kept", "kind", gk.String())
		return false
	}
	return gone
}
