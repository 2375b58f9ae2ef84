package gc

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
)

// Kinds that are gone (issue 22.4b, apiwatch.go): a reference whose kind has no REST mapping
// names an absent owner when its CRD was seen deleted and a live check finds nothing serving
// the kind; in every other case it is kept and retried, as any reference of an unknown kind.

// scGadgets is a custom resource whose CRD the scenarios delete: never in the REST mapper.
var scGadgets = Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}, Kind: "Gadget", Namespaced: true}

var gadgetKind = schema.GroupKind{Group: "example.com", Kind: "Gadget"}

// fakeLive is liveAPIs with answers set by the test; it counts its rounds.
type fakeLive struct {
	mu         sync.Mutex
	served     map[schema.GroupKind]struct{}
	aggregated map[string]struct{}
	err        error
	rounds     int
	// block, when set, holds every round until it is closed.
	block chan struct{}
}

func (f *fakeLive) check(_ context.Context, groups map[string]struct{}) (map[schema.GroupKind]struct{}, map[string]struct{}, error) {
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rounds++
	served := map[schema.GroupKind]struct{}{}
	for gk := range f.served {
		if _, ok := groups[gk.Group]; ok {
			served[gk] = struct{}{}
		}
	}
	aggregated := map[string]struct{}{}
	for g := range f.aggregated {
		if _, ok := groups[g]; ok {
			aggregated[g] = struct{}{}
		}
	}
	return served, aggregated, f.err
}

// withAPIWatch gives the scenario's controller a CRD watch fed by the test (crdEvent) and a
// live check answered by live, as after a successful discovery round.
func (s *scenario) withAPIWatch(live *fakeLive) {
	s.c.api = newAPIWatch(nil, nil)
	s.c.api.live = live
	s.c.failedGroups.Store(&map[string]struct{}{})
}

func crdUnstructured(r Resource, established bool) *unstructured.Unstructured {
	status := "False"
	if established {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": r.GVR.Resource + "." + r.GVR.Group},
		"spec": map[string]any{
			"group": r.GVR.Group,
			"names": map[string]any{"kind": r.Kind, "plural": r.GVR.Resource},
			"scope": scopeName(r.Namespaced),
		},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": status}}},
	}}
}

// crdDeleted delivers the CRD watch's deletion of r's CRD.
func (s *scenario) crdDeleted(r Resource) {
	s.t.Helper()
	s.Begin("crdDeleted %s", GVRString(r.GVR))
	s.c.api.crdDeleted(crdUnstructured(r, true))
	s.end()
}

// crdCreated delivers the CRD watch's add of r's CRD (a re-creation).
func (s *scenario) crdCreated(r Resource) {
	s.t.Helper()
	s.Begin("crdCreated %s", GVRString(r.GVR))
	s.c.api.crdSeen(crdUnstructured(r, true), true)
	s.end()
}

// gadgetScenario: widget dep names a Gadget g that cascade never observed (gadgets are not
// watched, and g does not exist); the API watch runs over live, and dep is observed.
func gadgetScenario(t *testing.T) (s *scenario, dep *metav1.PartialObjectMetadata, live *fakeLive) {
	t.Helper()
	g := scObj(scGadgets, "g", "u-g", "1")
	dep = scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(g))
	s = newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{dep}})
	live = &fakeLive{}
	s.withAPIWatch(live)
	s.observe(dep)
	return s, dep, live
}

// TestScenarioGoneKindOwnerCollected: a ConfigMap-like dependent names a Gadget cascade never
// observed (the CRD was created and deleted between two discovery rounds); the watch saw the
// Gadget CRD deleted and the live check finds nothing serving the kind: the owner is absent
// and the dependent collected. Before issue 22.4 the claim was retried for ever.
// (e2e: TestCRDDeletedSoonAfterCreation.)
func TestScenarioGoneKindOwnerCollected(t *testing.T) {
	s, _, live := gadgetScenario(t)
	s.processVerifies()
	s.AssertOutcomes("verify u-g: Retry error") // the CRD was not seen deleted yet: kept
	s.AssertActions()
	s.AssertOwnerStates("u-dep", graph.OwnerUnknown)
	if live.rounds != 0 {
		t.Errorf("%d live checks for a kind not seen gone, want 0", live.rounds)
	}

	s.crdDeleted(scGadgets)
	s.retryPending()
	s.processVerifies()
	s.AssertOutcomes("verify u-g: Done")
	s.AssertMetric("cascade_owner_verifications_total", 1, "result", "gone_kind")
	s.AssertOwnerStates("u-dep", graph.OwnerAbsent)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background")
}

