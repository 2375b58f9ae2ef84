package client

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deleteOptions builds the options of a garbage-collection DELETE. The UID
// precondition makes sure a recreated object with the same name is never
// deleted; the resourceVersion precondition (left out when rv is empty) makes
// sure the decision was taken on the object as it is now, so a concurrent
// change of its owner references turns into a 409 instead of a wrong delete.
// An empty policy leaves the choice to the object's own finalizers.
func deleteOptions(uid types.UID, rv string, policy metav1.DeletionPropagation) metav1.DeleteOptions {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if rv != "" {
		opts.Preconditions.ResourceVersion = &rv
	}
	if policy != "" {
		opts.PropagationPolicy = &policy
	}
	return opts
}

// Delete deletes t with the UID precondition and, when rv is not empty, the resourceVersion
// precondition: the object must be the one the decision was taken on, as it was then. A 409
// means it changed (the caller reads it and decides again); a 404 means it is gone already.
func Delete(ctx context.Context, c Interface, t Target, rv string, policy metav1.DeletionPropagation) error {
	return c.Delete(ctx, t.GVR, t.Namespace, t.Name, deleteOptions(t.UID, rv, policy))
}
