package gc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/policy"
)

type fakeDiscoverer struct {
	lists []*metav1.APIResourceList
	err   error
}

func (f *fakeDiscoverer) ServerPreferredResourcesWithContext(context.Context) ([]*metav1.APIResourceList, error) {
	return f.lists, f.err
}

var allVerbs = metav1.Verbs{"get", "list", "watch", "delete", "create"}

func resourceList(gv string, rs ...metav1.APIResource) *metav1.APIResourceList {
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: rs}
}

func TestDiscoverDeletable(t *testing.T) {
	d := &fakeDiscoverer{lists: []*metav1.APIResourceList{
		resourceList("v1",
			metav1.APIResource{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: allVerbs},
			metav1.APIResource{Name: "events", Kind: "Event", Namespaced: true, Verbs: allVerbs},
			metav1.APIResource{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: allVerbs},
			metav1.APIResource{Name: "bindings", Kind: "Binding", Namespaced: true, Verbs: metav1.Verbs{"create"}},
			metav1.APIResource{Name: "namespaces", Kind: "Namespace", Verbs: allVerbs}),
		resourceList("events.k8s.io/v1", metav1.APIResource{Name: "events", Kind: "Event", Namespaced: true, Verbs: allVerbs}),
		resourceList("apps/v1", metav1.APIResource{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: metav1.Verbs{"list", "watch"}}),
	}}
	res, err := DiscoverDeletable(context.Background(), d, DefaultIgnoredResources())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"configmaps.v1", "namespaces.v1"}
	got := []string{}
	for _, r := range res.Resources.Sorted() {
		got = append(got, GVRString(r.GVR))
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("resources = %v, want %v (events ignored, subresources and non-deletable resources skipped)", got, want)
	}
	if r := res.Resources[schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}]; r.Namespaced || r.Kind != "Namespace" {
		t.Errorf("namespaces = %+v", r)
	}
}

// TestFailedGroupKeepsItsResources: when discovery of a group fails, the resources already
// watched in that group stay watched; other groups follow discovery.
func TestFailedGroupKeepsItsResources(t *testing.T) {
	d := &fakeDiscoverer{lists: []*metav1.APIResourceList{
		resourceList("v1", metav1.APIResource{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: allVerbs}),
		resourceList("example.com/v1", metav1.APIResource{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: allVerbs}),
	}}
	c := New(Options{Discovery: d, Metrics: NewMetrics(prometheus.NewRegistry())})
	ctx := context.Background()
	c.syncResources(ctx)
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	if _, ok := c.Resources()[widgets]; !ok {
		t.Fatalf("widgets not watched after first discovery")
	}

	// The group now fails discovery; configmaps are still listed.
	d.lists = d.lists[:1]
	d.err = &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{
		{Group: "example.com", Version: "v1"}: errors.New("service unavailable"),
	}}
	c.syncResources(ctx)
	if _, ok := c.Resources()[widgets]; !ok {
		t.Errorf("widgets dropped while its group failed discovery")
	}

	// Total failure: nothing changes.
	d.lists, d.err = nil, errors.New("connection refused")
	c.syncResources(ctx)
	if n := len(c.Resources()); n != 2 {
		t.Errorf("after a failed discovery round %d resources are watched, want 2", n)
	}

	// The group recovers without widgets (CRD deleted): it is dropped.
	d.lists = []*metav1.APIResourceList{resourceList("v1", metav1.APIResource{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: allVerbs})}
	d.err = nil
	c.syncResources(ctx)
	if _, ok := c.Resources()[widgets]; ok {
		t.Errorf("widgets still watched after its group recovered without it")
	}
}

// countingMapper counts Resets.
type countingMapper struct {
	meta.RESTMapper
	resets int
}

func (m *countingMapper) Reset() { m.resets++ }

// TestRESTMapperRefreshedEveryRound: the REST mapper is reset on every successful discovery
// round, also when the set of resources did not change (a kind can gain a version or change
// scope without that), and not when discovery fails as a whole.
func TestRESTMapperRefreshedEveryRound(t *testing.T) {
	d := &fakeDiscoverer{lists: []*metav1.APIResourceList{
		resourceList("v1", metav1.APIResource{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: allVerbs}),
	}}
	m := &countingMapper{}
	c := New(Options{Discovery: d, Mapper: m, Metrics: NewMetrics(prometheus.NewRegistry())})
	ctx := context.Background()
	for range 3 {
		c.syncResources(ctx)
	}
	if m.resets != 3 {
		t.Errorf("%d resets in 3 unchanged rounds, want 3", m.resets)
	}
	d.lists, d.err = nil, errors.New("connection refused")
	c.syncResources(ctx)
	if m.resets != 3 {
		t.Errorf("a failed round reset the mapper (%d resets)", m.resets)
	}
}

