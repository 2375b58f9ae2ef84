package finalizers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/internal/work/worktest"
)

// fakeView is a gc.View over plain maps; the test edits it between steps. Every method is
// safe for concurrent use, as the real one is.
type fakeView struct {
	mu        sync.Mutex
	nodes     map[types.UID]graph.NodeView
	deps      map[types.UID][][]graph.Ref // successive answers of Dependents; the last repeats
	blocking  map[types.UID]int
	synced    bool
	depsCalls map[types.UID]int
	owners    map[types.UID][]graph.OwnerView
	unsynced  map[string]bool // apiVersion/kind
}

func newFakeView() *fakeView {
	return &fakeView{
		nodes: map[types.UID]graph.NodeView{}, deps: map[types.UID][][]graph.Ref{}, blocking: map[types.UID]int{},
		synced: true, depsCalls: map[types.UID]int{}, owners: map[types.UID][]graph.OwnerView{}, unsynced: map[string]bool{},
	}
}

func (v *fakeView) Node(uid types.UID) (graph.NodeView, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, ok := v.nodes[uid]
	return n, ok
}
func (v *fakeView) Owners(uid types.UID) []graph.OwnerView {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.owners[uid])
}
func (v *fakeView) Unsynced() []gc.Unsynced {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []gc.Unsynced
	for k, unsynced := range v.unsynced {
		if unsynced {
			i := strings.LastIndex(k, "/")
			res, _ := testResolve(k[:i], k[i+1:])
			out = append(out, gc.Unsynced{Resource: res})
		}
	}
	return out
}
func (v *fakeView) UnsyncedKind(apiVersion, kind string) (gc.Resource, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	res, _ := testResolve(apiVersion, kind)
	return res, v.unsynced[apiVersion+"/"+kind]
}
func (v *fakeView) Dependents(uid types.UID) []graph.Ref {
	v.mu.Lock()
	defer v.mu.Unlock()
	answers := v.deps[uid]
	if len(answers) == 0 {
		return nil
	}
	i := min(v.depsCalls[uid], len(answers)-1)
	v.depsCalls[uid]++
	return slices.Clone(answers[i])
}
func (v *fakeView) BlockingDependents(uid types.UID) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.blocking[uid]
}
func (v *fakeView) DeletingOwners() []types.UID {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []types.UID
	for uid, n := range v.nodes {
		if !PlanOwner(n, true).None() {
			out = append(out, uid)
		}
	}
	return out
}
func (v *fakeView) ResourceFor(apiVersion, kind string) (gc.Resource, bool) {
	return testResolve(apiVersion, kind)
}
func (v *fakeView) Synced() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.synced
}

func (v *fakeView) set(f func(v *fakeView)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f(v)
}

var _ gc.View = (*fakeView)(nil)

// --- objects ---

func widget(name string, uid types.UID, rv string, deleting bool, finalizers []string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	m := clienttest.Widget("ns", name, uid, rv, owners...)
	if deleting {
		return clienttest.Deleting(m, finalizers...)
	}
	m.Finalizers = finalizers
	return m
}

func refTo(name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: name, UID: uid}
}

func wref(name string, uid types.UID) graph.Ref {
	return graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: name, UID: uid}
}

// ownerNode is the graph's view of an owner being deleted with finalizers f.
func ownerNode(name string, uid types.UID, f graph.Finalizers) graph.NodeView {
	return graph.NodeView{Ref: wref(name, uid), ResourceVersion: "5", Deleting: true, Finalizers: f}
}

var newFakeClient = clienttest.NewFake

// actions renders the fake's actions, patches with type and body, without the resource and
// namespace every test here shares.
func actions(c *metadatafake.FakeMetadataClient) []string {
	out := clienttest.Actions(c)
	for i, a := range out {
		verb, rest, _ := strings.Cut(a, " example.com/v1, Resource=widgets ns=ns")
		out[i] = verb + strings.Replace(rest, " name=", " ", 1)
	}
	return out
}

