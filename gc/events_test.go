package gc

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/policy"
)

var cmResource = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}

// TestToGraphObjectKeepsWhatGCNeeds: identity, deletion, GC finalizers and references (with
// their flags) reach the graph.
func TestToGraphObjectKeepsWhatGCNeeds(t *testing.T) {
	now := metav1.Now()
	yes := true
	m := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "m"}},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "ou", BlockOwnerDeletion: &yes}},
			Finalizers:        []string{"orphan", "example.com/x"},
			DeletionTimestamp: &now,
		},
	}
	o := toGraphObject(cmResource, m)
	if o.APIVersion != "v1" || o.Kind != "ConfigMap" || !o.Deleting || o.Finalizers != graph.FinalizerOrphan ||
		len(o.Owners) != 1 || !o.Owners[0].BlockOwnerDeletion || o.Owners[0].Controller {
		t.Errorf("toGraphObject = %+v", o)
	}
	if o.Stamp != 0 {
		t.Errorf("stamp %v without the annotation", o.Stamp)
	}
	if o.Name != "n" || o.Namespace != "ns" || o.UID != "u" || o.ResourceVersion != "7" {
		t.Errorf("toGraphObject identity = %+v", o.Ref)
	}

	// The default-propagation stamp annotation reaches the graph.
	for value, want := range map[string]graph.Finalizers{
		"Orphan": graph.FinalizerOrphan, "Foreground": graph.FinalizerForeground, "Sideways": graph.FinalizerOrphan | graph.FinalizerForeground,
	} {
		m.Annotations = map[string]string{"c": "d", policy.DefaultPropagationAnnotation: value}
		if got := toGraphObject(cmResource, m).Stamp; got != want {
			t.Errorf("stamp %q: graph stamp %v, want %v", value, got, want)
		}
	}
}

// BenchmarkHandlerNoopUpdate measures a watched update that changes nothing the collector acts
// on (only resourceVersion, as a label or status change would): the store's cost per event,
// including conversion and the graph's no-op path.
func BenchmarkHandlerNoopUpdate(b *testing.B) {
	c := New(Options{Metrics: NewMetrics(prometheus.NewRegistry())})
	h := &graphStore{res: cmResource, graph: c}
	owner := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "o", Namespace: "ns", UID: "11111111-1111-1111-1111-111111111111", ResourceVersion: "1"}}
	_ = h.Add(owner)
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: owner.UID}
	objs := [2]*metav1.PartialObjectMetadata{}
	for i := range objs {
		objs[i] = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: "d", Namespace: "ns", UID: types.UID("22222222-2222-2222-2222-222222222222"),
			ResourceVersion: []string{"10", "11"}[i], OwnerReferences: []metav1.OwnerReference{ref},
		}}
	}
	_ = h.Add(objs[0])
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		_ = h.Update(objs[(i+1)%2])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
