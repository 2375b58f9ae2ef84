package gc

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/internal/work"
)

// nopClient answers every call at once and counts the DELETEs: what is left of a worker's
// cost is cascade's own, without HTTP.
type nopClient struct{ deletes int }

func (*nopClient) Get(context.Context, schema.GroupVersionResource, string, string) (*metav1.PartialObjectMetadata, error) {
	return &metav1.PartialObjectMetadata{}, nil
}

func (c *nopClient) Delete(context.Context, schema.GroupVersionResource, string, string, metav1.DeleteOptions) error {
	c.deletes++
	return nil
}

func (*nopClient) Patch(context.Context, schema.GroupVersionResource, string, string, types.PatchType, []byte) (*metav1.PartialObjectMetadata, error) {
	return &metav1.PartialObjectMetadata{}, nil
}

// BenchmarkAttemptToDelete is one worker's decision on a dependent whose owner was observed
// deleted, and its DELETE to a client that answers at once: cascade's per-object CPU cost apart
// from HTTP and the watch (the graph holds 1,000 such dependents; the same one is decided on
// again and again, as the client changes nothing).
func BenchmarkAttemptToDelete(b *testing.B) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	nop := &nopClient{}
	c := New(Options{Client: nop, Mapper: resettable{mapper}, Metrics: NewMetrics(prometheus.NewRegistry())})
	m := &monitor{res: Resource{GVR: widgets, Kind: "Widget", Namespaced: true}, store: &graphStore{}}
	m.store.synced.Store(true)
	c.monitors.byR[widgets] = m
	c.monitors.byGK[schema.GroupKind{Group: "example.com", Kind: "Widget"}] = m
	b.Cleanup(func() { c.deleteQueue.ShutDown(); c.verifyQueue.ShutDown() })
	observe(c, widgetObj("w-owner", "owner"))
	for i := range 1000 {
		uid := types.UID("dep-" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		observe(c, widgetObj("d-"+string(uid), uid, "owner"))
	}
	observeDeleted(c, "owner")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out, err := c.attemptToDelete(ctx, "dep-aa")
		if out != work.Done || err != nil {
			b.Fatalf("outcome %v, %v", out, err)
		}
	}
	if nop.deletes == 0 {
		b.Fatal("no DELETE sent")
	}
}
