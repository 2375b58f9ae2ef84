package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/client"
	"github.com/cascade-gc/cascade/client/clienttest"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/work"
)

// Scenario tests in the style of in-tree TestConflictingData
// (pkg/controller/garbagecollector/garbagecollector_test.go): one Controller over a fake API,
// events in, queue items processed one by one, and after each step assertions on the graph,
// the queues, the API calls and the Events. No goroutine of the controller runs and no clock
// is read: the queues' retries wait on a fake clock that never moves, so an item comes back
// only when the scenario says so (retryPending). Every step ends with a consistency check of
// the graph through its exported queries (checkGraph), the part of graph's invariants that
// can be seen from outside it.
//
// A scenario is a sequence of method calls on *scenario, each one step; steps are methods
// rather than package-level functions so their names never collide with this package's other
// test helpers.

// Resources of the scenarios: widgets and gizmos are watched (monitors registered by hand, as
// the discovery loop would), configmaps are mapped but not watched (their owners are only ever
// virtual).
var (
	scWidgets    = Resource{GVR: clienttest.Widgets, Kind: "Widget", Namespaced: true}
	scGizmos     = Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}, Kind: "Gizmo", Namespaced: true}
	scConfigMaps = Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}

	// scT0 is the time of the schedule of re-verifications.
	scT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// scenarioSetup is the world a scenario starts in.
type scenarioSetup struct {
	// watched have a monitor whose initial list is in (unless unlisted); mapped are only in the
	// REST mapper. Watched and unlisted resources are mapped too.
	watched, mapped []Resource
	// unlisted are watched resources whose initial list never arrived.
	unlisted []Resource
	// objects are in the fake API (not in the graph: observe them).
	objects []runtime.Object
	// standby holds Deps.Elected open: the replica does not lead until lead().
	standby bool
	// reverifyPeriod is Deps.OwnerReverifyPeriod (default when zero).
	reverifyPeriod time.Duration
}

// scenario is one collector under test and what it did. Only the test goroutine touches it.
type scenario struct {
	t       *testing.T
	c       *Controller
	fake    *metadatafake.FakeMetadataClient
	rec     *record.FakeRecorder
	reg     *prometheus.Registry
	handed  *ownerRecorder
	elected chan struct{}
	byKind  map[schema.GroupVersionKind]Resource

	// universe holds every UID the scenario named in an event: the graph can hold no other.
	universe map[types.UID]struct{}
	// pending are the items whose last outcome asked for a later retry (Retry, WaitForSync);
	// retryPending adds them again, as their backoff would.
	pendingDeletes  map[types.UID]struct{}
	pendingVerifies map[graph.Ref]struct{}
	// outcomes of processed items since the last assertOutcomes: "delete u-dep: Done".
	outcomes []string
	reverify *reverifySchedule

	stepN    int
	stepName string
}

// ownerRecorder is Deps.Finalizers: it records the owners handed over.
type ownerRecorder struct{ uids []types.UID }

func (r *ownerRecorder) Enqueue(uid types.UID) { r.uids = append(r.uids, uid) }

// fixedMapper is a REST mapper that discovery never changes.
type fixedMapper struct{ *meta.DefaultRESTMapper }

func (fixedMapper) Reset() {}