func live(t *testing.T, c *metadatafake.FakeMetadataClient, name string) *metav1.PartialObjectMetadata {
	t.Helper()
	m, err := clienttest.Live(c, widgetsGVR, "ns", name)
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return m
}

func liveOwners(t *testing.T, c *metadatafake.FakeMetadataClient, name string) []types.UID {
	var uids []types.UID
	for _, r := range live(t, c, name).OwnerReferences {
		uids = append(uids, r.UID)
	}
	return uids
}

// counter reads the value of one counter.
func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// newTestProcessor returns a processor over view with its patch workers running until the
// test ends.
func newTestProcessor(t *testing.T, view gc.View, c *metadatafake.FakeMetadataClient, opts Options) *Processor {
	t.Helper()
	if opts.PatchWorkers == 0 {
		opts.PatchWorkers = 3
	}
	opts.Client = client.New(c)
	p := New(opts)
	p.view = view // as Run does
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range p.opts.PatchWorkers {
		wg.Go(func() { p.runPatcher(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		p.queue.ShutDown()
	})
	return p
}

func smpDelete(dep, dUID, owner types.UID) string {
	return fmt.Sprintf(`patch %s application/strategic-merge-patch+json {"metadata":{"uid":%q,"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, dep, dUID, owner)
}

// --- orphan ---

// TestOrphan: every dependent loses its reference to the owner (and only that one), then the
// orphan finalizer goes and example.com/keep stays. No dependent is ever deleted.
func TestOrphan(t *testing.T) {
	other := refTo("other", "u-other")
	fake := newFakeClient(
		widget("owner", "u-owner", "5", true, []string{"example.com/keep", metav1.FinalizerOrphanDependents}),
		widget("d1", "u-d1", "2", false, nil, refTo("owner", "u-owner")),
		widget("d2", "u-d2", "2", false, nil, other, refTo("owner", "u-owner")),
		widget("d3", "u-d3", "2", false, nil, refTo("owner", "u-owner")),
	)
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	view.deps["u-owner"] = [][]graph.Ref{{wref("d1", "u-d1"), wref("d2", "u-d2"), wref("d3", "u-d3")}}
	reg := prometheus.NewRegistry()
	p := newTestProcessor(t, view, fake, Options{Metrics: NewMetrics(reg)})

	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, want done", got)
	}
	got := actions(fake)
	if len(got) != 5 {
		t.Fatalf("actions = %q, want 3 dependent patches, a GET and the finalizer patch", got)
	}
	patches := slices.Clone(got[:3])
	sort.Strings(patches)
	want := []string{smpDelete("d1", "u-d1", "u-owner"), smpDelete("d2", "u-d2", "u-owner"), smpDelete("d3", "u-d3", "u-owner")}
	if !slices.Equal(patches, want) {
		t.Errorf("dependent patches:\n%q\nwant\n%q", patches, want)
	}
	wantTail := []string{
		"get owner",
		`patch owner application/merge-patch+json {"metadata":{"resourceVersion":"5","finalizers":["example.com/keep"]}}`,
	}
	if !slices.Equal(got[3:], wantTail) {
		t.Errorf("finalizer removal:\n%q\nwant\n%q", got[3:], wantTail)
	}
	for _, d := range []string{"d1", "d3"} {
		if o := liveOwners(t, fake, d); len(o) != 0 {
			t.Errorf("%s still references %v", d, o)
		}
	}
	if o := liveOwners(t, fake, "d2"); !slices.Equal(o, []types.UID{"u-other"}) {
		t.Errorf("d2 owners = %v, want only its other owner", o)
	}
	if f := live(t, fake, "owner").Finalizers; !slices.Equal(f, []string{"example.com/keep"}) {
		t.Errorf("owner finalizers = %q, want only example.com/keep", f)
	}
	if v := counter(t, p.opts.Metrics.OrphanedDependents); v != 3 {
		t.Errorf("orphaned_dependents_total = %v, want 3", v)
	}
	if v := counter(t, p.opts.Metrics.FinalizersRemoved.WithLabelValues(metav1.FinalizerOrphanDependents)); v != 1 {
		t.Errorf("finalizers_removed_total{orphan} = %v, want 1", v)
	}
}

// TestOrphanFailedPatchKeepsFinalizer: if one dependent cannot be patched, the finalizer stays
// (the owner would be deleted with a dependent still referencing it) and the owner is retried.
func TestOrphanFailedPatchKeepsFinalizer(t *testing.T) {
	fake := newFakeClient(
		widget("owner", "u-owner", "5", true, []string{metav1.FinalizerOrphanDependents}),
		widget("d1", "u-d1", "2", false, nil, refTo("owner", "u-owner")),
		widget("d2", "u-d2", "2", false, nil, refTo("owner", "u-owner")),
	)
	fake.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.PatchAction).GetName() == "d2" {
			return true, nil, apierrors.NewInternalError(fmt.Errorf("boom"))
		}
		return false, nil, nil
	})
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	view.deps["u-owner"] = [][]graph.Ref{{wref("d1", "u-d1"), wref("d2", "u-d2")}}
	p := newTestProcessor(t, view, fake, Options{})

	if got, _ := p.process(context.Background(), "u-owner"); got != work.Retry {
		t.Fatalf("process() = %v, want backoff", got)
	}
	for _, a := range actions(fake) {
		if strings.HasPrefix(a, "patch owner") || strings.HasPrefix(a, "get owner") {
			t.Errorf("the owner was touched although a dependent failed: %s", a)
		}
	}
	if f := live(t, fake, "owner").Finalizers; !slices.Equal(f, []string{metav1.FinalizerOrphanDependents}) {
		t.Errorf("owner finalizers = %q, want orphan kept", f)
	}

	// The next pass patches only what is left: d1 is not patched again.
	fake.ClearActions()
	fake.ReactionChain = fake.ReactionChain[1:]
	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("second process() = %v, want done", got)
	}
	got := actions(fake)
	want := []string{
		smpDelete("d2", "u-d2", "u-owner"),
		"get owner",
		`patch owner application/merge-patch+json {"metadata":{"resourceVersion":"5","finalizers":[]}}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("second pass actions:\n%q\nwant\n%q", got, want)
	}
}

// fakeRecords is a Recorder that notes what the client had done when each owner was recorded.
type fakeRecords struct {
	fake    *metadatafake.FakeMetadataClient
	err     error
	records []graph.Ref
	before  [][]string // the client's actions at each Record
}

func (r *fakeRecords) Record(_ context.Context, owner graph.Ref) error {
	r.records = append(r.records, owner)
	r.before = append(r.before, actions(r.fake))
	return r.err
}

// TestOrphanRecordsBeforeRemovingFinalizer: the owner is recorded after its dependents lost
// their references and before the finalizer goes; a failed record keeps the finalizer (retried).
func TestOrphanRecordsBeforeRemovingFinalizer(t *testing.T) {
	fake := newFakeClient(
		widget("owner", "u-owner", "5", true, []string{metav1.FinalizerOrphanDependents}),
		widget("d1", "u-d1", "2", false, nil, refTo("owner", "u-owner")),
	)
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	view.deps["u-owner"] = [][]graph.Ref{{wref("d1", "u-d1")}}
	rec := &fakeRecords{fake: fake, err: errors.New("configmaps is forbidden")}
	p := newTestProcessor(t, view, fake, Options{Records: rec})

	if got, err := p.process(context.Background(), "u-owner"); got != work.Retry || err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("process() with the record failing = %v, %v; want a retry with the error", got, err)
	}
	if f := live(t, fake, "owner").Finalizers; !slices.Equal(f, []string{metav1.FinalizerOrphanDependents}) {
		t.Errorf("owner finalizers = %q after a failed record, want orphan kept", f)
	}
	if before := rec.before[0]; !slices.Equal(before, []string{smpDelete("d1", "u-d1", "u-owner")}) {
		t.Errorf("recorded after %q; want after the dependent's patch and before the owner was touched", before)
	}
	rec.err = nil
	fake.ClearActions()
	rec.fake = fake
	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, %v; want done", got, err)
	}
	if f := live(t, fake, "owner").Finalizers; len(f) != 0 {
		t.Errorf("owner finalizers = %q, want none", f)
	}
	want := view.nodes["u-owner"].Ref
	if len(rec.records) != 2 || rec.records[1] != want {
		t.Fatalf("records = %v, want the owner %v twice (failed, then written)", rec.records, want)
	}
	if before := rec.before[1]; len(before) != 0 {
		t.Errorf("second pass: recorded after %q; want before the owner was touched", before)
	}
}

