package finalizers

import (
	"context"
	"fmt"
	"slices"
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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

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
	// staleSince: apiVersion/kind whose watch ended at that moment and is not open again.
	staleSince map[string]time.Time
}

func newFakeView() *fakeView {
	return &fakeView{
		nodes: map[types.UID]graph.NodeView{}, deps: map[types.UID][][]graph.Ref{}, blocking: map[types.UID]int{},
		synced: true, depsCalls: map[types.UID]int{}, owners: map[types.UID][]graph.OwnerView{}, unsynced: map[string]bool{},
		staleSince: map[string]time.Time{},
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
func (v *fakeView) CatchingUp(since time.Time) []gc.Resource {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []gc.Resource
	for k, at := range v.staleSince {
		if at.After(since) {
			i := strings.LastIndex(k, "/")
			res, _ := testResolve(k[:i], k[i+1:])
			out = append(out, res)
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

var (
	newFakeClient = clienttest.NewFake
	actions       = clienttest.Actions
)

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

// newTestProcessor returns a processor over view and the API c with its patch workers running
// until the test ends.
func newTestProcessor(t *testing.T, view gc.View, c metadata.Interface, opts Options) *Processor {
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
	return fmt.Sprintf(`PATCH widgets.v1.example.com ns/%s strategic {"metadata":{"uid":%q,"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, dep, dUID, owner)
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
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"5","finalizers":[]}}`,
		"GET widgets.v1.example.com ns/owner",
		`PATCH widgets.v1.example.com ns/owner merge {"metadata":{"resourceVersion":"6","finalizers":["example.com/late"]}}`,
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
			if got := actions(fake); !slices.Equal(got, []string{"GET widgets.v1.example.com ns/owner"}) {
				t.Errorf("actions = %q, want only the GET", got)
			}
		})
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
	var o, f *metav1.PartialObjectMetadata
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		o, f = live(t, fake, "orphan"), live(t, fake, "fg")
		return len(o.Finalizers) == 0 && len(f.Finalizers) == 0, nil
	}); err != nil {
		t.Fatalf("finalizers left: orphan %q, fg %q", o.Finalizers, f.Finalizers)
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