func newScenario(t *testing.T, setup scenarioSetup) *scenario {
	t.Helper()
	fake := clienttest.NewFake(setup.objects...)
	honorDeletePreconditions(fake)
	mapper := meta.NewDefaultRESTMapper(nil)
	byKind := map[schema.GroupVersionKind]Resource{}
	for _, r := range slices.Concat(setup.watched, setup.unlisted, setup.mapped) {
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		gvk := r.GVR.GroupVersion().WithKind(r.Kind)
		mapper.AddSpecific(gvk, r.GVR, r.GVR.GroupVersion().WithResource(strings.TrimSuffix(r.GVR.Resource, "s")), scope)
		byKind[gvk] = r
	}
	s := &scenario{
		t: t, fake: fake, rec: record.NewFakeRecorder(100), reg: prometheus.NewRegistry(), handed: &ownerRecorder{},
		byKind: byKind, universe: map[types.UID]struct{}{},
		pendingDeletes: map[types.UID]struct{}{}, pendingVerifies: map[graph.Ref]struct{}{},
	}
	deps := Deps{
		Client:              client.New(fake),
		Mapper:              fixedMapper{mapper},
		Recorder:            s.rec,
		Metrics:             NewMetrics(s.reg),
		WorkMetrics:         work.NewMetrics(s.reg),
		Finalizers:          s.handed,
		OwnerReverifyPeriod: setup.reverifyPeriod,
	}
	if setup.standby {
		s.elected = make(chan struct{})
		deps.Elected = s.elected
	}
	s.c = New(deps)
	s.reverify = newReverifySchedule(s.c.deps.OwnerReverifyPeriod)
	// Queues whose delayed adds (Retry, WaitForSync) wait on a clock that never moves.
	clk := clocktesting.NewFakeClock(scT0)
	s.c.deleteQueue.ShutDown()
	s.c.verifyQueue.ShutDown()
	s.c.deleteQueue = work.NewQueue("attempt_to_delete", work.Options[types.UID]{Clock: clk, Metrics: deps.WorkMetrics})
	s.c.verifyQueue = work.NewQueue("verify_owner", work.Options[graph.Ref]{Clock: clk, Metrics: deps.WorkMetrics})
	t.Cleanup(func() {
		s.c.deleteQueue.ShutDown()
		s.c.verifyQueue.ShutDown()
	})
	for _, r := range slices.Concat(setup.watched, setup.unlisted) {
		// No reflector: the scenario is the watch. cancel and done let monitors.stop end it.
		done := make(chan struct{})
		close(done)
		m := &monitor{res: r, store: &graphStore{res: r, graph: s.c}, cancel: func() {}, done: done}
		m.store.synced.Store(!slices.Contains(setup.unlisted, r))
		s.c.monitors.byR[r.GVR] = m
		s.c.monitors.byGK[schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}] = m
	}
	s.c.discovered.Store(true)
	// Whatever was not asserted is an API call or Event nobody expected.
	t.Cleanup(func() {
		if a := s.actions(); len(a) > 0 {
			t.Errorf("API calls never asserted: %q", a)
		}
		if e := s.events(); len(e) > 0 {
			t.Errorf("Events never asserted: %q", e)
		}
	})
	return s
}

// honorDeletePreconditions makes the fake answer a DELETE whose UID or resourceVersion
// precondition does not hold with 409, as the API server does.
func honorDeletePreconditions(fake *metadatafake.FakeMetadataClient) {
	fake.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		obj, err := fake.Tracker().Get(d.GetResource(), d.GetNamespace(), d.GetName())
		if err != nil {
			return false, nil, nil // the tracker answers 404
		}
		live := obj.(*metav1.PartialObjectMetadata)
		p := d.GetDeleteOptions().Preconditions
		if p != nil && (p.UID != nil && *p.UID != live.UID || p.ResourceVersion != nil && *p.ResourceVersion != live.ResourceVersion) {
			return true, nil, apierrors.NewConflict(d.GetResource().GroupResource(), d.GetName(),
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		return false, nil, nil
	})
}

// --- step plumbing ---

func (s *scenario) begin(format string, args ...any) {
	s.stepN++
	s.stepName = fmt.Sprintf("step %d (%s)", s.stepN, fmt.Sprintf(format, args...))
}

// end closes a step that may have changed the graph: its consistency is checked.
func (s *scenario) end() {
	s.t.Helper()
	s.c.mu.RLock()
	err := checkGraph(s.c.g, s.universe)
	s.c.mu.RUnlock()
	if err != nil {
		s.t.Fatalf("%s: graph inconsistent:\n%v", s.stepName, err)
	}
}

func (s *scenario) errorf(format string, args ...any) {
	s.t.Helper()
	s.t.Errorf("%s: %s", s.stepName, fmt.Sprintf(format, args...))
}

