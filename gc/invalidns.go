package gc

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/graph"
)

// EventComponent is the source component of cascade's events.
const EventComponent = "cascade"

// EventReasonInvalidNamespace is the in-tree reason for a reference to a namespaced owner in
// another namespace.
const EventReasonInvalidNamespace = "OwnerRefInvalidNamespace"

// maxPendingEvents bounds the Events a standby keeps for when it leads; older ones are dropped
// (their count stays in cascade_invalid_namespace_refs_total).
const maxPendingEvents = 1000

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
