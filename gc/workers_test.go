package gc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/internal/work/worktest"
)

var widgets = clienttest.Widgets

// newWorkerTestController returns a controller that watches widgets (as far as its workers can
// tell), whose API is a fake holding objs, and a function returning the API calls so far.
func newWorkerTestController(t *testing.T, objs ...runtime.Object) (*Controller, func() []string) {
	t.Helper()
	fake := clienttest.NewFake(objs...)
	return newControllerOver(t, fake), func() []string { return clienttest.Actions(fake) }
}

// newControllerOver is newWorkerTestController over a fake the caller prepared.
func newControllerOver(t *testing.T, fake *metadatafake.FakeMetadataClient) *Controller {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	c := New(Options{Client: client.New(fake), Mapper: resettable{mapper}, Metrics: NewMetrics(prometheus.NewRegistry())})
	m := &monitor{res: Resource{GVR: widgets, Kind: "Widget", Namespaced: true}, store: &graphStore{}}
	m.store.synced.Store(true)
	c.monitors.byR[widgets] = m
	c.monitors.byGK[schema.GroupKind{Group: "example.com", Kind: "Widget"}] = m
	t.Cleanup(func() { c.deleteQueue.ShutDown(); c.verifyQueue.ShutDown() })
	return c
}

// widgetObj is the graph's form of the Widget name/uid owned by owners ("w-<uid>").
func widgetObj(name string, uid types.UID, owners ...types.UID) graph.Object {
	o := graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: name, UID: uid}, ResourceVersion: "3"}
	for _, u := range owners {
		o.Owners = append(o.Owners, graph.OwnerRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "w-" + string(u), UID: u})
	}
	return o
}

func observe(c *Controller, objs ...graph.Object) {
	for _, o := range objs {
		c.apply(graph.Event{Type: graph.EventObserved, Object: o})
	}
}

func observeDeleted(c *Controller, uids ...types.UID) {
	for _, uid := range uids {
		c.apply(graph.Event{Type: graph.EventDeleted, Object: graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: "w-" + string(uid), UID: uid}}})
	}
}

// orphaning is owner uid as observed being deleted with the orphan finalizer.
func orphaning(uid types.UID) graph.Object {
	o := widgetObj("w-"+string(uid), uid)
	o.Deleting, o.Finalizers = true, graph.FinalizerOrphan
	return o
}

func smpRemove(name string, uid, owner types.UID) string {
	return `PATCH widgets.v1.example.com ns/` + name + ` strategic {"metadata":{"uid":"` + string(uid) + `","ownerReferences":[{"$patch":"delete","uid":"` + string(owner) + `"}]}}`
}

// TestOrphanDeletedOwnerIsNeverAReasonToDelete: dependents whose reference to an owner deleted
// with the orphan policy reaches the collector after the owner is gone lose that reference and
// are never deleted because of it; their other references are decided again afterwards. The
// graph alone knows the owner was orphaning (its tombstone), nothing else is asked.
func TestOrphanDeletedOwnerIsNeverAReasonToDelete(t *testing.T) {
	c, acts := newWorkerTestController(t,
		clienttest.Widget("ns", "dep", "u-dep", "3", clienttest.OwnerRef("u-owner", nil)),
		clienttest.Widget("ns", "shared", "u-shared", "3", clienttest.OwnerRef("u-owner", nil), clienttest.OwnerRef("u-gone", nil)),
		clienttest.Widget("ns", "kept", "u-kept", "3", clienttest.OwnerRef("u-owner", nil), clienttest.OwnerRef("u-live", nil)),
	)
	observe(c, orphaning("u-owner"), widgetObj("w-u-gone", "u-gone"), widgetObj("w-u-live", "u-live"),
		widgetObj("dep", "u-dep", "u-owner"), widgetObj("shared", "u-shared", "u-owner", "u-gone"), widgetObj("kept", "u-kept", "u-owner", "u-live"))
	observeDeleted(c, "u-owner", "u-gone") // u-gone went in the background

	ctx := context.Background()
	for _, tt := range []struct {
		uid  types.UID
		want work.Outcome
	}{
		{"u-dep", work.Done},
		{"u-shared", work.Retry}, // its reference to u-gone is decided on the next view
		{"u-kept", work.Retry},
	} {
		if got, err := c.attemptToDelete(ctx, tt.uid); got != tt.want || err != nil {
			t.Errorf("%s: outcome %v, %v; want %v", tt.uid, got, err, tt.want)
		}
	}
	want := []string{smpRemove("dep", "u-dep", "u-owner"), smpRemove("shared", "u-shared", "u-owner"), smpRemove("kept", "u-kept", "u-owner")}
	if got := acts(); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
}