func (s *scenario) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s: %s", s.stepName, fmt.Sprintf(format, args...))
}

func (s *scenario) resourceOf(obj *metav1.PartialObjectMetadata) Resource {
	s.t.Helper()
	r, ok := s.byKind[obj.GroupVersionKind()]
	if !ok {
		s.fatalf("no resource of %v in this scenario", obj.GroupVersionKind())
	}
	return r
}

func (s *scenario) store(obj *metav1.PartialObjectMetadata) *graphStore {
	s.t.Helper()
	r := s.resourceOf(obj)
	m, ok := s.c.monitors.byR[r.GVR]
	if !ok {
		s.fatalf("%s is not watched: its objects are never observed", GVRString(r.GVR))
	}
	return m.store
}

func (s *scenario) know(uids ...types.UID) {
	for _, u := range uids {
		s.universe[u] = struct{}{}
	}
}

func (s *scenario) knowObject(obj *metav1.PartialObjectMetadata) {
	s.know(obj.UID)
	for _, r := range obj.OwnerReferences {
		s.know(r.UID)
	}
}

// --- steps: the graph's input ---

// observe delivers objs as a watch would (add or update), through their resource's store.
func (s *scenario) observe(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.begin("observe %s", names(objs))
	for _, o := range objs {
		s.knowObject(o)
		if err := s.store(o).Update(o.DeepCopy()); err != nil {
			s.fatalf("store: %v", err)
		}
	}
	s.end()
}

// observeDeleted delivers the deletion of objs as a watch would.
func (s *scenario) observeDeleted(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.begin("observeDeleted %s", names(objs))
	for _, o := range objs {
		s.know(o.UID)
		if err := s.store(o).Delete(o.DeepCopy()); err != nil {
			s.fatalf("store: %v", err)
		}
	}
	s.end()
}

// deliver observes the live version of objs (what the watch brings after a write).
func (s *scenario) deliver(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	live := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		live = append(live, s.live(o))
	}
	s.observe(live...)
}

// live reads obj's live version from the fake's tracker (no action recorded).
func (s *scenario) live(obj *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	s.t.Helper()
	l, err := s.tracked(obj)
	if err != nil {
		s.fatalf("%s: %v", obj.Name, err)
	}
	return l
}

func (s *scenario) tracked(obj *metav1.PartialObjectMetadata) (*metav1.PartialObjectMetadata, error) {
	o, err := s.fake.Tracker().Get(s.resourceOf(obj).GVR, obj.Namespace, obj.Name)
	if err != nil {
		return obj, err
	}
	return o.(*metav1.PartialObjectMetadata).DeepCopy(), nil
}

// relist delivers a complete list of r (the reflector's Replace), which ends a failure.
func (s *scenario) relist(r Resource, objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.begin("relist %s %s", GVRString(r.GVR), names(objs))
	list := make([]any, 0, len(objs))
	for _, o := range objs {
		s.knowObject(o)
		list = append(list, o.DeepCopy())
	}
	if err := s.c.monitors.byR[r.GVR].store.Replace(list, ""); err != nil {
		s.fatalf("replace: %v", err)
	}
	s.end()
}

// watch starts watching r as the discovery loop does when discovery lists it (a new preferred
// version, say); its initial list is not in yet (relist).
func (s *scenario) watch(r Resource) {
	s.t.Helper()
	s.begin("watch %s", GVRString(r.GVR))
	if _, ok := s.byKind[r.GVR.GroupVersion().WithKind(r.Kind)]; !ok {
		s.fatalf("%s is not mapped in this scenario", GVRString(r.GVR))
	}
	done := make(chan struct{})
	close(done)
	m := &monitor{res: r, store: &graphStore{res: r, graph: s.c}, cancel: func() {}, done: done}
	s.c.monitors.mu.Lock()
	s.c.monitors.byR[r.GVR] = m
	s.c.monitors.byGK[schema.GroupKind{Group: r.GVR.Group, Kind: r.Kind}] = m
	s.c.monitors.mu.Unlock()
	s.end()
}

