package client

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
)

// FieldManager is the field manager cascade names on every write, so
// managedFields show which changes the garbage collector made.
const FieldManager = "cascade"

// Interface is the API edge of the garbage collector: the three calls it
// makes on any resource, with objects reduced to their metadata. An empty
// namespace addresses a cluster-scoped object.
type Interface interface {
	// Get reads the live metadata of one object.
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error)
	// Delete deletes one object; opts carries the preconditions and the
	// propagation policy.
	Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error
	// Patch applies a strategic merge or JSON merge patch to one object.
	Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) (*metav1.PartialObjectMetadata, error)
}

// Target is one object a write is meant for: where it is, and the UID it must still have.
// Namespace is "" for a cluster-scoped object.
type Target struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
	UID       types.UID
}

// String is for logs and errors.
func (t Target) String() string {
	gvr := t.GVR.Resource
	if t.GVR.Group != "" {
		gvr += "." + t.GVR.Group
	}
	return gvr + " " + t.Namespace + "/" + t.Name + " (" + string(t.UID) + ")"
}

// New returns an Interface backed by the metadata client.
func New(c metadata.Interface) Interface {
	return metadataClient{client: c}
}

// metadataClient is stateless; it is safe for concurrent use as long as
// the metadata client is (the real one is).
type metadataClient struct {
	client metadata.Interface
}

func (c metadataClient) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	return c.client.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c metadataClient) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	return c.client.Resource(gvr).Namespace(namespace).Delete(ctx, name, opts)
}

func (c metadataClient) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) (*metav1.PartialObjectMetadata, error) {
	return c.client.Resource(gvr).Namespace(namespace).Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: FieldManager})
}

// NewListReads returns an Interface backed by the metadata client whose Get is a list by name
// (fieldSelector metadata.name), for a role that may list and watch every resource but not get
// them: shadow mode's (deploy/overlays/shadow, the chart's mode: dry-run). A role with get on
// every resource holds get on nodes/proxy, which is the kubelet's API; list on it is none. The
// answer is the one a GET gives: the object, or a NotFound naming it (an absent owner), or the
// list's own error (a NotFound for a resource the server no longer serves names no object, as a
// GET's for that path does not: namesObject tells them apart). The list is a consistent read
// like a GET (no resourceVersion). Delete and Patch are the metadata client's.
func NewListReads(c metadata.Interface) Interface {
	return listReads{metadataClient{client: c}}
}

type listReads struct{ metadataClient }

func (c listReads) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	l, err := c.client.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		if l.Items[i].Name == name {
			return &l.Items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}
