package finalizers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/client"
	"github.com/cascade-gc/cascade/client/clienttest"
	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/work"
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
	t    *testing.T
	ctx  context.Context
	c    *gc.Controller
	p    *Processor
	fake *metadatafake.FakeMetadataClient
	rec  *record.FakeRecorder // the processor's Events
	reg  *prometheus.Registry

	watches map[schema.GroupVersionResource]*scWatch
	byKind  map[schema.GroupVersionKind]gc.Resource
	rv      int // of the bookmarks

	// pending are the owners whose last outcome was Retry or WaitForSync.
	pending  map[types.UID]struct{}
	outcomes []string

	stepN    int
	stepName string
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
		t: t, ctx: ctx, fake: clienttest.NewFake(setup.objects...), rec: record.NewFakeRecorder(100), reg: prometheus.NewRegistry(),
		watches: map[schema.GroupVersionResource]*scWatch{}, byKind: map[schema.GroupVersionKind]gc.Resource{},
		pending: map[types.UID]struct{}{},
	}
	for _, r := range []gc.Resource{scWidgets, scGizmos} {
		sw := &scWatch{w: watch.NewFake()}
		sw.failing.Store(slices.Contains(setup.unlisted, r))
		s.watches[r.GVR] = sw
		s.byKind[r.GVR.GroupVersion().WithKind(r.Kind)] = r
		s.fake.PrependWatchReactor(r.GVR.Resource, func(clienttesting.Action) (bool, watch.Interface, error) {
			if sw.failing.Load() || sw.served.Swap(true) {
				return true, nil, fmt.Errorf("watching %s failed", r.GVR.Resource)
			}
			return true, sw.w, nil
		})
		s.fake.PrependReactor("list", r.GVR.Resource, func(clienttesting.Action) (bool, runtime.Object, error) {
			if sw.failing.Load() {
				return true, nil, fmt.Errorf("listing %s failed", r.GVR.Resource)
			}
			return false, nil, nil
		})
	}
	s.p = New(Options{
		Client: client.New(s.fake), PatchWorkers: 1, Metrics: NewMetrics(s.reg), WorkMetrics: work.NewMetrics(s.reg),
		Recorder: s.rec, Clock: clocktesting.NewFakeClock(scT0),
	})
	syncTimeout := time.Duration(0) // the default: every resource lists
	if len(setup.unlisted) > 0 {
		syncTimeout = time.Nanosecond // synced at the first check after discovery
	}
	s.c = gc.New(gc.Deps{
		SyncTimeout:     syncTimeout,
		Discovery:       scDiscovery{},
		Metadata:        s.fake,
		Client:          client.New(s.fake),
		Recorder:        record.NewFakeRecorder(100),
		Metrics:         gc.NewMetrics(s.reg),
		DiscoveryPeriod: time.Hour,
		Workers:         1,
		Elected:         make(chan struct{}), // never closed: the collector's workers stay idle
		Finalizers:      s.p,
	})
	s.p.view = s.c // as Run does
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
		if a := s.actions(); len(a) > 0 {
			t.Errorf("API calls never asserted: %q", a)
		}
		if e := s.events(); len(e) > 0 {
			t.Errorf("Events never asserted: %q", e)
		}
	})
	s.begin("start")
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

func (s *scenario) begin(format string, args ...any) {
	s.stepN++
	s.stepName = fmt.Sprintf("step %d (%s)", s.stepN, fmt.Sprintf(format, args...))
}

func (s *scenario) errorf(format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("%s: %s", s.stepName, fmt.Sprintf(format, args...))
}

func (s *scenario) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s: %s", s.stepName, fmt.Sprintf(format, args...))
}

// await waits until cond holds (see the comment at the top of the file), at most 30 s.
func (s *scenario) await(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			s.fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *scenario) resourceOf(obj *metav1.PartialObjectMetadata) gc.Resource {
	s.t.Helper()
	r, ok := s.byKind[obj.GroupVersionKind()]
	if !ok {
		s.fatalf("no resource of %v", obj.GroupVersionKind())
	}
	return r
}

// send delivers one watch event of obj's resource and waits until the graph has applied it.
func (s *scenario) send(t watch.EventType, obj *metav1.PartialObjectMetadata) {
	s.t.Helper()
	sw := s.watches[s.resourceOf(obj).GVR]
	if sw.failing.Load() {
		s.fatalf("%s: its resource's watch failed", obj.Name)
	}
	sw.w.Action(t, obj.DeepCopy())
	s.bookmark(sw)
}

// bookmark sends a bookmark: once the reflector took it, everything sent before is applied.
func (s *scenario) bookmark(sw *scWatch) {
	s.rv++
	sw.w.Action(watch.Bookmark, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(1000 + s.rv)}})
}