// discoveryRound hands the graph the stopped resources that are due now (the end of a discovery
// round: unwatchStopped).
func (s *scenario) discoveryRound() {
	s.t.Helper()
	s.begin("discoveryRound")
	s.c.unwatchStopped(context.Background())
	s.end()
}

// unwatch stops watching r as the discovery loop does when discovery no longer lists it: its
// monitor is stopped, then the stopped resources that are due are handed to the graph
// (unwatchStopped, graph.EventUnwatched).
func (s *scenario) unwatch(r Resource) {
	s.t.Helper()
	s.begin("unwatch %s", GVRString(r.GVR))
	s.c.monitors.stop(r.GVR)
	s.c.unwatchStopped(context.Background())
	s.end()
}

// failStore records a list or watch failure of r's monitor.
func (s *scenario) failStore(r Resource, err error) {
	s.t.Helper()
	s.begin("failStore %s", GVRString(r.GVR))
	s.c.monitors.byR[r.GVR].store.failed(err)
	s.end()
}

// --- steps: the API ---

// setLive writes objs to the fake API (create or replace) without any watch event.
func (s *scenario) setLive(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.begin("setLive %s", names(objs))
	for _, o := range objs {
		gvr := s.resourceOf(o).GVR
		err := s.fake.Tracker().Update(gvr, o.DeepCopy(), o.Namespace)
		if apierrors.IsNotFound(err) {
			err = s.fake.Tracker().Add(o.DeepCopy())
		}
		if err != nil {
			s.fatalf("setLive %s: %v", o.Name, err)
		}
	}
	s.end()
}

// deleteLive removes objs from the fake API without any watch event.
func (s *scenario) deleteLive(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.begin("deleteLive %s", names(objs))
	for _, o := range objs {
		if err := s.fake.Tracker().Delete(s.resourceOf(o).GVR, o.Namespace, o.Name); err != nil {
			s.fatalf("deleteLive %s: %v", o.Name, err)
		}
	}
	s.end()
}

// failNext makes the next call of verb (get, delete, patch) fail with err.
func (s *scenario) failNext(verb string, err error) {
	s.t.Helper()
	s.begin("failNext %s", verb)
	used := false
	s.fake.PrependReactor(verb, "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		if used {
			return false, nil, nil
		}
		used = true
		return true, nil, err
	})
	s.end()
}

// --- steps: the controller ---

// lead makes the standby the leader (its held-back Events go out).
func (s *scenario) lead() {
	s.t.Helper()
	s.begin("lead")
	if s.elected != nil {
		close(s.elected)
		s.elected = nil
	}
	s.c.lead()
	s.end()
}

func (s *scenario) mustLead() {
	s.t.Helper()
	if !s.c.leading.Load() {
		s.fatalf("a standby runs no workers: lead() first")
	}
}

// processDeletes runs attemptToDelete on every dependent queued, until none is left. Items
// retried wait for retryPending.
func (s *scenario) processDeletes() {
	s.t.Helper()
	s.begin("processDeletes")
	s.mustLead()
	drive(s, s.c.deleteQueue, "delete", func(u types.UID) string { return string(u) }, s.c.attemptToDelete, s.pendingDeletes)
	s.end()
}

// processVerifies runs verifyOwner on every claim queued, until none is left.
func (s *scenario) processVerifies() {
	s.t.Helper()
	s.begin("processVerifies")
	s.mustLead()
	drive(s, s.c.verifyQueue, "verify", func(r graph.Ref) string { return string(r.UID) }, s.c.verifyOwner, s.pendingVerifies)
	s.end()
}

// settle processes both queues until both are empty.
func (s *scenario) settle() {
	s.t.Helper()
	for range 100 {
		if s.c.deleteQueue.Len() == 0 && s.c.verifyQueue.Len() == 0 {
			return
		}
		s.processVerifies()
		s.processDeletes()
	}
	s.fatalf("the queues never emptied")
}