// TestOrphanDependentsLearnedDuringPass: dependents that reach the graph while the owner is
// being orphaned are orphaned in the same pass, before the finalizer goes.
func TestOrphanDependentsLearnedDuringPass(t *testing.T) {
	fake := newFakeClient(
		widget("owner", "u-owner", "5", true, []string{metav1.FinalizerOrphanDependents}),
		widget("d1", "u-d1", "2", false, nil, refTo("owner", "u-owner")),
		widget("late", "u-late", "2", false, nil, refTo("owner", "u-owner")),
	)
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	// The second read of the dependents finds a new one; d1's patch event has not arrived.
	view.deps["u-owner"] = [][]graph.Ref{{wref("d1", "u-d1")}, {wref("d1", "u-d1"), wref("late", "u-late")}}
	p := newTestProcessor(t, view, fake, Options{})

	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, want done", got)
	}
	want := []string{
		smpDelete("d1", "u-d1", "u-owner"),
		smpDelete("late", "u-late", "u-owner"),
		"get owner",
		`patch owner application/merge-patch+json {"metadata":{"resourceVersion":"5","finalizers":[]}}`,
	}
	if got := actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
	if o := liveOwners(t, fake, "late"); len(o) != 0 {
		t.Errorf("late dependent still references %v", o)
	}
}

