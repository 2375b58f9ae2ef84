package finalizers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/internal/work"
)

// Scenario tests of the processor over a real collector, in the style of in-tree
// TestConflictingData. The gc.Controller runs (discovery, one reflector per resource over a fake
// API) as a standby: its graph is live, its own workers never run, and the owners its graph's
// effects hand over land in the processor's queue, which the scenario drives one ProcessNext at
// a time. Watch events are sent by the scenario on unbuffered fake watches, each followed by a
// bookmark: once the bookmark is taken, the event before it is in the graph and its effects
// dispatched, so no step needs to sleep. What the collector's workers would delete, the
// scenario deletes itself (remove). The processor's retries wait on a fake clock that never
// moves: an owner comes back only through an effect, a resync or retryPending.
//
// The one wait (await) is for what the controller reaches on its own goroutines and clock: the
// initial sync (checked every 50 ms), a resource's watch failing, a failing resource listing
// again (after the reflector's backoff). It only ever waits for a condition to become true,
// never before a negative check.

// Resources of the scenarios, both watched.
var (
	scWidgets = gc.Resource{GVR: clienttest.Widgets, Kind: "Widget", Namespaced: true}
	scGizmos  = gc.Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}, Kind: "Gizmo", Namespaced: true}
	scT0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

type scenario struct {
	*gctest.Harness // Rec holds the processor's Events

	t   *testing.T
	ctx context.Context
	c   *gc.Controller
	p   *Processor

	watches map[schema.GroupVersionResource]*scWatch
	rv      int // of the bookmarks

	// pending are the owners whose last outcome was Retry or WaitForSync.
	pending *gctest.Pending[types.UID]
}

// scWatch is the fake watch of one resource: served once, then failing if failing is set.
type scWatch struct {
	w       *watch.FakeWatcher
	served  atomic.Bool
	failing atomic.Bool
}

// scDiscovery serves the scenario's resources.
type scDiscovery struct{}

func (scDiscovery) ServerPreferredResourcesWithContext(context.Context) ([]*metav1.APIResourceList, error) {
	verbs := metav1.Verbs{"get", "list", "watch", "delete", "patch"}
	return []*metav1.APIResourceList{{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: verbs},
		{Name: "gizmos", Kind: "Gizmo", Namespaced: true, Verbs: verbs},
	}}}, nil
}

// scenarioSetup is the world a scenario starts in.
type scenarioSetup struct {
	// objects are in the fake API; the initial lists bring them into the graph.
	objects []runtime.Object
	// unlisted resources fail every list and watch until recoverResource: the graph counts as
	// synced without them after the sync timeout.
	unlisted []gc.Resource
}

// newScenario starts a collector over a fake API holding objs and waits for its initial sync.
func newScenario(t *testing.T, objs ...runtime.Object) *scenario {
	t.Helper()
	return newScenarioWith(t, scenarioSetup{objects: objs})
}

func newScenarioWith(t *testing.T, setup scenarioSetup) *scenario {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &scenario{
		Harness: gctest.New(t, clienttest.NewFake(setup.objects...)),
		t:       t, ctx: ctx, watches: map[schema.GroupVersionResource]*scWatch{}, pending: &gctest.Pending[types.UID]{},
	}
	for _, r := range []gc.Resource{scWidgets, scGizmos} {
		sw := &scWatch{w: watch.NewFake()}
		sw.failing.Store(slices.Contains(setup.unlisted, r))
		s.watches[r.GVR] = sw
		s.ByKind[r.GVR.GroupVersion().WithKind(r.Kind)] = r.GVR
		s.Fake.PrependWatchReactor(r.GVR.Resource, func(a clienttesting.Action) (bool, watch.Interface, error) {
			if wa, ok := a.(clienttesting.WatchActionImpl); ok && wa.ListOptions.SendInitialEvents != nil {
				// A streaming list: refused as a server without the WatchList feature does, so
				// the collector lists (the fake tracker's objects) and then watches sw.w.
				return true, nil, apierrors.NewBadRequest("sendInitialEvents is not served here")
			}
			if sw.failing.Load() || sw.served.Swap(true) {
				return true, nil, fmt.Errorf("watching %s failed", r.GVR.Resource)
			}
			return true, sw.w, nil
		})
		s.Fake.PrependReactor("list", r.GVR.Resource, func(clienttesting.Action) (bool, runtime.Object, error) {
			if sw.failing.Load() {
				return true, nil, fmt.Errorf("listing %s failed", r.GVR.Resource)
			}
			return false, nil, nil
		})
	}
	s.p = New(Options{
		Client: client.New(s.Fake), PatchWorkers: 1, Metrics: NewMetrics(s.Reg), WorkMetrics: work.NewMetrics(s.Reg),
		Events: s.Rec, Clock: clocktesting.NewFakeClock(scT0),
	})
	syncTimeout := time.Duration(0) // the default: every resource lists
	if len(setup.unlisted) > 0 {
		syncTimeout = time.Nanosecond // synced at the first check after discovery
	}
	s.c = gc.New(gc.Options{
		SyncTimeout:     syncTimeout,
		Discovery:       scDiscovery{},
		Metadata:        s.Fake,
		Client:          client.New(s.Fake),
		Events:          record.NewFakeRecorder(100),
		Metrics:         gc.NewMetrics(s.Reg),
		DiscoveryPeriod: time.Hour,
		Workers:         1,
		Leader:          &leader.Gate{}, // never opened: the collector's workers stay idle
		Finalizers:      s.p,
	})
	s.p.view = s.c // as Run does
	s.Graph = s.c
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.c.Run(ctx); err != nil {
			t.Errorf("gc.Run: %v", err)
		}
	})
	wg.Go(func() { s.p.runPatcher(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		s.p.queue.ShutDown()
	}) // then the harness checks that every API call and Event was asserted
	s.Begin("start")
	s.await("the graph synced", s.c.Synced)
	for _, r := range []gc.Resource{scWidgets, scGizmos} {
		if !slices.Contains(setup.unlisted, r) { // with a short sync timeout, Synced does not say
			s.await(gc.GVRString(r.GVR)+" listed", func() bool {
				_, unsynced := s.c.UnsyncedKind(r.GVR.GroupVersion().String(), r.Kind)
				return !unsynced
			})
		}
	}
	return s
}

