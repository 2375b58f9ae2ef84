package gc

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func cm(name string, uid types.UID, rv string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid, ResourceVersion: rv, OwnerReferences: owners}}
}

// TestGraphStoreRelistDeletesWhatVanished: a relist that no longer holds an object deletes it
// from the graph (its watched delete was missed), and its dependents become candidates.
func TestGraphStoreRelistDeletesWhatVanished(t *testing.T) {
	c := New(Options{Metrics: NewMetrics(prometheus.NewRegistry())})
	s := &graphStore{res: cmResource, graph: c}
	owner := cm("owner", "00000000-0000-0000-0000-000000000001", "1")
	dep := cm("dep", "00000000-0000-0000-0000-000000000002", "2", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID})
	if err := s.Replace([]any{owner, dep}, "2"); err != nil {
		t.Fatal(err)
	}
	if !s.synced.Load() {
		t.Fatal("not synced after the first list")
	}
	if st := c.GraphStats(); st.Observed != 2 {
		t.Fatalf("observed %d, want 2", st.Observed)
	}
	// The owner was deleted while the watch was down; the relist lacks it.
	if err := s.Replace([]any{dep}, "5"); err != nil {
		t.Fatal(err)
	}
	n, ok := c.Node(owner.UID)
	if !ok || !n.Absent {
		t.Fatalf("owner after relist = %+v (found %t), want an absent tombstone", n, ok)
	}
	if c.deleteQueue.Len() != 1 {
		t.Errorf("the dependent of the vanished owner was not queued for a decision (queue length %d)", c.deleteQueue.Len())
	}
	// A tombstone delivered by a relisting informer is unwrapped the same way.
	if err := s.Delete(cache.DeletedFinalStateUnknown{Key: "ns/dep", Obj: dep}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Node(dep.UID); ok {
		t.Errorf("dep still in the graph after its delete")
	}
}

// TestAPIServicesMonitorKicksDiscovery: the apiservices monitor asks for a discovery round on
// every change once its first list is complete, and after each relist (changes may have been
// missed meanwhile); its first list asks nothing (the first round comes by itself), and other
// resources never ask.
func TestAPIServicesMonitorKicksDiscovery(t *testing.T) {
	c := New(Options{Metrics: NewMetrics(prometheus.NewRegistry())})
	kicks := 0
	ms := newMonitors(nil, c)
	ms.kick = func() { kicks++ }
	s := ms.newStore(Resource{GVR: apiServiceGVR, Kind: "APIService"})
	other := ms.newStore(cmResource)
	svc := func(name, uid, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), ResourceVersion: rv}}
	}
	s.observe(svc("v1.example.com", "u1", "1")) // streamed by the first list
	if err := s.Replace(nil, "1"); err != nil {
		t.Fatal(err)
	}
	if kicks != 0 {
		t.Fatalf("%d rounds asked by the first list, want 0", kicks)
	}
	s.observe(svc("v1.example.com", "u1", "2"))    // available or not
	_ = s.Delete(svc("v1.example.com", "u1", "3")) // unregistered
	if kicks != 2 {
		t.Fatalf("%d rounds asked by a change and a deletion, want 2", kicks)
	}
	if err := s.Replace(nil, "9"); err != nil {
		t.Fatal(err)
	}
	if kicks != 3 {
		t.Fatalf("%d rounds asked after a relist, want 3", kicks)
	}
	other.observe(cm("a", "u2", "1"))
	_ = other.Replace(nil, "1")
	other.observe(cm("a", "u2", "2"))
	_ = other.Replace(nil, "2")
	if kicks != 3 {
		t.Fatalf("ConfigMaps asked for %d discovery rounds, want none", kicks-3)
	}
}