// TestOrphanUnsupportedSMP: a custom resource dependent (415 on strategic merge patch) is
// orphaned with a JSON merge patch at its resourceVersion that keeps its other references.
func TestOrphanUnsupportedSMP(t *testing.T) {
	fake := newFakeClient(
		widget("owner", "u-owner", "5", true, []string{metav1.FinalizerOrphanDependents}),
		widget("d1", "u-d1", "2", false, nil, refTo("other", "u-other"), refTo("owner", "u-owner")),
	)
	fake.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.PatchAction).GetPatchType() == types.StrategicMergePatchType {
			return true, nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", widgetsGVR.GroupResource(), "d1", "", 0, false)
		}
		return false, nil, nil
	})
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	view.deps["u-owner"] = [][]graph.Ref{{wref("d1", "u-d1")}}
	p := newTestProcessor(t, view, fake, Options{})

	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, want done", got)
	}
	want := []string{
		smpDelete("d1", "u-d1", "u-owner"),
		"get d1",
		`patch d1 application/merge-patch+json {"metadata":{"resourceVersion":"2","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"other","uid":"u-other"}]}}`,
		"get owner",
		`patch owner application/merge-patch+json {"metadata":{"resourceVersion":"5","finalizers":[]}}`,
	}
	if got := actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
}

// TestOrphanManyDependentsBoundedConcurrency: 200 dependents are patched by the fixed pool,
// never more at once than PatchWorkers.
func TestOrphanManyDependentsBoundedConcurrency(t *testing.T) {
	objs := []runtime.Object{widget("owner", "u-owner", "5", true, []string{metav1.FinalizerOrphanDependents})}
	var deps []graph.Ref
	for i := range 200 {
		name, uid := fmt.Sprintf("d%d", i), types.UID(fmt.Sprintf("u-d%d", i))
		objs = append(objs, widget(name, uid, "2", false, nil, refTo("owner", "u-owner")))
		deps = append(deps, wref(name, uid))
	}
	fake := newFakeClient(objs...)
	var mu sync.Mutex
	inFlight, peak := 0, 0
	fake.PrependReactor("patch", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		time.Sleep(100 * time.Microsecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return false, nil, nil
	})
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	view.deps["u-owner"] = [][]graph.Ref{deps}
	p := newTestProcessor(t, view, fake, Options{PatchWorkers: 4})

	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, want done", got)
	}
	if peak > 4 {
		t.Errorf("%d patches in flight at once, want at most 4", peak)
	}
	for i := range 200 {
		if o := liveOwners(t, fake, fmt.Sprintf("d%d", i)); len(o) != 0 {
			t.Fatalf("d%d still references %v", i, o)
		}
	}
}

