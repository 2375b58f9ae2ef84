package gc

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/internal/work/worktest"
)

// Widgets move from example.com/v1 to example.com/v2; ConfigMaps depend on them.
var (
	ghostWidgetsV1 = Resource{GVR: clienttest.Widgets, Kind: "Widget", Namespaced: true}
	ghostWidgetsV2 = Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}, Kind: "Widget", Namespaced: true}
	ghostCMs       = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
)

// ghostOwners records the owners handed to the finalizers.
type ghostOwners struct {
	mu   sync.Mutex
	uids []types.UID
}

func (q *ghostOwners) Enqueue(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.uids = append(q.uids, uid)
}

func (q *ghostOwners) handed() []types.UID {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.uids)
}

// newGhostController returns a controller whose API is a fake holding objs, mapping widgets at
// v1 and v2 and configmaps, with no monitor yet (ghostWatch adds them).
func newGhostController(t *testing.T, objs ...runtime.Object) (*Controller, *ghostOwners, func() []string) {
	t.Helper()
	fake := clienttest.NewFake(objs...)
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, r := range []Resource{ghostWidgetsV1, ghostWidgetsV2, ghostCMs} {
		mapper.AddSpecific(r.GVR.GroupVersion().WithKind(r.Kind), r.GVR, r.GVR.GroupVersion().WithResource(r.GVR.Resource[:len(r.GVR.Resource)-1]), meta.RESTScopeNamespace)
	}
	owners := &ghostOwners{}
	c := New(Options{Client: client.New(fake), Mapper: resettable{mapper}, Metrics: NewMetrics(prometheus.NewRegistry()), Finalizers: owners,
		Clock: clocktesting.NewFakeClock(ghostT0)})
	t.Cleanup(func() { c.deleteQueue.ShutDown(); c.verifyQueue.ShutDown() })
	return c, owners, func() []string { return clienttest.Actions(fake) }
}

// newGhostScenario is newGhostController over the API both ghost scenarios start with: the
// widget u-live (u-gone was deleted unseen) and the ghostDeps.
func newGhostScenario(t *testing.T) (*Controller, *ghostOwners, func() []string) {
	t.Helper()
	depGone, depLive := ghostDeps()
	return newGhostController(t, clienttest.Widget("ns", "w-u-live", "u-live", "3"), depGone, depLive)
}

// ghostDeps are the ConfigMaps of both ghost scenarios: dep-gone depends on the widget u-gone,
// dep-live on the widget u-live, both at example.com/v1.
func ghostDeps() (depGone, depLive *metav1.PartialObjectMetadata) {
	return ghostMeta(ghostCMs, "dep-gone", "u-dep-gone", widgetRefV1("u-gone", false)),
		ghostMeta(ghostCMs, "dep-live", "u-dep-live", widgetRefV1("u-live", false))
}

// ghostT0 is the ghost tests' clock at start.
var ghostT0 = time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)

// ghostWatch registers a monitor of r as the discovery loop would (with no reflector behind it)
// and returns its store, which the test feeds as a reflector would.
func ghostWatch(c *Controller, r Resource, synced bool) *graphStore {
	done := make(chan struct{})
	close(done)
	m := &monitor{res: r, store: &graphStore{res: r, graph: c}, cancel: func() {}, done: done}
	m.store.synced.Store(synced)
	c.monitors.mu.Lock()
	defer c.monitors.mu.Unlock()
	c.monitors.byR[r.GVR] = m
	c.monitors.byGK[schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}] = m
	return m.store
}

func ghostMeta(r Resource, name string, uid types.UID, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: r.GVR.GroupVersion().String(), Kind: r.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, ResourceVersion: "3", OwnerReferences: owners},
	}
}

// widgetRefV1 is a reference to the widget w-<uid> at example.com/v1, as the dependents wrote it.
func widgetRefV1(uid types.UID, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w-" + string(uid), UID: uid}
	if block {
		r.BlockOwnerDeletion = &block
	}
	return r
}

// ghostWork runs what the queues hold, verifications first, until both are empty.
func ghostWork(t *testing.T, c *Controller) {
	t.Helper()
	ctx := context.Background()
	for c.verifyQueue.Len() > 0 || c.deleteQueue.Len() > 0 {
		for _, ref := range worktest.Drain(c.verifyQueue) {
			if got, err := c.verifyOwner(ctx, ref); got != work.Done || err != nil {
				t.Fatalf("verifyOwner(%s) = %v, %v; want Done", ref, got, err)
			}
		}
		for _, uid := range worktest.Drain(c.deleteQueue) {
			if got, err := c.attemptToDelete(ctx, uid); got != work.Done || err != nil {
				t.Fatalf("attemptToDelete(%s) = %v, %v; want Done", uid, got, err)
			}
		}
	}
}

