package gc

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/internal/features"
)

// TestListLevelsReported: how resources are listed is the feature "list": watch_list while
// every resource streams, watch_list+paged once one is refused (it goes on in pages), back to
// watch_list when that resource stops being watched. A resource listed in pages tries a
// watch-list again after the next discovery round, and streams if the server now serves it.
func TestListLevelsReported(t *testing.T) {
	ctx := context.Background()
	set := features.New(prometheus.NewRegistry())
	c := New(Options{Metrics: NewMetrics(prometheus.NewRegistry()), Features: set})
	start := func(gvr schema.GroupVersionResource, f *fakeResource) *streamLister {
		r := Resource{GVR: gvr, Kind: "Thing", Namespaced: true}
		l := &streamLister{client: f, store: &graphStore{res: r, graph: c}, logger: klog.Background(), listed: c.monitors.reportLists}
		done := make(chan struct{})
		close(done)
		c.monitors.mu.Lock()
		c.monitors.byR[gvr] = &monitor{res: r, store: l.store, lister: l, cancel: func() {}, done: done}
		c.monitors.mu.Unlock()
		return l
	}
	list := func(l *streamLister) {
		t.Helper()
		if _, err := l.list(ctx); err != nil {
			t.Fatal(err)
		}
	}
	streams := &fakeResource{objects: listedCMs(3), rv: "5"}
	refuses := &fakeResource{objects: listedCMs(3), rv: "5", refuse: true}
	a := start(schema.GroupVersionResource{Group: "a.example.com", Version: "v1", Resource: "things"}, streams)
	b := start(schema.GroupVersionResource{Group: "b.example.com", Version: "v1", Resource: "things"}, refuses)

	if got := set.Summary(); got != "admission_policy=unknown list=unknown" {
		t.Errorf("before any list: %q", got)
	}
	list(a)
	if got := set.Summary(); got != "admission_policy=unknown list=watch_list" {
		t.Errorf("after a streamed list: %q", got)
	}
	list(b)
	list(b)
	if got := set.Summary(); got != "admission_policy=unknown list=watch_list+paged" || set.Level(features.List) != features.LevelPaged {
		t.Errorf("after a refused one: %q", got)
	}
	if len(refuses.watches) != 1 {
		t.Errorf("%d watch-lists asked of the refusing server before a discovery round, want 1", len(refuses.watches))
	}

	c.monitors.retryWatchLists() // a discovery round
	refuses.refuse = false       // the server was upgraded meanwhile
	list(b)
	if len(refuses.watches) != 2 || set.Summary() != "admission_policy=unknown list=watch_list" {
		t.Errorf("after the round: %d watch-lists, %q; want the second one streamed", len(refuses.watches), set.Summary())
	}

	refuses.refuse = true
	c.monitors.retryWatchLists()
	list(b)
	if set.Level(features.List) != features.LevelPaged {
		t.Errorf("refused again: %q", set.Summary())
	}
	c.monitors.stop(b.store.res.GVR, c.opts.Clock.Now())
	if got := set.Summary(); got != "admission_policy=unknown list=watch_list" {
		t.Errorf("after the paged resource went: %q", got)
	}
}

// TestAfterDiscovery: the hook runs after every discovery round, failed ones included.
func TestAfterDiscovery(t *testing.T) {
	calls := 0
	c := New(Options{
		Metrics:        NewMetrics(prometheus.NewRegistry()),
		Discovery:      failingDiscovery{},
		AfterDiscovery: func(context.Context) { calls++ },
	})
	c.syncResources(context.Background())
	c.syncResources(context.Background())
	if calls != 2 {
		t.Errorf("AfterDiscovery called %d times after 2 failed rounds", calls)
	}
}

type failingDiscovery struct{}

func (failingDiscovery) ServerPreferredResourcesWithContext(context.Context) ([]*metav1.APIResourceList, error) {
	return nil, context.DeadlineExceeded
}