// --- finalizer removal ---

// TestRemoveFinalizerRetriesConflict: a 409 on the finalizer patch (someone changed the owner)
// leads to a fresh GET and a patch at the new resourceVersion that keeps the new finalizer too.
func TestRemoveFinalizerRetriesConflict(t *testing.T) {
	fake := newFakeClient(widget("owner", "u-owner", "5", true, []string{metav1.FinalizerOrphanDependents}))
	conflicts := 0
	fake.PrependReactor("patch", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		// Meanwhile someone added a finalizer.
		_ = fake.Tracker().Update(widgetsGVR, widget("owner", "u-owner", "6", true, []string{"example.com/late", metav1.FinalizerOrphanDependents}), "ns")
		return true, nil, apierrors.NewConflict(widgetsGVR.GroupResource(), "owner", fmt.Errorf("changed"))
	})
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	p := newTestProcessor(t, view, fake, Options{})

	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, want done", got)
	}
	want := []string{
		"get owner",
		`patch owner application/merge-patch+json {"metadata":{"resourceVersion":"5","finalizers":[]}}`,
		"get owner",
		`patch owner application/merge-patch+json {"metadata":{"resourceVersion":"6","finalizers":["example.com/late"]}}`,
	}
	if got := actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
}

// TestRemoveFinalizerNothingToDo: the owner is gone, replaced by another object of the same
// name, or its finalizer is already gone: a GET and no patch.
func TestRemoveFinalizerNothingToDo(t *testing.T) {
	tests := []struct {
		name string
		objs []runtime.Object
	}{
		{name: "owner gone"},
		{name: "same name, another object", objs: []runtime.Object{widget("owner", "u-new", "9", true, []string{metav1.FinalizerOrphanDependents})}},
		{name: "finalizer already removed", objs: []runtime.Object{widget("owner", "u-owner", "9", true, []string{"example.com/keep"})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeClient(tt.objs...)
			view := newFakeView()
			view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
			p := newTestProcessor(t, view, fake, Options{})
			if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
				t.Fatalf("process() = %v, want done", got)
			}
			if got := actions(fake); !slices.Equal(got, []string{"get owner"}) {
				t.Errorf("actions = %q, want only the GET", got)
			}
		})
	}
}

// --- foreground ---

// TestForeground: while a dependent blocks, the owner keeps its finalizer and no API call is
// made; once none blocks, only foregroundDeletion is removed.
func TestForeground(t *testing.T) {
	fake := newFakeClient(widget("owner", "u-owner", "5", true, []string{metav1.FinalizerDeleteDependents, "example.com/keep"}))
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerForeground)
	view.deps["u-owner"] = [][]graph.Ref{{wref("d1", "u-d1"), wref("d2", "u-d2")}}
	view.blocking["u-owner"] = 1
	reg := prometheus.NewRegistry()
	p := newTestProcessor(t, view, fake, Options{Metrics: NewMetrics(reg)})

	for range 3 {
		if got, _ := p.process(context.Background(), "u-owner"); got != work.Retry {
			t.Fatalf("process() with a blocking dependent = %v, want backoff", got)
		}
	}
	if got := actions(fake); len(got) != 0 {
		t.Errorf("actions while blocked = %q, want none", got)
	}
	view.set(func(v *fakeView) { v.blocking["u-owner"] = 0 })
	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, want done", got)
	}
	want := []string{
		"get owner",
		`patch owner application/merge-patch+json {"metadata":{"resourceVersion":"5","finalizers":["example.com/keep"]}}`,
	}
	if got := actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
	if v := counter(t, p.opts.Metrics.FinalizersRemoved.WithLabelValues(metav1.FinalizerDeleteDependents)); v != 1 {
		t.Errorf("finalizers_removed_total{foregroundDeletion} = %v, want 1", v)
	}
}