func ghostOwnerStates(c *Controller, uid types.UID) []graph.OwnerState {
	var out []graph.OwnerState
	for _, o := range c.Owners(uid) {
		out = append(out, o.State)
	}
	return out
}

// TestKindGoneOwnersAreVerified: the widgets' CRD is deleted and their deletions were never
// seen (the watch missed them). Once the monitor is stopped the widgets are no longer solid
// owners: each claim on them is checked with a live GET; the ConfigMap of the one that is gone
// is collected, the one of the widget that is still there (the kind still mapped) is kept.
// Nothing is deleted before an answer.
func TestKindGoneOwnersAreVerified(t *testing.T) {
	c, _, acts := newGhostScenario(t)
	widgets := ghostWatch(c, ghostWidgetsV1, true)
	cms := ghostWatch(c, ghostCMs, true)
	for _, o := range []*metav1.PartialObjectMetadata{ghostMeta(ghostWidgetsV1, "w-u-gone", "u-gone"), ghostMeta(ghostWidgetsV1, "w-u-live", "u-live")} {
		if err := widgets.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	depGone, depLive := ghostDeps()
	for _, o := range []*metav1.PartialObjectMetadata{depGone, depLive} {
		if err := cms.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	if c.verifyQueue.Len() != 0 || c.deleteQueue.Len() != 0 {
		t.Fatalf("work queued before anything happened: %d verifications, %d decisions", c.verifyQueue.Len(), c.deleteQueue.Len())
	}

	c.monitors.stop(ghostWidgetsV1.GVR, c.opts.Clock.Now())
	// Missing from discovery, the kind not known gone (no CRD seen deleted): the widgets stay
	// observed for the grace; a blip of discovery changes nothing.
	c.unwatchStopped(context.Background())
	if n, ok := c.Node("u-gone"); !ok || n.Virtual {
		t.Errorf("widget u-gone right after its resource stopped being watched: %+v (found %t), want still observed", n, ok)
	}
	c.opts.Clock.(*clocktesting.FakeClock).Step(GhostGrace)
	c.unwatchStopped(context.Background())
	for _, uid := range []types.UID{"u-gone", "u-live"} {
		if n, ok := c.Node(uid); !ok || !n.Virtual {
			t.Errorf("widget %s after its resource stopped being watched: %+v (found %t), want a virtual node", uid, n, ok)
		}
	}
	for _, uid := range []types.UID{"u-dep-gone", "u-dep-live"} {
		if got := ghostOwnerStates(c, uid); !slices.Equal(got, []graph.OwnerState{graph.OwnerUnknown}) {
			t.Errorf("owner states of %s = %v, want [Unknown]", uid, got)
		}
		// Deciding now waits for the answer: no API call.
		if got, err := c.attemptToDelete(context.Background(), uid); got != work.Done || err != nil {
			t.Errorf("attemptToDelete(%s) before the answer = %v, %v", uid, got, err)
		}
	}
	if a := acts(); len(a) != 0 {
		t.Fatalf("API calls before any answer: %q", a)
	}
	if n := c.verifyQueue.Len(); n != 2 {
		t.Errorf("%d claims queued for a live check, want 2", n)
	}

	ghostWorkDone(t, c, acts)
	if got := ghostOwnerStates(c, "u-dep-live"); !slices.Equal(got, []graph.OwnerState{graph.OwnerVerifiedPresent}) {
		t.Errorf("owner states of dep-live = %v, want [VerifiedPresent]", got)
	}

	// Nothing is left to tell the graph.
	if due := c.monitors.unwatchDue(c.opts.Clock.Now(), GhostGrace, func(schema.GroupKind) bool { return true }); len(due) != 0 {
		t.Errorf("still due after the event: %v", due)
	}
}

// TestVersionSwitchWaitsForTheNewList: the preferred version of widgets moves from v1 to v2.
// Until v2's initial list is in, the widgets stay observed as they were: a foreground owner
// they block keeps waiting and nothing is verified. Once it is in, the widgets it holds are
// observed at v2 (the blocking one still blocks, its owner never rechecked in between), and
// the one it lacks (deleted while neither version was watched) becomes virtual: found absent,
// its ConfigMap is collected; the other ConfigMap, whose claim names v1, is found present.
func TestVersionSwitchWaitsForTheNewList(t *testing.T) {
	c, handed, acts := newGhostScenario(t)
	v1 := ghostWatch(c, ghostWidgetsV1, true)
	cms := ghostWatch(c, ghostCMs, true)
	fg := ghostMeta(ghostCMs, "fg", "u-fg")
	fg.DeletionTimestamp, fg.Finalizers = &clienttest.DeletedAt, []string{metav1.FinalizerDeleteDependents}
	fgRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "fg", UID: "u-fg", BlockOwnerDeletion: new(bool)}
	*fgRef.BlockOwnerDeletion = true
	depGone, depLive := ghostDeps()
	if err := cms.Replace([]any{fg, depGone, depLive}, "3"); err != nil {
		t.Fatal(err)
	}
	if err := v1.Replace([]any{
		ghostMeta(ghostWidgetsV1, "w-u-gone", "u-gone"),
		ghostMeta(ghostWidgetsV1, "w-u-live", "u-live"),
		ghostMeta(ghostWidgetsV1, "w-u-blocker", "u-blocker", fgRef),
	}, "3"); err != nil {
		t.Fatal(err)
	}
	// What the initial lists queued (the claims on widgets not listed yet, the blocker as a
	// dependent of a foreground owner) is not this test's.
	worktest.Drain(c.deleteQueue)
	worktest.Drain(c.verifyQueue)
	if c.BlockingDependents("u-fg") != 1 {
		t.Fatalf("BlockingDependents(fg) = %d, want 1", c.BlockingDependents("u-fg"))
	}
	handedBefore := len(handed.handed())

	// The switch: v1 stopped, v2 started; its list is not in yet.
	c.monitors.stop(ghostWidgetsV1.GVR, c.opts.Clock.Now())
	v2 := ghostWatch(c, ghostWidgetsV2, false)
	c.unwatchStopped(context.Background())
	if n, ok := c.Node("u-gone"); !ok || n.Virtual || n.APIVersion != "example.com/v1" {
		t.Errorf("widget u-gone before v2's list = %+v (found %t), want still observed at v1", n, ok)
	}
	if c.BlockingDependents("u-fg") != 1 || c.verifyQueue.Len() != 0 || c.deleteQueue.Len() != 0 {
		t.Errorf("before v2's list: blocking %d, %d verifications, %d decisions; want 1, 0, 0",
			c.BlockingDependents("u-fg"), c.verifyQueue.Len(), c.deleteQueue.Len())
	}
	c.unwatchStopped(context.Background()) // a later round, v2 still listing: still waiting
	if n, _ := c.Node("u-gone"); n.Virtual {
		t.Errorf("widget u-gone unwatched before v2's list")
	}

	// v2's list: u-gone went meanwhile.
	if err := v2.Replace([]any{
		ghostMeta(ghostWidgetsV2, "w-u-live", "u-live"),
		ghostMeta(ghostWidgetsV2, "w-u-blocker", "u-blocker", fgRef),
	}, "7"); err != nil {
		t.Fatal(err)
	}
	c.unwatchStopped(context.Background())
	if n, ok := c.Node("u-gone"); !ok || !n.Virtual {
		t.Errorf("widget u-gone after v2's list = %+v (found %t), want virtual", n, ok)
	}
	for _, uid := range []types.UID{"u-live", "u-blocker"} {
		if n, ok := c.Node(uid); !ok || n.Virtual || n.APIVersion != "example.com/v2" {
			t.Errorf("widget %s after v2's list = %+v (found %t), want observed at v2", uid, n, ok)
		}
	}
	if got := c.BlockingDependents("u-fg"); got != 1 {
		t.Errorf("BlockingDependents(fg) after the switch = %d, want 1", got)
	}
	if got := handed.handed()[handedBefore:]; slices.Contains(got, "u-fg") {
		t.Errorf("the foreground owner was rechecked during the switch (%v): its blocker never went", got)
	}

	ghostWorkDone(t, c, acts)
	if got := ghostOwnerStates(c, "u-dep-live"); !slices.Equal(got, []graph.OwnerState{graph.OwnerPresent}) {
		t.Errorf("owner states of dep-live = %v, want [Present] (verified at v1, observed at v2)", got)
	}
}

// ghostWorkDone runs the workers and checks the API calls both ghost scenarios end with: the
// gone owner's claim is answered absent (its dependent deleted), the live owner's present.
func ghostWorkDone(t *testing.T, c *Controller, acts func() []string) {
	t.Helper()
	ghostWork(t, c)
	got := acts()
	slices.Sort(got)
	want := []string{
		"DELETE configmaps.v1 ns/dep-gone uid=u-dep-gone rv=3 propagation=Background",
		"GET widgets.v1.example.com ns/w-u-gone",
		"GET widgets.v1.example.com ns/w-u-live",
	}
	if !slices.Equal(got, want) {
		t.Errorf("API calls:\n%q\nwant\n%q", got, want)
	}
}

// TestUnwatchDue: when a stopped resource is due for graph.EventUnwatched.
func TestUnwatchDue(t *testing.T) {
	c, _, _ := newGhostController(t)
	now, gone := ghostT0, false
	due := func() []schema.GroupVersionResource {
		var out []schema.GroupVersionResource
		for _, r := range c.monitors.unwatchDue(now, GhostGrace, func(schema.GroupKind) bool { return gone }) {
			out = append(out, r.GVR)
		}
		return out
	}

	// No version of the kind is watched any more, the kind not known gone (a resource missing
	// from discovery for a moment): only after the grace.
	ghostWatch(c, ghostWidgetsV1, true)
	c.monitors.stop(ghostWidgetsV1.GVR, now)
	now = now.Add(GhostGrace - time.Second)
	if got := due(); len(got) != 0 {
		t.Errorf("missing from discovery within the grace: due %v, want nothing yet", got)
	}
	now = now.Add(time.Second)
	if got := due(); !slices.Equal(got, []schema.GroupVersionResource{ghostWidgetsV1.GVR}) {
		t.Errorf("missing from discovery for the grace: due %v, want widgets v1", got)
	}
	// The kind gone (its CRD seen deleted): at once.
	gone = true
	ghostWatch(c, ghostWidgetsV1, true)
	c.monitors.stop(ghostWidgetsV1.GVR, now)
	if got := due(); !slices.Equal(got, []schema.GroupVersionResource{ghostWidgetsV1.GVR}) {
		t.Errorf("kind gone: due %v, want widgets v1", got)
	}
	if got := due(); len(got) != 0 {
		t.Errorf("due twice: %v", got)
	}

	// Another version watched: once its initial list is in.
	ghostWatch(c, ghostWidgetsV1, true)
	c.monitors.stop(ghostWidgetsV1.GVR, now)
	v2 := ghostWatch(c, ghostWidgetsV2, false)
	if got := due(); len(got) != 0 {
		t.Errorf("v2 not synced: due %v, want nothing yet", got)
	}
	v2.synced.Store(true)
	if got := due(); !slices.Equal(got, []schema.GroupVersionResource{ghostWidgetsV1.GVR}) {
		t.Errorf("v2 synced: due %v, want widgets v1", got)
	}

	// Watched again at its own version before it was due: forgotten (its lists decide).
	c.monitors.stop(ghostWidgetsV2.GVR, now)
	ghostWatch(c, ghostWidgetsV2, false)
	if got := due(); len(got) != 0 {
		t.Errorf("watched again: due %v, want nothing", got)
	}
	c.monitors.mu.RLock()
	left := len(c.monitors.stopped)
	c.monitors.mu.RUnlock()
	if left != 0 {
		t.Errorf("%d stopped resources remembered, want none", left)
	}

	// Shutdown: nothing to tell.
	c.monitors.stopAll()
	if got := due(); len(got) != 0 {
		t.Errorf("after stopAll: due %v, want nothing", got)
	}
}

// TestUnwatchedDependentLookedAtAgain: make test-chaos, seed 1. A dependent whose owner was
// verified absent is taken from the queue while its own resource is missing from discovery for
// a moment (a round answered while kube-apiserver restarted). Nothing is decided on it then, no
// API call, but it is looked at again: the resource's return changes none of its objects and
// brings no event. Once the resource is watched again, it is collected.
func TestUnwatchedDependentLookedAtAgain(t *testing.T) {
	dep := ghostMeta(ghostCMs, "dep-gone", "u-dep-gone", widgetRefV1("u-gone", false))
	c, _, acts := newGhostController(t, dep)
	ghostWatch(c, ghostWidgetsV1, true)
	cms := ghostWatch(c, ghostCMs, true)
	if err := cms.Add(dep); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ref := range worktest.Drain(c.verifyQueue) {
		if got, err := c.verifyOwner(ctx, ref); got != work.Done || err != nil {
			t.Fatalf("verifyOwner(%s) = %v, %v", ref, got, err)
		}
	}
	if got := ghostOwnerStates(c, "u-dep-gone"); !slices.Equal(got, []graph.OwnerState{graph.OwnerAbsent}) {
		t.Fatalf("owner states = %v, want [Absent]", got)
	}
	before := len(acts())

	c.monitors.stop(ghostCMs.GVR, c.opts.Clock.Now())
	if got, err := c.attemptToDelete(ctx, "u-dep-gone"); got != work.WaitForSync || err != nil {
		t.Errorf("attemptToDelete while its resource is not watched = %v, %v; want WaitForSync (looked at again)", got, err)
	}
	if a := acts()[before:]; len(a) != 0 {
		t.Fatalf("API calls while its resource is not watched: %q", a)
	}

	ghostWatch(c, ghostCMs, true) // discovery lists it again; its list changes nothing
	if got, err := c.attemptToDelete(ctx, "u-dep-gone"); got != work.Done || err != nil {
		t.Errorf("attemptToDelete once watched again = %v, %v; want Done", got, err)
	}
	if a := acts()[before:]; !slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "DELETE ") }) {
		t.Errorf("API calls once watched again: %q, want its DELETE", a)
	}
}
