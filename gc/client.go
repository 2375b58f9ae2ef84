package gc

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
)

// FieldManager is the field manager cascade names on every write, so
// managedFields show which changes the garbage collector made.
const FieldManager = "cascade"

// ObjectClient is the API edge of the garbage collector: the three calls it
// makes on any resource, with objects reduced to their metadata. An empty
// namespace addresses a cluster-scoped object.
type ObjectClient interface {
	// Get reads the live metadata of one object.
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error)
	// Delete deletes one object; opts carries the preconditions and the
	// propagation policy.
	Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error
	// Patch applies a strategic merge or JSON merge patch to one object.
	Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) (*metav1.PartialObjectMetadata, error)
}

// NewObjectClient returns an ObjectClient backed by the metadata client.
func NewObjectClient(c metadata.Interface) ObjectClient {
	return metadataObjectClient{client: c}
}

// metadataObjectClient is stateless; it is safe for concurrent use as long as
// the metadata client is (the real one is).
type metadataObjectClient struct {
	client metadata.Interface
}

func (c metadataObjectClient) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	return c.client.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c metadataObjectClient) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	return c.client.Resource(gvr).Namespace(namespace).Delete(ctx, name, opts)
}

func (c metadataObjectClient) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) (*metav1.PartialObjectMetadata, error) {
	return c.client.Resource(gvr).Namespace(namespace).Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: FieldManager})
}