// TestForegroundBlockedByUnsyncedResource: a foreground owner waiting on a blocking dependent
// whose resource cannot be listed keeps its finalizer (never removed early) and says so once:
// a Warning Event naming the resource, and the counter. A non-blocking dependent of the same
// resource and a blocking one of a synced resource are not reported.
func TestForegroundBlockedByUnsyncedResource(t *testing.T) {
	fake := newFakeClient(widget("owner", "u-owner", "5", true, []string{metav1.FinalizerDeleteDependents}))
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerForeground)
	gizmo := func(name string, uid types.UID) graph.Ref {
		return graph.Ref{APIVersion: "example.com/v1", Kind: "Gizmo", Name: name, UID: uid}
	}
	view.deps["u-owner"] = [][]graph.Ref{{gizmo("g-block", "u-g1"), gizmo("g-free", "u-g2"), wref("w-block", "u-w1")}}
	ref := func(block bool) []graph.OwnerView {
		return []graph.OwnerView{{OwnerRef: graph.OwnerRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "owner", UID: "u-owner", BlockOwnerDeletion: block}}}
	}
	view.owners["u-g1"], view.owners["u-g2"], view.owners["u-w1"] = ref(true), ref(false), ref(true)
	view.blocking["u-owner"] = 2
	view.unsynced["example.com/v1/Gizmo"] = true
	rec := record.NewFakeRecorder(10)
	p := newTestProcessor(t, view, fake, Options{Metrics: NewMetrics(prometheus.NewRegistry()), Recorder: rec})

	for range 3 {
		if got, err := p.process(context.Background(), "u-owner"); got != work.Retry || err != nil {
			t.Fatalf("process() = %v, %v; want Retry while a dependent blocks", got, err)
		}
	}
	if got := actions(fake); len(got) != 0 {
		t.Errorf("actions while blocked = %q, want none: the finalizer must stay", got)
	}
	close(rec.Events)
	var events []string
	for e := range rec.Events {
		events = append(events, e)
	}
	want := "Warning " + EventReasonBlockedByUnsynced + " Waiting for dependent /g-block of resource gizmos.v1.example.com, which cascade cannot list or watch; foreground deletion finishes once it syncs"
	if len(events) != 1 || events[0] != want {
		t.Errorf("events = %q, want exactly\n%q", events, want)
	}
	if v := counter(t, p.opts.Metrics.BlockedByUnsynced.WithLabelValues("gizmos.v1.example.com")); v != 1 {
		t.Errorf("foreground_blocked_by_unsynced_total = %v, want 1", v)
	}
}

// --- gating ---

// TestNotSyncedWaits: before the graph has synced nothing is done: dependents not listed yet
// would be missed by orphaning and would not count as blocking.
func TestNotSyncedWaits(t *testing.T) {
	fake := newFakeClient(widget("owner", "u-owner", "5", true, []string{metav1.FinalizerDeleteDependents}))
	view := newFakeView()
	view.synced = false
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerForeground)
	p := newTestProcessor(t, view, fake, Options{})
	if got, err := p.process(context.Background(), "u-owner"); got != work.WaitForSync || err != nil {
		t.Fatalf("process() = %v, want waitSync", got)
	}
	if got := actions(fake); len(got) != 0 {
		t.Errorf("actions before sync = %q", got)
	}
}

// TestNothingToDo: owners the graph does not show as being deleted with a GC finalizer are
// left alone, including a live object carrying the orphan finalizer as a default policy.
func TestNothingToDo(t *testing.T) {
	fake := newFakeClient(widget("live", "u-live", "5", false, []string{metav1.FinalizerOrphanDependents}))
	view := newFakeView()
	view.nodes["u-live"] = graph.NodeView{Ref: wref("live", "u-live"), Finalizers: graph.FinalizerOrphan}
	view.nodes["u-plain"] = graph.NodeView{Ref: wref("plain", "u-plain"), Deleting: true}
	view.nodes["u-absent"] = graph.NodeView{Ref: wref("absent", "u-absent"), Absent: true}
	p := newTestProcessor(t, view, fake, Options{})
	for _, uid := range []types.UID{"u-live", "u-plain", "u-absent", "u-unknown"} {
		if got, err := p.process(context.Background(), uid); got != work.Done || err != nil {
			t.Errorf("process(%s) = %v, want done", uid, got)
		}
	}
	if got := actions(fake); len(got) != 0 {
		t.Errorf("actions = %q, want none", got)
	}
}