// TestScenarioGoneKindObservedOwner: the Gadget owner was observed, then observed deleted (its
// CRD's deletion removed it), and discovery dropped the kind before the dependent was decided:
// the delete was refused while the kind had no REST mapping, and goes once the CRD is seen
// deleted and confirmed gone. A dependent with a live Widget owner only loses the reference.
func TestScenarioGoneKindObservedOwner(t *testing.T) {
	g := scObj(scGadgets, "g", "u-g", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(g))
	w := scObj(scWidgets, "w", "u-w", "1")
	kept := scObj(scWidgets, "kept", "u-kept", "4", gctest.RefTo(g), gctest.RefTo(w))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{dep, w, kept}})
	// Gadgets watched (its objects observed) but no longer mapped: discovery dropped it.
	s.ByKind[scGadgets.GVR.GroupVersion().WithKind(scGadgets.Kind)] = scGadgets.GVR
	done := make(chan struct{})
	close(done)
	m := &monitor{res: scGadgets, store: &graphStore{res: scGadgets, graph: s.c}, cancel: func() {}, done: done}
	m.store.synced.Store(true)
	s.c.monitors.byR[scGadgets.GVR] = m
	s.c.monitors.byGK[gadgetKind] = m
	s.withAPIWatch(&fakeLive{})

	s.observe(g, w, dep, kept)
	s.observeDeleted(g)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Retry error", "delete u-kept: Retry error")
	s.AssertActions()

	s.crdDeleted(scGadgets)
	s.retryPending()
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done", "delete u-kept: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background",
		`PATCH widgets.v1.example.com ns/kept strategic {"metadata":{"uid":"u-kept","resourceVersion":"4","ownerReferences":[{"$patch":"delete","uid":"u-g"}]}}`)
	s.AssertLiveOwners(kept, "u-w")
}

// TestScenarioGoneKindKept: every case where a reference to a kind without REST mapping must
// keep its dependent: what must never be deleted.
func TestScenarioGoneKindKept(t *testing.T) {
	cases := []struct {
		name string
		// prepare sets the world up after the dependent is observed.
		prepare func(s *scenario, live *fakeLive)
	}{
		{"kind no API ever served (no CRD seen deleted)", func(*scenario, *fakeLive) {}},
		{"CRD re-created since (seen by the watch)", func(s *scenario, _ *fakeLive) {
			s.crdDeleted(scGadgets)
			s.crdCreated(scGadgets)
		}},
		{"CRD re-created a moment ago (live check finds it, the watch has not delivered it)", func(s *scenario, live *fakeLive) {
			s.crdDeleted(scGadgets)
			live.served = map[schema.GroupKind]struct{}{gadgetKind: {}}
		}},
		{"an aggregated API serves the group", func(s *scenario, live *fakeLive) {
			s.crdDeleted(scGadgets)
			live.aggregated = map[string]struct{}{"example.com": {}}
		}},
		{"the live check fails", func(s *scenario, live *fakeLive) {
			s.crdDeleted(scGadgets)
			live.err = errors.New("the server is currently unable to handle the request")
		}},
		{"discovery failed for the group", func(s *scenario, _ *fakeLive) {
			s.crdDeleted(scGadgets)
			s.c.failedGroups.Store(&map[string]struct{}{"example.com": {}})
		}},
		{"discovery failed as a whole", func(s *scenario, _ *fakeLive) {
			s.crdDeleted(scGadgets)
			s.c.failedGroups.Store(&map[string]struct{}{"": {}})
		}},
		{"no discovery round yet", func(s *scenario, _ *fakeLive) {
			s.crdDeleted(scGadgets)
			s.c.failedGroups.Store(nil)
		}},
		{"another kind of the group was deleted", func(s *scenario, _ *fakeLive) {
			s.crdDeleted(Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "others"}, Kind: "Other"})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, dep, live := gadgetScenario(t)
			tc.prepare(s, live)
			for range 2 {
				s.processVerifies()
				s.AssertOutcomes("verify u-g: Retry error")
				s.AssertOwnerStates("u-dep", graph.OwnerUnknown)
				s.enqueueDelete("u-dep")
				s.processDeletes()
				s.AssertOutcomes("delete u-dep: Done")
				s.AssertActions()
				s.retryPending()
			}
			s.AssertLiveOwners(dep, "u-g")
			s.AssertMetric("cascade_owner_verifications_total", 0, "result", "gone_kind")
		})
	}
}

