package gc

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/restmapper"
	clienttesting "k8s.io/client-go/testing"
)

// switchingMapper answers from cur, counts the lookups, and takes next as its answers when
// reset (what discovery finds in the next round).
type switchingMapper struct {
	meta.RESTMapper // the other lookups: unused
	cur, next       *meta.DefaultRESTMapper
	lookups         int
	// during, when set, runs inside a lookup (a reset racing with it).
	during func()
}

func (m *switchingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.lookups++
	if m.during != nil {
		m.during()
	}
	return m.cur.RESTMapping(gk, versions...)
}

func (m *switchingMapper) Reset() {
	if m.next != nil {
		m.cur = m.next
	}
}

func mapperWith(kinds ...schema.GroupVersionKind) *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range kinds {
		m.Add(k, meta.RESTScopeNamespace)
	}
	return m
}

var (
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	widgetKind    = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
)

// TestMappingCacheAsksOnce: a kind's mapping is looked up once until the cache is cleared.
func TestMappingCacheAsksOnce(t *testing.T) {
	m := &switchingMapper{cur: mapperWith(configMapKind)}
	c := newMappingCache()
	for range 3 {
		got, err := c.get(m, configMapKind.GroupKind(), "v1")
		if err != nil || got.Resource.Resource != "configmaps" {
			t.Fatalf("mapping = %v, %v", got, err)
		}
	}
	if m.lookups != 1 {
		t.Errorf("%d lookups for three decisions, want 1", m.lookups)
	}
	c.clear()
	if _, err := c.get(m, configMapKind.GroupKind(), "v1"); err != nil {
		t.Fatal(err)
	}
	if m.lookups != 2 {
		t.Errorf("%d lookups, want 2: a cleared cache asks the mapper again", m.lookups)
	}
}

// TestMappingCacheNeverRemembersAMiss: a kind without REST mapping is refused on every lookup
// (never collected because of it), and a miss clears what was cached, since client-go's
// deferred mapper may refresh its discovery after one.
func TestMappingCacheNeverRemembersAMiss(t *testing.T) {
	m := &switchingMapper{cur: mapperWith(configMapKind)}
	c := newMappingCache()
	if _, err := c.get(m, configMapKind.GroupKind(), "v1"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.get(m, widgetKind.GroupKind(), "v1"); !meta.IsNoMatchError(err) {
			t.Fatalf("unmapped kind: err = %v, want a no-match error", err)
		}
	}
	if m.lookups != 3 {
		t.Errorf("%d lookups, want 3 (one for ConfigMap, one per Widget miss)", m.lookups)
	}
	if _, err := c.get(m, configMapKind.GroupKind(), "v1"); err != nil {
		t.Fatal(err)
	}
	if m.lookups != 4 {
		t.Errorf("%d lookups, want 4: a miss clears the cache", m.lookups)
	}
}

// TestMappingCacheDropsAnswerFromBeforeAClear: an answer the mapper gave while the cache was
// being cleared (a discovery round resetting the mapper meanwhile) is returned but not kept.
func TestMappingCacheDropsAnswerFromBeforeAClear(t *testing.T) {
	m := &switchingMapper{cur: mapperWith(configMapKind)}
	c := newMappingCache()
	m.during = c.clear
	if _, err := c.get(m, configMapKind.GroupKind(), "v1"); err != nil {
		t.Fatal(err)
	}
	m.during = nil
	if _, err := c.get(m, configMapKind.GroupKind(), "v1"); err != nil {
		t.Fatal(err)
	}
	if m.lookups != 2 {
		t.Errorf("%d lookups, want 2: the first answer came from before a clear", m.lookups)
	}
}

// TestDiscoveryRoundRefreshesMappings: a kind that discovery no longer finds (its CRD deleted)
// has no mapping from the next round on, so its dependents are never collected because of
// references to it; and a kind it now finds is mapped.
func TestDiscoveryRoundRefreshesMappings(t *testing.T) {
	d := &fakeDiscoverer{lists: []*metav1.APIResourceList{
		resourceList("v1", metav1.APIResource{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: allVerbs}),
	}}
	m := &switchingMapper{cur: mapperWith(configMapKind, widgetKind)}
	c := New(Options{Discovery: d, Mapper: m, Metrics: NewMetrics(prometheus.NewRegistry())})
	if _, err := c.restMapping(widgetKind.GroupKind(), "v1"); err != nil {
		t.Fatal(err)
	}
	m.next = mapperWith(configMapKind)
	c.syncResources(context.Background())
	if _, err := c.restMapping(widgetKind.GroupKind(), "v1"); err == nil {
		t.Error("Widget still mapped after a discovery round without it")
	}
}

// BenchmarkRESTMapping is the lookup every decision makes for each owner reference, through
// client-go's deferred discovery mapper over a server with 60 kinds, with and without the cache.
func BenchmarkRESTMapping(b *testing.B) {
	var lists []*metav1.APIResourceList
	for g := range 10 {
		gv := fmt.Sprintf("group%d.example.com/v1", g)
		if g == 0 {
			gv = "v1"
		}
		l := &metav1.APIResourceList{GroupVersion: gv}
		for k := range 6 {
			kind := fmt.Sprintf("Kind%d", k)
			if g == 0 && k == 0 {
				kind = "ConfigMap"
			}
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: fmt.Sprintf("kind%ds", k), Kind: kind, Namespaced: true, Verbs: allVerbs})
		}
		lists = append(lists, l)
	}
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: lists}}
	gk := configMapKind.GroupKind()
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			c := New(Options{Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))})
			b.ReportAllocs()
			for b.Loop() {
				if !cached {
					c.mappings.clear()
				}
				if _, err := c.restMapping(gk, "v1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
