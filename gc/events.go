package gc

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/policy"
)

// toGraphObject converts a watched object of resource r into the graph's plain object.
func toGraphObject(r Resource, m *metav1.PartialObjectMetadata) graph.Object {
	o := graph.Object{
		Ref: graph.Ref{
			APIVersion: r.GVR.GroupVersion().String(),
			Kind:       r.Kind,
			Namespace:  m.Namespace,
			Name:       m.Name,
			UID:        m.UID,
		},
		ResourceVersion: m.ResourceVersion,
		Deleting:        m.DeletionTimestamp != nil,
		Finalizers:      gcFinalizers(m.Finalizers),
		Stamp:           stampOf(m.Annotations[policy.DefaultPropagationAnnotation]),
	}
	if len(m.OwnerReferences) > 0 {
		o.Owners = make([]graph.OwnerRef, len(m.OwnerReferences))
		for i, ref := range m.OwnerReferences {
			o.Owners[i] = toGraphOwnerRef(ref)
		}
	}
	return o
}

func toGraphOwnerRef(ref metav1.OwnerReference) graph.OwnerRef {
	return graph.OwnerRef{
		APIVersion:         ref.APIVersion,
		Kind:               ref.Kind,
		Name:               ref.Name,
		UID:                ref.UID,
		Controller:         ref.Controller != nil && *ref.Controller,
		BlockOwnerDeletion: ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion,
	}
}

func gcFinalizers(fs []string) graph.Finalizers {
	var f graph.Finalizers
	for _, s := range fs {
		switch s {
		case metav1.FinalizerOrphanDependents:
			f |= graph.FinalizerOrphan
		case metav1.FinalizerDeleteDependents:
			f |= graph.FinalizerForeground
		}
	}
	return f
}

// unwrapTombstone returns the object of a delete notification, which may be a
// DeletedFinalStateUnknown when the watch missed the delete and a relist noticed it.
func unwrapTombstone(obj any) (*metav1.PartialObjectMetadata, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	return m, ok
}

// stampOf is the graph's record of the default-propagation stamp annotation value v: the
// finalizer it says cascade stamped, both finalizers for a value that names neither, 0 for none.
func stampOf(v string) graph.Finalizers {
	switch v {
	case "":
		return 0
	case string(metav1.DeletePropagationOrphan):
		return graph.FinalizerOrphan
	case string(metav1.DeletePropagationForeground):
		return graph.FinalizerForeground
	default:
		return graph.FinalizerOrphan | graph.FinalizerForeground
	}
}