// TestResync: a resync enqueues exactly the owners being deleted with a GC finalizer and
// forgets the progress of the others.
func TestResync(t *testing.T) {
	view := newFakeView()
	view.nodes["u-a"] = ownerNode("a", "u-a", graph.FinalizerOrphan)
	view.nodes["u-b"] = ownerNode("b", "u-b", graph.FinalizerForeground)
	view.nodes["u-c"] = graph.NodeView{Ref: wref("c", "u-c")}
	p := newTestProcessor(t, view, newFakeClient(), Options{})
	p.progressOf("u-gone")
	p.progressOf("u-a")

	p.resync()
	got := worktest.Drain(p.queue)
	slices.Sort(got)
	if !slices.Equal(got, []types.UID{"u-a", "u-b"}) {
		t.Errorf("enqueued %v, want u-a and u-b", got)
	}
	if _, ok := p.progress["u-gone"]; ok {
		t.Error("progress of an owner no longer deleting was kept")
	}
	if _, ok := p.progress["u-a"]; !ok {
		t.Error("progress of a deleting owner was dropped")
	}
}

// TestRun: Run with its workers and resync loop finishes an orphan owner and a foreground
// owner that nobody enqueued (level-driven), and stops when ctx ends.
func TestRun(t *testing.T) {
	fake := newFakeClient(
		widget("orphan", "u-orphan", "5", true, []string{metav1.FinalizerOrphanDependents}),
		widget("fg", "u-fg", "5", true, []string{metav1.FinalizerDeleteDependents}),
		widget("d1", "u-d1", "2", false, nil, refTo("orphan", "u-orphan")),
	)
	view := newFakeView()
	view.nodes["u-orphan"] = ownerNode("orphan", "u-orphan", graph.FinalizerOrphan)
	view.nodes["u-fg"] = ownerNode("fg", "u-fg", graph.FinalizerForeground)
	view.deps["u-orphan"] = [][]graph.Ref{{wref("d1", "u-d1")}}
	p := New(Options{PatchWorkers: 2, Client: client.New(fake), View: view, Workers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := p.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, f := live(t, fake, "orphan"), live(t, fake, "fg")
		if len(o.Finalizers) == 0 && len(f.Finalizers) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("finalizers left: orphan %q, fg %q", o.Finalizers, f.Finalizers)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if o := liveOwners(t, fake, "d1"); len(o) != 0 {
		t.Errorf("d1 still references %v", o)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
}

// TestForegroundFinishedWithUnsyncedResources: with no known blocking dependent the finalizer
// goes (cascade proceeds with what synced), and while a resource is unsynced the owner gets one
// Warning saying blocking dependents there were not waited for.
func TestForegroundFinishedWithUnsyncedResources(t *testing.T) {
	fake := newFakeClient(widget("owner", "u-owner", "5", true, []string{metav1.FinalizerDeleteDependents}))
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerForeground)
	view.unsynced["example.com/v1/Gizmo"] = true
	rec := record.NewFakeRecorder(10)
	p := newTestProcessor(t, view, fake, Options{Recorder: rec})
	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, %v; want Done", got, err)
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	want := "Warning " + EventReasonFinishedUnsynced + " No known dependent blocks this owner, but gizmos.v1.example.com cannot be listed or watched: blocking dependents there, if any, are not waited for"
	if got := <-rec.Events; got != want {
		t.Errorf("event %q\nwant  %q", got, want)
	}
	if f := live(t, fake, "owner").Finalizers; len(f) != 0 {
		t.Errorf("finalizers %v, want the foregroundDeletion finalizer removed", f)
	}
}