// TestScenarioGoneKindClusterScopedDependent (found by the chaos suite): a cluster-scoped
// dependent names an owner of a kind whose CRD was namespaced and is gone. A cluster-scoped
// object with a namespaced owner kind is never collected (in-tree), gone kind or not: kept. Had
// the CRD been cluster-scoped, it is collected.
func TestScenarioGoneKindClusterScopedDependent(t *testing.T) {
	tops := Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "tops"}, Kind: "Top"}
	clusterGadgets := scGadgets
	clusterGadgets.Namespaced = false
	for _, tc := range []struct {
		crd     Resource
		collect bool
	}{{scGadgets, false}, {clusterGadgets, true}} {
		t.Run("gadgets namespaced="+map[bool]string{true: "true", false: "false"}[tc.crd.Namespaced], func(t *testing.T) {
			g := scObj(tc.crd, "g", "u-g", "1")
			dep := scObj(tops, "dep", "u-dep", "3", gctest.RefTo(g))
			s := newScenario(t, scenarioSetup{watched: []Resource{tops}, objects: []runtime.Object{dep}})
			s.withAPIWatch(&fakeLive{})
			s.crdDeleted(tc.crd)
			s.observe(dep)
			s.processVerifies()
			if !tc.collect {
				s.AssertOutcomes("verify u-g: Retry error")
				s.AssertActions()
				s.AssertLiveOwners(dep, "u-g")
				return
			}
			s.AssertOutcomes("verify u-g: Done")
			s.processDeletes()
			s.AssertOutcomes("delete u-dep: Done")
			s.AssertActions("DELETE tops.v1.example.com /dep uid=u-dep rv=3 propagation=Background")
		})
	}
}

// TestLiveRoundsStartAfterTheQuestion: a caller never takes the answer of a live check that
// was already running when it asked (that check may have read the API before the caller's
// view of the dependent was taken); callers that ask while one runs share the next one.
// The callers run in a synctest bubble: synctest.Wait returns once each is blocked (in the
// round's check, or waiting for a round).
func TestLiveRoundsStartAfterTheQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		live := &fakeLive{block: make(chan struct{})}
		w := newAPIWatch(nil, nil)
		w.live = live
		w.crdDeleted(crdUnstructured(scGadgets, true))

		first := make(chan bool, 1)
		go func() {
			gone, _ := w.confirmGone(context.Background(), gadgetKind)
			first <- gone
		}()
		// Wait until the first round runs (it is blocked in check).
		synctest.Wait()
		w.rounds.mu.Lock()
		running := w.rounds.running != nil
		w.rounds.mu.Unlock()
		if !running {
			t.Fatal("the first round is not running")
		}
		// The kind is served again (a CRD re-created) while the first round runs; callers asking now
		// must see a round that starts after this.
		live.mu.Lock()
		live.served = map[schema.GroupKind]struct{}{gadgetKind: {}}
		live.mu.Unlock()
		later := make(chan bool, 3)
		for range 3 {
			go func() {
				gone, _ := w.confirmGone(context.Background(), gadgetKind)
				later <- gone
			}()
		}
		synctest.Wait() // every caller waits for the next round
		w.rounds.mu.Lock()
		next := w.rounds.next != nil
		w.rounds.mu.Unlock()
		if !next {
			t.Fatal("no next round asked for")
		}
		close(live.block)
		<-first // the first round's answer, whatever it is, is the first caller's
		for range 3 {
			if <-later {
				t.Errorf("a caller that asked while the kind was served again was told it is gone")
			}
		}
		if live.rounds > 3 {
			t.Errorf("%d live checks for 4 callers, want the 3 later ones to share rounds", live.rounds)
		}
	})
}

// askedRound reports (and takes) a pending request of w for a discovery round.
func askedRound(w *apiWatch) bool {
	select {
	case <-w.rediscover:
		return true
	default:
		return false
	}
}

// TestCRDStoreLists: the CRDs' reflector store. Its first list asks for no discovery round and
// marks nothing gone; a relist asks for one, and a CRD it no longer holds was deleted while the
// watch was down: its kind is gone (as it was last seen: namespaced), unless another CRD
// serves it.
func TestCRDStoreLists(t *testing.T) {
	w := newAPIWatch(nil, nil)
	s := &crdStore{w: w}
	kicked := func() bool { return askedRound(w) }
	if err := s.Replace([]any{crdUnstructured(scGadgets, true), crdUnstructured(scGizmos, true)}, "1"); err != nil {
		t.Fatal(err)
	}
	if kicked() || w.unmet(ResourceSet{}) {
		t.Fatal("the first list asked for a discovery round, or expects its CRDs in discovery")
	}
	if _, g := w.seenGone(gadgetKind); g {
		t.Fatal("a listed CRD's kind is gone")
	}
	if err := s.Replace([]any{crdUnstructured(scGizmos, true)}, "5"); err != nil {
		t.Fatal(err)
	}
	if !kicked() {
		t.Error("a relist did not ask for a discovery round")
	}
	if namespaced, g := w.seenGone(gadgetKind); !g || !namespaced {
		t.Errorf("the CRD the relist no longer holds: gone %t, namespaced %t; want gone, namespaced", g, namespaced)
	}
	if _, g := w.seenGone(schema.GroupKind{Group: scGizmos.GVR.Group, Kind: scGizmos.Kind}); g {
		t.Error("a CRD the relist holds is gone")
	}
	if err := s.Add(crdUnstructured(scGadgets, true)); err != nil {
		t.Fatal(err)
	}
	if _, g := w.seenGone(gadgetKind); g || !kicked() {
		t.Error("a re-created CRD's kind is still gone, or asked for no discovery round")
	}
}