// drive processes q until it is empty; at most 1000 items, so a loop fails instead of hanging.
func drive[T comparable](s *scenario, q *work.Queue[T], name string, key func(T) string, fn work.Func[T], pending map[T]struct{}) {
	s.t.Helper()
	for range 1000 {
		if q.Len() == 0 {
			return
		}
		q.ProcessNext(context.Background(), func(ctx context.Context, item T) (work.Outcome, error) {
			out, err := fn(ctx, item)
			line := fmt.Sprintf("%s %s: %s", name, key(item), out)
			if err != nil {
				line += " error"
			}
			s.outcomes = append(s.outcomes, line)
			if out == work.Done {
				delete(pending, item)
			} else {
				pending[item] = struct{}{}
			}
			return out, err
		})
	}
	s.fatalf("%s: more than 1000 items processed", name)
}

// retryPending adds again every item whose last outcome was Retry or WaitForSync, as their
// backoff would once elapsed.
func (s *scenario) retryPending() {
	s.t.Helper()
	s.begin("retryPending")
	for u := range s.pendingDeletes {
		s.c.deleteQueue.Add(u)
	}
	for r := range s.pendingVerifies {
		s.c.verifyQueue.Add(r)
	}
	clear(s.pendingDeletes)
	clear(s.pendingVerifies)
	s.end()
}

// enqueueDelete hands dependents to the delete workers (as a resync would).
func (s *scenario) enqueueDelete(uids ...types.UID) {
	s.t.Helper()
	s.begin("enqueueDelete %v", uids)
	for _, u := range uids {
		s.c.deleteQueue.Add(u)
	}
	s.end()
}

// resyncForeground runs one round of the foreground resync.
func (s *scenario) resyncForeground() {
	s.t.Helper()
	s.begin("resyncForeground")
	s.c.resyncForeground()
	s.end()
}

// reverifyAt runs one round of the re-verification of present-but-unobserved claims at scT0+d
// (runReverify's tick).
func (s *scenario) reverifyAt(d time.Duration) {
	s.t.Helper()
	s.begin("reverifyAt %v", d)
	s.c.mu.RLock()
	claims := s.c.g.UnobservedPresentClaims()
	s.c.mu.RUnlock()
	for _, c := range s.reverify.due(scT0.Add(d), claims) {
		s.c.verifyQueue.Add(c)
	}
	s.end()
}

// --- assertions ---

// assertQueued checks the items waiting in the queues (as sets), without consuming them.
func (s *scenario) assertQueued(deletes []types.UID, verifies []graph.Ref) {
	s.t.Helper()
	s.begin("assertQueued")
	gotD, gotV := peek(s.c.deleteQueue), peek(s.c.verifyQueue)
	slices.Sort(gotD)
	wantD := slices.Clone(deletes)
	slices.Sort(wantD)
	if !slices.Equal(gotD, wantD) {
		s.errorf("delete queue = %v, want %v", gotD, wantD)
	}
	byString := func(a, b graph.Ref) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(gotV, byString)
	wantV := slices.Clone(verifies)
	slices.SortFunc(wantV, byString)
	if !slices.Equal(gotV, wantV) {
		s.errorf("verify queue = %v, want %v", gotV, wantV)
	}
}

// peek returns the items waiting in q and puts them back in the same order.
func peek[T comparable](q *work.Queue[T]) []T {
	var items []T
	for q.Len() > 0 {
		q.ProcessNext(context.Background(), func(_ context.Context, item T) (work.Outcome, error) {
			items = append(items, item)
			return work.Done, nil
		})
	}
	for _, it := range items {
		q.Add(it)
	}
	return items
}

// assertOutcomes checks the items processed since the last call, in order.
func (s *scenario) assertOutcomes(want ...string) {
	s.t.Helper()
	s.begin("assertOutcomes")
	if !slices.Equal(s.outcomes, want) {
		s.errorf("outcomes\n got: %q\nwant: %q", s.outcomes, want)
	}
	s.outcomes = nil
}