// --- step plumbing ---

// await waits until cond holds (see the comment at the top of the file), at most 30 s.
func (s *scenario) await(what string, cond func() bool) {
	s.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		s.Fatalf("never: %s", what)
	}
}

// send delivers one watch event of obj's resource and waits until the graph has applied it.
func (s *scenario) send(t watch.EventType, obj *metav1.PartialObjectMetadata) {
	s.t.Helper()
	sw := s.watches[s.GVR(obj)]
	if sw.failing.Load() {
		s.Fatalf("%s: its resource's watch failed", obj.Name)
	}
	sw.w.Action(t, obj.DeepCopy())
	s.bookmark(sw)
}

// bookmark sends a bookmark: once the reflector took it, everything sent before is applied.
func (s *scenario) bookmark(sw *scWatch) {
	s.rv++
	sw.w.Action(watch.Bookmark, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(1000 + s.rv)}})
}

// --- steps ---

// upsert writes objs to the API and delivers them through the watch.
func (s *scenario) upsert(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.writeAndSend("upsert", watch.Modified, s.SetObjects, objs)
}

// deliver sends the live version of objs through the watch (after the processor wrote them).
func (s *scenario) deliver(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.Begin("deliver %s", gctest.Names(objs))
	for _, o := range objs {
		s.send(watch.Modified, s.Live(o))
	}
}

// remove deletes objs from the API and delivers the deletions.
func (s *scenario) remove(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.writeAndSend("remove", watch.Deleted, s.DeleteObjects, objs)
}

// writeAndSend is the step called name: each of objs is written to the API by write, then its
// event of type t is delivered through the watch.
func (s *scenario) writeAndSend(name string, t watch.EventType, write func(...*metav1.PartialObjectMetadata), objs []*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.Begin("%s %s", name, gctest.Names(objs))
	for _, o := range objs {
		write(o)
		s.send(t, o)
	}
}

// failResource makes r's watch end and every later list and watch of r fail, and waits until
// the collector names it unsynced.
func (s *scenario) failResource(r gc.Resource) {
	s.t.Helper()
	s.Begin("failResource %s", gc.GVRString(r.GVR))
	sw := s.watches[r.GVR]
	s.bookmark(sw) // the watch ends after an event: the reflector watches again at once
	sw.failing.Store(true)
	sw.w.Stop()
	s.await(gc.GVRString(r.GVR)+" unsynced", func() bool {
		_, unsynced := s.c.UnsyncedKind(r.GVR.GroupVersion().String(), r.Kind)
		return unsynced
	})
}

// recoverResource lets an unlisted resource list and watch, and waits until its initial list
// is in the graph (the reflector retries with its own backoff, about a second).
func (s *scenario) recoverResource(r gc.Resource) {
	s.t.Helper()
	s.Begin("recoverResource %s", gc.GVRString(r.GVR))
	s.watches[r.GVR].failing.Store(false)
	s.await(gc.GVRString(r.GVR)+" synced", func() bool {
		_, unsynced := s.c.UnsyncedKind(r.GVR.GroupVersion().String(), r.Kind)
		return !unsynced
	})
	s.bookmark(s.watches[r.GVR]) // its watch is served
}

// processOwners runs the processor on every owner queued, until none is left; at most 1000.
func (s *scenario) processOwners() {
	s.t.Helper()
	s.Begin("processOwners")
	gctest.Drive(s.Harness, s.ctx, s.p.queue, "owner", func(u types.UID) string { return string(u) }, s.p.process, s.pending)
}

// retryPending enqueues again the owners whose last outcome was Retry or WaitForSync, as their
// backoff would once elapsed.
func (s *scenario) retryPending() {
	s.t.Helper()
	s.Begin("retryPending")
	gctest.Retry(s.pending, s.p.Enqueue)
}

// resync runs one level-driven round of the processor.
func (s *scenario) resync() {
	s.t.Helper()
	s.Begin("resync")
	s.p.resync()
}

// --- assertions ---

// assertActions checks the writes and reads since the last call (lists and watches are the
// reflectors'), in order; unordered holds the first n, whose order is free (concurrent patches).
func (s *scenario) assertActions(unordered int, want ...string) {
	s.t.Helper()
	s.AssertActionsUnordered(unordered, want...)
}

// assertQueued checks the owners waiting in the processor's queue (as a set), without
// consuming them.
func (s *scenario) assertQueued(want ...types.UID) {
	s.t.Helper()
	s.Begin("assertQueued")
	got := gctest.Peek(s.p.queue)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		s.Errorf("queued owners %v, want %v", got, want)
	}
}

// --- objects ---

// scObj is an object of r in namespace "ns".
func scObj(r gc.Resource, name string, uid types.UID, rv string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return gctest.Obj(r.GVR.GroupVersion().WithKind(r.Kind), true, name, uid, rv, refs...)
}