// TestOrphanDeletedOwnerLateDependent: the owner's tombstone is gone (no dependent was left
// when it was deleted), then a dependent created just before the delete is observed. It must
// lose its reference, never be verified (GET 404) and deleted.
func TestOrphanDeletedOwnerLateDependent(t *testing.T) {
	c, acts := newWorkerTestController(t, clienttest.Widget("ns", "late", "u-late", "3", clienttest.OwnerRef("u-owner", nil)))
	observe(c, orphaning("u-owner"))
	observeDeleted(c, "u-owner")
	observe(c, widgetObj("late", "u-late", "u-owner"))
	if n := c.verifyQueue.Len(); n != 0 {
		t.Errorf("%d owner verifications queued, want none (the graph remembers the owner was orphaned)", n)
	}
	if n := c.deleteQueue.Len(); n != 1 {
		t.Errorf("%d dependents queued, want the late one", n)
	}
	if got, err := c.attemptToDelete(context.Background(), "u-late"); got != work.Done || err != nil {
		t.Errorf("outcome %v, %v; want Done", got, err)
	}
	if got, want := acts(), []string{smpRemove("late", "u-late", "u-owner")}; !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
}

// TestBackgroundDeletedOwnerStillCollects: the same dependent of an owner deleted without the
// orphan finalizer is deleted, with the view's preconditions.
func TestBackgroundDeletedOwnerStillCollects(t *testing.T) {
	c, acts := newWorkerTestController(t, clienttest.Widget("ns", "dep", "u-dep", "3", clienttest.OwnerRef("u-owner", nil)))
	observe(c, widgetObj("w-u-owner", "u-owner"), widgetObj("dep", "u-dep", "u-owner"))
	observeDeleted(c, "u-owner")
	if got, err := c.attemptToDelete(context.Background(), "u-dep"); got != work.Done || err != nil {
		t.Errorf("outcome %v, %v; want Done", got, err)
	}
	if got := acts(); !slices.Equal(got, []string{"DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background"}) {
		t.Errorf("actions = %q, want the DELETE of dep", got)
	}
}

// TestAPIFailureIsReturned: a failed DELETE is an error with Retry (the worker kit counts and
// logs it) and the object stays; a 404 is success (already gone).
func TestAPIFailureIsReturned(t *testing.T) {
	for _, tt := range []struct {
		name    string
		err     error
		want    work.Outcome
		wantErr bool
	}{
		{"server error", apierrors.NewInternalError(errors.New("etcd is down")), work.Retry, true},
		{"already gone", apierrors.NewNotFound(widgets.GroupResource(), "dep"), work.Done, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := clienttest.NewFake(clienttest.Widget("ns", "dep", "u-dep", "3", clienttest.OwnerRef("u-owner", nil)))
			clienttest.Fail(fake, "delete", tt.err)
			c := newControllerOver(t, fake)
			observe(c, widgetObj("w-u-owner", "u-owner"), widgetObj("dep", "u-dep", "u-owner"))
			observeDeleted(c, "u-owner")
			got, err := c.attemptToDelete(context.Background(), "u-dep")
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("outcome %v, %v; want %v, error %t", got, err, tt.want, tt.wantErr)
			}
			if _, err := clienttest.Live(fake, widgets, "ns", "dep"); err != nil {
				t.Errorf("dep must still exist in the fake: %v", err)
			}
		})
	}
}