// assertActions checks the API calls since the last call, in order.
func (s *scenario) assertActions(want ...string) {
	s.t.Helper()
	s.begin("assertActions")
	if got := s.actions(); !slices.Equal(got, want) {
		s.errorf("API calls\n got: %q\nwant: %q", got, want)
	}
}

// actions renders and clears the fake's actions: "DELETE widgets ns/dep uid=u-dep rv=3",
// "GET configmaps ns/cm", "PATCH widgets ns/dep strategic {...}".
func (s *scenario) actions() []string {
	var out []string
	for _, a := range s.fake.Actions() {
		line := fmt.Sprintf("%s %s %s/", strings.ToUpper(a.GetVerb()), a.GetResource().Resource, a.GetNamespace())
		switch a := a.(type) {
		case clienttesting.PatchAction:
			pt := map[types.PatchType]string{types.StrategicMergePatchType: "strategic", types.MergePatchType: "merge"}[a.GetPatchType()]
			line += fmt.Sprintf("%s %s %s", a.GetName(), pt, a.GetPatch())
		case clienttesting.DeleteAction:
			line += a.GetName()
			o := a.GetDeleteOptions()
			if p := o.Preconditions; p != nil {
				if p.UID != nil {
					line += " uid=" + string(*p.UID)
				}
				if p.ResourceVersion != nil {
					line += " rv=" + *p.ResourceVersion
				}
			}
			if o.PropagationPolicy != nil {
				line += " propagation=" + string(*o.PropagationPolicy)
			}
		case clienttesting.GetAction:
			line += a.GetName()
		}
		out = append(out, line)
	}
	s.fake.ClearActions()
	return out
}

// assertEvents checks the Events emitted since the last call, in order.
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

// assertHandedOver checks the owners handed to the finalizers since the last call, in order.
func (s *scenario) assertHandedOver(want ...types.UID) {
	s.t.Helper()
	s.begin("assertHandedOver")
	if !slices.Equal(s.handed.uids, want) {
		s.errorf("owners handed to the finalizers = %v, want %v", s.handed.uids, want)
	}
	s.handed.uids = nil
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

// assertBlocking checks BlockingDependents of uid.
func (s *scenario) assertBlocking(uid types.UID, want int) {
	s.t.Helper()
	s.begin("assertBlocking %s", uid)
	if got := s.c.BlockingDependents(uid); got != want {
		s.errorf("BlockingDependents(%s) = %d, want %d", uid, got, want)
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

// assertStats checks some of the graph's counts.
func (s *scenario) assertStats(check func(graph.Stats) error) {
	s.t.Helper()
	s.begin("assertStats")
	if err := check(s.c.GraphStats()); err != nil {
		s.errorf("%v", err)
	}
}

// assertUnsynced checks what Unsynced says: "gizmos.v1.example.com synced=false err=...".
func (s *scenario) assertUnsynced(want ...string) {
	s.t.Helper()
	s.begin("assertUnsynced")
	var got []string
	for _, u := range s.c.Unsynced() {
		got = append(got, fmt.Sprintf("%s synced=%t err=%s", GVRString(u.Resource.GVR), u.Synced, u.Err))
	}
	if !slices.Equal(got, want) {
		s.errorf("Unsynced() = %v, want %v", got, want)
	}
}

// assertMetric checks one sample of the registry; labels are name, value pairs. A counter never
// incremented reads 0.
func (s *scenario) assertMetric(name string, want float64, labels ...string) {
	s.t.Helper()
	s.begin("assertMetric %s%v", name, labels)
	got, err := sample(s.reg, name, labels...)
	if err != nil {
		s.fatalf("%v", err)
	}
	if got != want {
		s.errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func sample(reg *prometheus.Registry, name string, labels ...string) (float64, error) {
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
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), nil
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), nil
			}
			return 0, fmt.Errorf("%s is neither a counter nor a gauge", name)
		}
	}
	return 0, nil
}