// TestAPIWatchCRDs: the CRD watch's bookkeeping: a change asks for a discovery round (not the
// initial list), an established CRD is expected in discovery until found, and a deleted CRD's
// kind is gone unless another CRD serves it.
func TestAPIWatchCRDs(t *testing.T) {
	w := newAPIWatch(nil, nil)
	kicked := func() bool { return askedRound(w) }
	gone := func() bool {
		_, g := w.seenGone(gadgetKind)
		return g
	}
	w.crdSeen(crdUnstructured(scGizmos, true), false) // initial list
	if kicked() {
		t.Errorf("the initial list asked for a discovery round")
	}
	if w.unmet(ResourceSet{}) {
		t.Errorf("a CRD of the initial list is expected in discovery")
	}
	w.crdSeen(crdUnstructured(scGadgets, false), true)
	if !kicked() {
		t.Errorf("a new CRD did not ask for a discovery round")
	}
	if w.unmet(ResourceSet{}) {
		t.Errorf("a CRD not established yet is expected in discovery")
	}
	w.crdSeen(crdUnstructured(scGadgets, true), true)
	if !kicked() || !w.unmet(ResourceSet{}) {
		t.Errorf("an established CRD is not expected in discovery")
	}
	if w.unmet(ResourceSet{scGadgets.GVR: scGadgets}) {
		t.Errorf("a discovered CRD is still expected")
	}
	if gone() {
		t.Errorf("a live CRD's kind is gone")
	}
	// A second CRD claiming the same kind (its names are not accepted) keeps it served.
	dup := crdUnstructured(scGadgets, false)
	dup.SetName("gadgetz.example.com")
	w.crdSeen(dup, true)
	w.crdDeleted(crdUnstructured(scGadgets, true))
	if !kicked() {
		t.Errorf("a deleted CRD did not ask for a discovery round")
	}
	if gone() {
		t.Errorf("a kind another CRD claims is gone")
	}
	w.crdDeleted(cacheTombstone(dup))
	if !gone() {
		t.Errorf("a deleted CRD's kind is not gone")
	}
	w.crdSeen(crdUnstructured(scGadgets, false), true)
	if gone() {
		t.Errorf("a re-created CRD's kind is still gone")
	}
}

func scopeName(namespaced bool) string {
	if namespaced {
		return "Namespaced"
	}
	return "Cluster"
}

// cacheTombstone is how an informer delivers a deletion it missed (a relist without the object).
func cacheTombstone(u *unstructured.Unstructured) cache.DeletedFinalStateUnknown {
	return cache.DeletedFinalStateUnknown{Key: u.GetName(), Obj: u}
}

// TestLiveClientCheck: the live check reads CRDs of the groups asked about (by name,
// plural.group) and the APIServices: a kind served by a CRD of another group, or a local
// APIService (built-in, or registered for CRDs), serves nothing asked about.
func TestLiveClientCheck(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	crdMeta := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
		}
	}
	other := Resource{GVR: schema.GroupVersionResource{Group: "other.example.com", Version: "v1", Resource: "gadgets"}, Kind: "Gadget"}
	meta := metadatafake.NewSimpleMetadataClient(scheme, crdMeta("gizmos.example.com"), crdMeta("gadgets.other.example.com"))
	apiService := func(name, group string, service bool) *unstructured.Unstructured {
		spec := map[string]any{"group": group, "version": "v1"}
		if service {
			spec["service"] = map[string]any{"namespace": "ns", "name": "api"}
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": name}, "spec": spec,
		}}
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdGVR: "CustomResourceDefinitionList", apiServiceGVR: "APIServiceList"},
		crdUnstructured(scGizmos, true), crdUnstructured(other, true),
		apiService("v1.example.com", "example.com", false), apiService("v2.agg.example.com", "agg.example.com", true))
	served, aggregated, err := liveClient{dyn: dyn, meta: meta}.check(context.Background(),
		map[string]struct{}{"example.com": {}, "agg.example.com": {}})
	if err != nil {
		t.Fatal(err)
	}
	if len(served) != 1 {
		t.Errorf("served %v, want Gizmo.example.com only", served)
	}
	if _, ok := served[schema.GroupKind{Group: "example.com", Kind: "Gizmo"}]; !ok {
		t.Errorf("served %v, want Gizmo.example.com", served)
	}
	if _, ok := aggregated["agg.example.com"]; !ok || len(aggregated) != 1 {
		t.Errorf("aggregated %v, want agg.example.com only", aggregated)
	}
}
