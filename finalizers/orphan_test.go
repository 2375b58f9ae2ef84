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

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/work"
)

// Owners deleted with the orphan policy (orphan.go): every dependent loses its reference, the
// owner is recorded, then the orphan finalizer goes.

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
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"5","finalizers":["example.com/keep"]}}`,
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
		if strings.HasPrefix(a, "PATCH widgets.v1.example.com ns/owner") || strings.HasPrefix(a, "GET widgets.v1.example.com ns/owner") {
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
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"5","finalizers":[]}}`,
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
	p := newTestProcessor(t, view, fake, Options{OrphanRecord: rec})

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
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"5","finalizers":[]}}`,
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
		"GET widgets.v1.example.com ns/d1",
		`PATCH widgets.v1.example.com ns/d1 merge {"metadata":{"resourceVersion":"2","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"other","uid":"u-other"}]}}`,
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"5","finalizers":[]}}`,
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
	patches := &patchesInFlight{Interface: fake, fill: 4, full: make(chan struct{})}
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	view.deps["u-owner"] = [][]graph.Ref{deps}
	p := newTestProcessor(t, view, patches, Options{PatchWorkers: 4})

	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, want done", got)
	}
	if peak := patches.peak; peak > 4 {
		t.Errorf("%d patches in flight at once, want at most 4", peak)
	}
	for i := range 200 {
		if o := liveOwners(t, fake, fmt.Sprintf("d%d", i)); len(o) != 0 {
			t.Fatalf("d%d still references %v", i, o)
		}
	}
}

// patchesInFlight is a metadata client that counts the patches in flight through it: the fake
// itself runs one call at a time (its reactions hold its lock). The first patches wait until
// fill of them are in flight at once, so that a pool allowed more would show it; a pool of
// fewer workers never fills it, and the test hangs until go test's timeout names the wait.
type patchesInFlight struct {
	metadata.Interface
	fill int
	full chan struct{} // closed once fill patches were in flight at once

	mu             sync.Mutex
	inFlight, peak int
}

func (c *patchesInFlight) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return inFlightGetter{c.Interface.Resource(gvr), c}
}

type inFlightGetter struct {
	metadata.Getter
	c *patchesInFlight
}

func (g inFlightGetter) Namespace(ns string) metadata.ResourceInterface {
	return inFlightResource{g.Getter.Namespace(ns), g.c}
}

type inFlightResource struct {
	metadata.ResourceInterface
	c *patchesInFlight
}

func (r inFlightResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*metav1.PartialObjectMetadata, error) {
	c := r.c
	c.mu.Lock()
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	if c.inFlight == c.fill {
		select {
		case <-c.full:
		default:
			close(c.full)
		}
	}
	c.mu.Unlock()
	<-c.full
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	return r.ResourceInterface.Patch(ctx, name, pt, data, opts, subresources...)
}