// assertLive checks that obj is still in the fake API with the owner references refs (by UID).
func (s *scenario) assertLive(obj *metav1.PartialObjectMetadata, refs ...types.UID) {
	s.t.Helper()
	s.begin("assertLive %s", obj.Name)
	obj, err := s.tracked(obj)
	if err != nil {
		s.errorf("%s: %v", obj.Name, err)
		return
	}
	var got []types.UID
	for _, r := range obj.OwnerReferences {
		got = append(got, r.UID)
	}
	if !slices.Equal(got, refs) {
		s.errorf("%s references %v, want %v", obj.Name, got, refs)
	}
}

// --- the graph's consistency, through its exported queries ---

// checkGraph checks what graph's invariants (graph/doc.go) say that can be seen from outside
// the graph, over every node whose UID is in universe (the graph can hold no other):
// each node is one of observed, virtual, absent (1); only observed nodes have references,
// deletion state and GC finalizers (2); references and dependents lists mirror each other,
// without duplicates (3); virtual and absent nodes have dependents (4); Stats, DeletingOwners
// and ObservedOf equal a recount (6); Owners mirrors the node's references; every present but
// unobserved claim names a virtual node.
func checkGraph(g *graph.Graph, universe map[types.UID]struct{}) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	count := graph.Stats{PerResource: map[string]int{}}
	deleting := map[types.UID]bool{}
	for uid := range universe {
		n, ok := g.Node(uid)
		if !ok {
			continue
		}
		deps := g.Dependents(uid)
		switch {
		case n.Virtual && n.Absent:
			fail("%s is both virtual and absent", uid)
		case n.Virtual || n.Absent:
			if n.Virtual {
				count.Virtual++
			} else {
				count.Absent++
			}
			if len(n.Owners) > 0 || n.Deleting || n.Finalizers != 0 {
				fail("%s is not observed but has references, deletion state or finalizers: %+v", uid, n)
			}
			if len(deps) == 0 {
				fail("%s is virtual or absent without dependents", uid)
			}
		default:
			count.Observed++
			count.PerResource[n.APIVersion+", Kind="+n.Kind]++
			if n.Orphaned {
				fail("observed node %s marked as an orphaned tombstone", uid)
			}
			if n.Deleting && n.Finalizers.Has(graph.FinalizerOrphan) {
				count.WaitingOrphan++
			}
			if n.Deleting && n.Finalizers.Has(graph.FinalizerForeground) {
				count.WaitingForeground++
			}
			if n.Deleting && n.Finalizers != 0 {
				deleting[uid] = true
			}
			owners := g.Owners(uid)
			if len(owners) != len(n.Owners) {
				fail("%s: Owners has %d entries, the node %d references", uid, len(owners), len(n.Owners))
			}
			for i, o := range n.Owners {
				if i < len(owners) && owners[i].OwnerRef != o {
					fail("%s: Owners[%d] = %+v, the node says %+v", uid, i, owners[i].OwnerRef, o)
				}
				if _, ok := g.Node(o.UID); !ok {
					fail("%s references %s, which has no node", uid, o.UID)
				}
				if !slices.ContainsFunc(g.Dependents(o.UID), func(r graph.Ref) bool { return r.UID == uid }) {
					fail("%s references %s but is not among its dependents", uid, o.UID)
				}
			}
		}
		if n.Dependents != len(deps) {
			fail("%s: Dependents = %d, the list holds %d", uid, n.Dependents, len(deps))
		}
		seen := map[types.UID]bool{}
		for _, d := range deps {
			if seen[d.UID] {
				fail("%s lists dependent %s twice", uid, d.UID)
			}
			seen[d.UID] = true
			dn, ok := g.Node(d.UID)
			if !ok || dn.Virtual || dn.Absent {
				fail("dependent %s of %s is not an observed node", d.UID, uid)
				continue
			}
			if !slices.ContainsFunc(dn.Owners, func(o graph.OwnerRef) bool { return o.UID == uid }) {
				fail("dependent %s of %s does not reference it", d.UID, uid)
			}
		}
	}
	st := g.Stats()
	if st.Observed != count.Observed || st.Virtual != count.Virtual || st.Absent != count.Absent ||
		st.Nodes != st.Observed+st.Virtual+st.Absent {
		fail("Stats counts nodes %d = %d observed + %d virtual + %d absent; recount %d, %d, %d",
			st.Nodes, st.Observed, st.Virtual, st.Absent, count.Observed, count.Virtual, count.Absent)
	}
	if st.WaitingOrphan != count.WaitingOrphan || st.WaitingForeground != count.WaitingForeground {
		fail("Stats waiting orphan %d, foreground %d; recount %d, %d", st.WaitingOrphan, st.WaitingForeground, count.WaitingOrphan, count.WaitingForeground)
	}
	for key, n := range st.PerResource {
		if count.PerResource[key] != n {
			fail("Stats.PerResource[%s] = %d, recount %d", key, n, count.PerResource[key])
		}
		apiVersion, kind := splitKindKey(key)
		if got := len(g.ObservedOf(apiVersion, kind)); got != n {
			fail("ObservedOf(%s) holds %d objects, Stats %d", key, got, n)
		}
	}
	if len(st.PerResource) != len(count.PerResource) {
		fail("Stats.PerResource = %v, recount %v", st.PerResource, count.PerResource)
	}
	got := g.DeletingOwners()
	if len(got) != len(deleting) {
		fail("DeletingOwners = %v, recount %v", got, deleting)
	}
	for _, uid := range got {
		if !deleting[uid] {
			fail("DeletingOwners lists %s, which is not observed being deleted with a GC finalizer", uid)
		}
	}
	for _, c := range g.UnobservedPresentClaims() {
		if n, ok := g.Node(c.UID); !ok || !n.Virtual {
			fail("present claim %v names no virtual node", c)
		}
	}
	return errors.Join(errs...)
}