// TestForegroundResyncHandsDependentsOver: every period, the dependents of each owner deleted
// in the foreground are queued again, and only those.
func TestForegroundResyncHandsDependentsOver(t *testing.T) {
	c, acts := newWorkerTestController(t)
	fg := widgetObj("w-u-fg", "u-fg")
	fg.Deleting, fg.Finalizers = true, graph.FinalizerForeground
	observe(c, fg, widgetObj("w-u-live", "u-live"), widgetObj("a", "u-a", "u-fg"), widgetObj("b", "u-b", "u-fg"), widgetObj("c", "u-c", "u-live"))
	worktest.Drain(c.deleteQueue) // what the graph's effects queued
	c.resyncForeground()
	got := worktest.Drain(c.deleteQueue)
	slices.Sort(got)
	if !slices.Equal(got, []types.UID{"u-a", "u-b"}) {
		t.Errorf("queued %v, want the foreground owner's dependents u-a and u-b", got)
	}
	if a := acts(); len(a) != 0 {
		t.Errorf("API calls %q, want none", a)
	}
}

// TestSyncIsJudgedPerResource: a resource whose list fails never holds the graph back beyond
// SyncTimeout; it is named by Unsynced (with its error) and by cascade_resource_unsynced, and
// the resource that synced is not. An owner of the unsynced kind is never answered for (its
// verification waits), so nothing is deleted on its view.
func TestSyncIsJudgedPerResource(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := New(Options{Client: client.New(clienttest.NewFake()), Metrics: NewMetrics(reg), SyncTimeout: 50 * time.Millisecond})
	gizmos := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "gizmos"}
	good := &monitor{res: Resource{GVR: widgets, Kind: "Widget", Namespaced: true}, store: &graphStore{}}
	good.store.synced.Store(true)
	bad := &monitor{res: Resource{GVR: gizmos, Kind: "Gizmo", Namespaced: true}, store: &graphStore{}}
	bad.store.failed(errors.New(`conversion webhook for example.com/v1, Kind=Gizmo failed: service "nowhere" not found`))
	c.monitors.byR[widgets], c.monitors.byR[gizmos] = good, bad
	c.monitors.byGK[schema.GroupKind{Group: "example.com", Kind: "Widget"}] = good
	c.monitors.byGK[schema.GroupKind{Group: "example.com", Kind: "Gizmo"}] = bad
	c.discovered.Store(true)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); c.watchInitialSync(ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the graph never counted as synced with one resource failing")
	}
	if !c.Synced() {
		t.Error("Ready() = false after the sync timeout")
	}
	u := c.Unsynced()
	if len(u) != 1 || u[0].Resource.GVR != gizmos || u[0].Synced || !strings.Contains(u[0].Err, "conversion webhook") {
		t.Errorf("Unsynced() = %+v, want gizmos only, never synced, with its error", u)
	}
	if _, got := c.UnsyncedKind("example.com/v2", "Gizmo"); !got {
		t.Error("gizmos not reported unsynced")
	}
	if _, got := c.UnsyncedKind("example.com/v1", "Widget"); got {
		t.Error("widgets reported unsynced")
	}
	want := `
# HELP cascade_resource_unsynced 1 for each watched resource whose view is incomplete: its initial list never arrived, or listing or watching it fails (decisions that need it wait).
# TYPE cascade_resource_unsynced gauge
cascade_resource_unsynced{group="example.com",resource="gizmos",version="v2"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cascade_resource_unsynced"); err != nil {
		t.Error(err)
	}

	// An owner of the unsynced kind is not verified yet: its dependents wait.
	d := widgetObj("dep", "u-dep")
	d.Owners = []graph.OwnerRef{{APIVersion: "example.com/v2", Kind: "Gizmo", Name: "g", UID: "u-g"}}
	observe(c, d)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gizmos.GroupVersion()})
	mapper.Add(gizmos.GroupVersion().WithKind("Gizmo"), meta.RESTScopeNamespace)
	c.opts.Mapper = resettable{mapper}
	if got, err := c.verifyOwner(ctx, graph.Ref{APIVersion: "example.com/v2", Kind: "Gizmo", Namespace: "ns", Name: "g", UID: "u-g"}); got != work.WaitForSync || err != nil {
		t.Errorf("verifyOwner of an unsynced kind = %v, %v; want WaitForSync", got, err)
	}

	// The next complete list clears it.
	bad.store.synced.Store(true)
	bad.store.failure.Store(nil)
	if u := c.Unsynced(); len(u) != 0 {
		t.Errorf("Unsynced() after recovery = %+v, want none", u)
	}
}

// resettable is a fixed REST mapper.
type resettable struct{ *meta.DefaultRESTMapper }

func (resettable) Reset() {}

// TestVerify404ForThePathIsNotAbsence: a 404 whose status does not name the owner (the server
// does not know the resource's path: a removed CRD, a stale mapping) is an error, retried; the
// dependent is kept. A 404 naming the owner is absence.
func TestVerify404ForThePathIsNotAbsence(t *testing.T) {
	for _, tt := range []struct {
		name       string
		err        error
		want       work.Outcome
		wantAbsent bool
	}{
		{"path unknown", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
			Message: "the server could not find the requested resource", Details: &metav1.StatusDetails{}}}, work.Retry, false},
		{"owner gone", apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "gizmos"}, "g"), work.Done, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := clienttest.NewFake()
			clienttest.Fail(fake, "get", tt.err)
			c := newControllerOver(t, fake)
			gizmos := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}
			mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gizmos.GroupVersion()})
			mapper.Add(gizmos.GroupVersion().WithKind("Gizmo"), meta.RESTScopeNamespace)
			c.opts.Mapper = resettable{mapper}
			d := widgetObj("dep", "u-dep")
			d.Owners = []graph.OwnerRef{{APIVersion: "example.com/v1", Kind: "Gizmo", Name: "g", UID: "u-g"}}
			observe(c, d)
			claims := worktest.Drain(c.verifyQueue)
			if len(claims) != 1 {
				t.Fatalf("claims = %v", claims)
			}
			out, err := c.verifyOwner(context.Background(), claims[0])
			if out != tt.want || (err != nil) == tt.wantAbsent {
				t.Errorf("verifyOwner = %v, %v; want %v", out, err, tt.want)
			}
			_, owners, _ := c.view("u-dep")
			if absent := owners[0].State == graph.OwnerAbsent; absent != tt.wantAbsent {
				t.Errorf("owner state %v, want absent %t", owners[0].State, tt.wantAbsent)
			}
		})
	}
}

// TestVerifyDropsClaimsNobodyMakes: a claim waiting for a REST mapping (backing off) is dropped
// without a GET once its dependent no longer references the owner; the queue keeps nothing
// nobody needs.
func TestVerifyDropsClaimsNobodyMakes(t *testing.T) {
	fake := clienttest.NewFake()
	c := newControllerOver(t, fake)
	c.opts.Mapper = resettable{meta.NewDefaultRESTMapper(nil)} // knows no kind
	d := widgetObj("dep", "u-dep")
	d.Owners = []graph.OwnerRef{{APIVersion: "example.com/v1", Kind: "Unknown", Name: "x", UID: "u-x"}}
	observe(c, d)
	claims := worktest.Drain(c.verifyQueue)
	if len(claims) != 1 {
		t.Fatalf("claims = %v", claims)
	}
	if out, err := c.verifyOwner(context.Background(), claims[0]); out != work.Retry || err == nil {
		t.Fatalf("no REST mapping: %v, %v; want Retry with the error (backoff)", out, err)
	}
	observe(c, widgetObj("dep", "u-dep")) // the reference is gone
	if out, err := c.verifyOwner(context.Background(), claims[0]); out != work.Done || err != nil {
		t.Fatalf("claim nobody makes: %v, %v; want Done", out, err)
	}
	if a := clienttest.Actions(fake); len(a) != 0 {
		t.Errorf("API calls %q, want none", a)
	}
	if v := testutil.ToFloat64(c.opts.Metrics.OwnerVerifications.WithLabelValues("unreferenced")); v != 1 {
		t.Errorf("unreferenced verifications = %v, want 1", v)
	}
}