func (s *scenario) tracked(obj *metav1.PartialObjectMetadata) (*metav1.PartialObjectMetadata, error) {
	o, err := s.fake.Tracker().Get(s.resourceOf(obj).GVR, obj.Namespace, obj.Name)
	if err != nil {
		return nil, err
	}
	return o.(*metav1.PartialObjectMetadata).DeepCopy(), nil
}

// --- steps ---

// upsert writes objs to the API and delivers them through the watch.
func (s *scenario) upsert(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.begin("upsert %s", names(objs))
	for _, o := range objs {
		err := s.fake.Tracker().Update(s.resourceOf(o).GVR, o.DeepCopy(), o.Namespace)
		if apierrors.IsNotFound(err) {
			err = s.fake.Tracker().Add(o.DeepCopy())
		}
		if err != nil {
			s.fatalf("%s: %v", o.Name, err)
		}
		s.send(watch.Modified, o)
	}
}

// deliver sends the live version of objs through the watch (after the processor wrote them).
func (s *scenario) deliver(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.begin("deliver %s", names(objs))
	for _, o := range objs {
		live, err := s.tracked(o)
		if err != nil {
			s.fatalf("%s: %v", o.Name, err)
		}
		s.send(watch.Modified, live)
	}
}

// remove deletes objs from the API and delivers the deletions.
func (s *scenario) remove(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.begin("remove %s", names(objs))
	for _, o := range objs {
		if err := s.fake.Tracker().Delete(s.resourceOf(o).GVR, o.Namespace, o.Name); err != nil {
			s.fatalf("%s: %v", o.Name, err)
		}
		s.send(watch.Deleted, o)
	}
}

// failResource makes r's watch end and every later list and watch of r fail, and waits until
// the collector names it unsynced.
func (s *scenario) failResource(r gc.Resource) {
	s.t.Helper()
	s.begin("failResource %s", gc.GVRString(r.GVR))
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
	s.begin("recoverResource %s", gc.GVRString(r.GVR))
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
	s.begin("processOwners")
	for range 1000 {
		if s.p.queue.Len() == 0 {
			return
		}
		s.p.queue.ProcessNext(s.ctx, func(ctx context.Context, uid types.UID) (work.Outcome, error) {
			out, err := s.p.process(ctx, uid)
			line := fmt.Sprintf("owner %s: %s", uid, out)
			if err != nil {
				line += " error"
			}
			s.outcomes = append(s.outcomes, line)
			if out == work.Done {
				delete(s.pending, uid)
			} else {
				s.pending[uid] = struct{}{}
			}
			return out, err
		})
	}
	s.fatalf("more than 1000 owners processed")
}

// retryPending enqueues again the owners whose last outcome was Retry or WaitForSync, as their
// backoff would once elapsed.
func (s *scenario) retryPending() {
	s.t.Helper()
	s.begin("retryPending")
	for uid := range s.pending {
		s.p.Enqueue(uid)
	}
	clear(s.pending)
}

// resync runs one level-driven round of the processor.
func (s *scenario) resync() {
	s.t.Helper()
	s.begin("resync")
	s.p.resync()
}

// --- assertions ---

// assertQueued checks the owners waiting in the processor's queue (as a set), without
// consuming them.
func (s *scenario) assertQueued(want ...types.UID) {
	s.t.Helper()
	s.begin("assertQueued")
	var got []types.UID
	for s.p.queue.Len() > 0 {
		s.p.queue.ProcessNext(s.ctx, func(_ context.Context, uid types.UID) (work.Outcome, error) {
			got = append(got, uid)
			return work.Done, nil
		})
	}
	for _, uid := range got {
		s.p.queue.Add(uid)
	}
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		s.errorf("queued owners %v, want %v", got, want)
	}
}

// assertOutcomes checks the owners processed since the last call, in order.
func (s *scenario) assertOutcomes(want ...string) {
	s.t.Helper()
	s.begin("assertOutcomes")
	if !slices.Equal(s.outcomes, want) {
		s.errorf("outcomes\n got: %q\nwant: %q", s.outcomes, want)
	}
	s.outcomes = nil
}

// assertActions checks the writes and reads since the last call (lists and watches are the
// reflectors'), in order; unordered holds the first n, whose order is free (concurrent patches).
func (s *scenario) assertActions(unordered int, want ...string) {
	s.t.Helper()
	s.begin("assertActions")
	got := s.actions()
	if len(got) >= unordered && len(want) >= unordered {
		slices.Sort(got[:unordered])
		want = slices.Clone(want)
		slices.Sort(want[:unordered])
	}
	if !slices.Equal(got, want) {
		s.errorf("API calls\n got: %q\nwant: %q", got, want)
	}
}