// --- objects ---

// scObj is an object of r in namespace "ns".
func scObj(r Resource, name string, uid types.UID, rv string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	ns := "ns"
	if !r.Namespaced {
		ns = ""
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: r.GVR.GroupVersion().String(), Kind: r.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, ResourceVersion: rv, OwnerReferences: refs},
	}
}

// scRefTo is a reference to obj.
func scRefTo(obj *metav1.PartialObjectMetadata) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: obj.APIVersion, Kind: obj.Kind, Name: obj.Name, UID: obj.UID}
}

// scBlocking is ref with blockOwnerDeletion: true.
func scBlocking(ref metav1.OwnerReference) metav1.OwnerReference {
	t := true
	ref.BlockOwnerDeletion = &t
	return ref
}

// scWith returns a copy of obj changed by f.
func scWith(obj *metav1.PartialObjectMetadata, f func(*metav1.PartialObjectMetadata)) *metav1.PartialObjectMetadata {
	c := obj.DeepCopy()
	f(c)
	return c
}

// scDeleting is a copy of obj at resourceVersion rv, being deleted with finalizers.
func scDeleting(obj *metav1.PartialObjectMetadata, rv string, finalizers ...string) *metav1.PartialObjectMetadata {
	return scWith(obj, func(o *metav1.PartialObjectMetadata) {
		o.ResourceVersion = rv
		clienttest.Deleting(o, finalizers...)
	})
}

// scClaim is the identity a reference to obj claims from namespace ns.
func scClaim(obj *metav1.PartialObjectMetadata, ns string) graph.Ref {
	return graph.Ref{APIVersion: obj.APIVersion, Kind: obj.Kind, Namespace: ns, Name: obj.Name, UID: obj.UID}
}

func names(objs []*metav1.PartialObjectMetadata) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return strings.Join(out, ",")
}

// notFoundForPath is the API server's 404 for a path it does not serve: no name in details.
func notFoundForPath() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource", Details: &metav1.StatusDetails{}}}
}