// TestIgnoredResourceKeptUntilFinished (issue 32.2): a resource the policy comes to ignore stays
// watched while cascade has work on its objects (a default-propagation stamp to lift, a GC
// finalizer to finish on an object being deleted): what it stopped watching it could never
// finish, and a stamped finalizer would then hold the object's deletion for ever. Once the
// stamp is lifted and the deletion finished, the next round stops the watch. A resource ignored
// with nothing left is stopped at once.
func TestIgnoredResourceKeptUntilFinished(t *testing.T) {
	d := &fakeDiscoverer{lists: []*metav1.APIResourceList{
		resourceList("v1", metav1.APIResource{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: allVerbs}),
		resourceList("example.com/v1",
			metav1.APIResource{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: allVerbs},
			metav1.APIResource{Name: "gizmos", Kind: "Gizmo", Namespaced: true, Verbs: allVerbs}),
	}}
	pol := compiledPolicy(t, "rules: []\n")
	c := New(Options{Discovery: d, Metrics: NewMetrics(prometheus.NewRegistry()), Policy: func() *policy.Compiled { return pol }})
	ctx := context.Background()
	c.syncResources(ctx)
	widgetsGVR := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gizmosGVR := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	watched := func(gvr schema.GroupVersionResource) bool { _, ok := c.Resources()[gvr]; return ok }

	stamped := widgetObj("stamped", "u-stamped")
	stamped.Finalizers, stamped.Stamp = graph.FinalizerOrphan, graph.FinalizerOrphan
	deleting := graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Gizmo", Namespace: "ns", Name: "g", UID: "u-g"}, ResourceVersion: "3",
		Deleting: true, Finalizers: graph.FinalizerForeground}
	observe(c, stamped, deleting)

	pol = compiledPolicy(t, "ignoredResources: [widgets.example.com, gizmos.example.com, configmaps]\n")
	c.syncResources(ctx)
	if !watched(widgetsGVR) || !watched(gizmosGVR) {
		t.Fatalf("ignored with work left: widgets watched %v, gizmos watched %v; want both kept", watched(widgetsGVR), watched(gizmosGVR))
	}
	if watched(cmGVR) {
		t.Error("configmaps, ignored with nothing left, still watched")
	}

	// The stamping pass lifted the stamp (and the finalizer it records); the gizmo still waits.
	unstamped := widgetObj("stamped", "u-stamped")
	observe(c, unstamped)
	c.syncResources(ctx)
	if watched(widgetsGVR) || !watched(gizmosGVR) {
		t.Errorf("after the unstamp: widgets watched %v, gizmos watched %v; want false, true", watched(widgetsGVR), watched(gizmosGVR))
	}
	c.apply(graph.Event{Type: graph.EventDeleted, Object: deleting})
	c.syncResources(ctx)
	if watched(gizmosGVR) {
		t.Error("gizmos still watched after its deletion finished")
	}
}

// TestMembersShareNoPerResourceSeries: two fleet members on one set of metrics: neither sets
// cascade_resource_watched (one's round would delete the other's series, and their number
// would follow what tenants serve), and a member's failed groups are counted under
// group_version="fleet-member", whatever groups it serves; the single cluster's are its own.
func TestMembersShareNoPerResourceSeries(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	failing := func(groups ...string) *fakeDiscoverer {
		failed := map[schema.GroupVersion]error{}
		for _, g := range groups {
			failed[schema.GroupVersion{Group: g, Version: "v1"}] = errors.New("service unavailable")
		}
		return &fakeDiscoverer{
			lists: []*metav1.APIResourceList{resourceList("v1", metav1.APIResource{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: allVerbs})},
			err:   &discovery.ErrGroupDiscoveryFailed{Groups: failed},
		}
	}
	ctx := context.Background()
	for i, member := range []string{"a", "b"} {
		c := New(Options{Member: member, Discovery: failing(fmt.Sprintf("tenant-%d-1.example.com", i), fmt.Sprintf("tenant-%d-2.example.com", i)), Metrics: m})
		c.syncResources(ctx)
	}
	if n := testutil.CollectAndCount(m.ResourceWatched); n != 0 {
		t.Errorf("cascade_resource_watched has %d series from fleet members, want none", n)
	}
	if n := testutil.CollectAndCount(m.DiscoveryErrors); n != 1 {
		t.Errorf("discovery_errors_total has %d series from two members failing four groups, want 1", n)
	}
	if v := testutil.ToFloat64(m.DiscoveryErrors.WithLabelValues(memberGroupVersion)); v != 4 {
		t.Errorf("discovery_errors_total{group_version=fleet-member} = %v, want 4", v)
	}
	single := NewMetrics(prometheus.NewRegistry())
	New(Options{Discovery: failing("x.example.com"), Metrics: single}).syncResources(ctx)
	if testutil.ToFloat64(single.ResourceWatched.WithLabelValues("", "v1", "configmaps")) != 1 || testutil.ToFloat64(single.DiscoveryErrors.WithLabelValues("x.example.com/v1")) != 1 {
		t.Error("the single cluster's per-resource and per-group series are missing")
	}
}
