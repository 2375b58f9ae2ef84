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

// reportInvalidNamespace emits the in-tree Warning on the dependent:
// ownerRef [apiVersion/Kind, namespace: ns, name: n, uid: u] does not exist in namespace "ns".
// (A standby's Events wait in the HeldRecorder cascade passes as Recorder.)
func (c *Controller) reportInvalidNamespace(inv graph.InvalidRef) {
	c.opts.Metrics.InvalidNamespaceRefs.Inc()
	if c.opts.Events == nil {
		return
	}
	c.emitInvalidNamespace(inv)
}

// lead marks this replica's workers as running (cascade_leader).
func (c *Controller) lead() { c.leading.Store(true) }

func (c *Controller) emitInvalidNamespace(inv graph.InvalidRef) {
	owner := graph.Ref{APIVersion: inv.Owner.APIVersion, Kind: inv.Owner.Kind, Namespace: inv.Dependent.Namespace, Name: inv.Owner.Name, UID: inv.Owner.UID}
	involved := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: inv.Dependent.APIVersion, Kind: inv.Dependent.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: inv.Dependent.Namespace, Name: inv.Dependent.Name, UID: inv.Dependent.UID},
	}
	c.opts.Events.Eventf(involved, "Warning", EventReasonInvalidNamespace,
		"ownerRef %s does not exist in namespace %q", owner.String(), inv.Dependent.Namespace)
}