// actions renders and clears the fake's actions but lists and watches: "GET widgets ns/owner",
// "PATCH widgets ns/d1 strategic {...}", "DELETE widgets ns/d1".
func (s *scenario) actions() []string {
	var out []string
	for _, a := range s.fake.Actions() {
		verb := a.GetVerb()
		if verb == "list" || verb == "watch" {
			continue
		}
		line := fmt.Sprintf("%s %s %s/", strings.ToUpper(verb), a.GetResource().Resource, a.GetNamespace())
		switch a := a.(type) {
		case clienttesting.PatchAction:
			pt := map[types.PatchType]string{types.StrategicMergePatchType: "strategic", types.MergePatchType: "merge"}[a.GetPatchType()]
			line += fmt.Sprintf("%s %s %s", a.GetName(), pt, a.GetPatch())
		case clienttesting.GetAction: // deletes too
			line += a.GetName()
		}
		out = append(out, line)
	}
	s.fake.ClearActions()
	return out
}

// assertEvents checks the processor's Events since the last call, in order.
func (s *scenario) assertEvents(want ...string) {
	s.t.Helper()
	s.begin("assertEvents")
	if got := s.events(); !slices.Equal(got, want) {
		s.errorf("Events\n got: %q\nwant: %q", got, want)
	}
}

func (s *scenario) events() []string {
	var out []string
	for {
		select {
		case e := <-s.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// assertMetric checks one counter sample; labels are name, value pairs (0 when never counted).
func (s *scenario) assertMetric(name string, want float64, labels ...string) {
	s.t.Helper()
	s.begin("assertMetric %s%v", name, labels)
	got, err := scSample(s.reg, name, labels...)
	if err != nil {
		s.fatalf("%v", err)
	}
	if got != want {
		s.errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func scSample(reg *prometheus.Registry, name string, labels ...string) (float64, error) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			if m.GetCounter() == nil {
				return 0, errors.New(name + " is not a counter")
			}
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, nil
}

// assertLive checks obj in the API: its owner references (by UID) and finalizers.
func (s *scenario) assertLive(obj *metav1.PartialObjectMetadata, owners []types.UID, finalizers ...string) {
	s.t.Helper()
	s.begin("assertLive %s", obj.Name)
	live, err := s.tracked(obj)
	if err != nil {
		s.errorf("%s: %v", obj.Name, err)
		return
	}
	var got []types.UID
	for _, r := range live.OwnerReferences {
		got = append(got, r.UID)
	}
	if !slices.Equal(got, owners) {
		s.errorf("%s references %v, want %v", obj.Name, got, owners)
	}
	if !slices.Equal(live.Finalizers, finalizers) {
		s.errorf("%s finalizers %q, want %q", obj.Name, live.Finalizers, finalizers)
	}
}

// assertBlocking checks the graph's BlockingDependents of uid.
func (s *scenario) assertBlocking(uid types.UID, want int) {
	s.t.Helper()
	s.begin("assertBlocking %s", uid)
	if got := s.c.BlockingDependents(uid); got != want {
		s.errorf("BlockingDependents(%s) = %d, want %d", uid, got, want)
	}
}

// assertOwnerStates checks the graph's verdict on each owner reference of uid.
func (s *scenario) assertOwnerStates(uid types.UID, want ...graph.OwnerState) {
	s.t.Helper()
	s.begin("assertOwnerStates %s", uid)
	var got []graph.OwnerState
	for _, o := range s.c.Owners(uid) {
		got = append(got, o.State)
	}
	if !slices.Equal(got, want) {
		s.errorf("owner states of %s = %v, want %v", uid, got, want)
	}
}

// assertNoNode checks that the graph holds nothing for uid.
func (s *scenario) assertNoNode(uid types.UID) {
	s.t.Helper()
	s.begin("assertNoNode %s", uid)
	if n, ok := s.c.Node(uid); ok {
		s.errorf("node %s = %+v, want none", uid, n)
	}
}

// --- objects ---

// scObj is an object of r in namespace "ns".
func scObj(r gc.Resource, name string, uid types.UID, rv string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: r.GVR.GroupVersion().String(), Kind: r.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, ResourceVersion: rv, OwnerReferences: refs},
	}
}

func scRefTo(obj *metav1.PartialObjectMetadata) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: obj.APIVersion, Kind: obj.Kind, Name: obj.Name, UID: obj.UID}
}

func scBlocking(ref metav1.OwnerReference) metav1.OwnerReference {
	t := true
	ref.BlockOwnerDeletion = &t
	return ref
}

func names(objs []*metav1.PartialObjectMetadata) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return strings.Join(out, ",")
}
