package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy"
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
// test helpers. Each scenario names the bug it guards against and what must never be deleted,
// and its e2e counterpart where there is one. They are in one file a theme: scenario_verify
// (owners checked live), scenario_wait (waiting dependents decided again), scenario_ghosts
// (resources no longer watched), scenario_collect (writes on a view the live object outgrew),
// scenario_foreground, scenario_orphan and scenario_standby.

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
	// standby keeps Options.Leader closed: the replica does not lead until lead().
	standby bool
	// reverifyPeriod is Options.OwnerReverifyPeriod (default when zero).
	reverifyPeriod time.Duration
	// policy is the policy in force (built in when nil); its clock stands at scT0.
	policy *policy.Compiled
	// companion is Options.Companion (--mode=companion).
	companion bool
}

// scenario is one collector under test and what it did. Only the test goroutine touches it.
type scenario struct {
	*gctest.Harness

	t      *testing.T
	c      *Controller
	handed *ownerRecorder
	// gate and held are a standby's leader gate and Event recorder (nil otherwise).
	gate *leader.Gate
	held *client.HeldRecorder

	// universe holds every UID the scenario named in an event: the graph can hold no other.
	universe map[types.UID]struct{}
	// pending are the items whose last outcome asked for a later retry (Retry, WaitForSync);
	// retryPending adds them again, as their backoff would.
	pendingDeletes  *gctest.Pending[types.UID]
	pendingVerifies *gctest.Pending[graph.Ref]
	reverify        *reverifySchedule
}

// ownerRecorder is Options.Finalizers: it records the owners handed over.
type ownerRecorder struct{ uids []types.UID }

func (r *ownerRecorder) Enqueue(uid types.UID) { r.uids = append(r.uids, uid) }

// fixedMapper is a REST mapper that discovery never changes.
type fixedMapper struct{ *meta.DefaultRESTMapper }

func (fixedMapper) Reset() {}

func newScenario(t *testing.T, setup scenarioSetup) *scenario {
	t.Helper()
	fake := clienttest.NewFake(setup.objects...)
	honorDeletePreconditions(fake)
	honorPatchPreconditions(fake)
	mapper := meta.NewDefaultRESTMapper(nil)
	h := gctest.New(t, fake)
	for _, r := range slices.Concat(setup.watched, setup.unlisted, setup.mapped) {
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		gvk := r.GVR.GroupVersion().WithKind(r.Kind)
		mapper.AddSpecific(gvk, r.GVR, r.GVR.GroupVersion().WithResource(strings.TrimSuffix(r.GVR.Resource, "s")), scope)
		h.ByKind[gvk] = r.GVR
	}
	s := &scenario{
		Harness: h, t: t, handed: &ownerRecorder{}, universe: map[types.UID]struct{}{},
		pendingDeletes: &gctest.Pending[types.UID]{}, pendingVerifies: &gctest.Pending[graph.Ref]{},
	}
	deps := Options{
		Client:              client.New(fake),
		Mapper:              fixedMapper{mapper},
		Events:              s.Rec,
		Metrics:             NewMetrics(s.Reg),
		WorkMetrics:         work.NewMetrics(s.Reg),
		Finalizers:          s.handed,
		OwnerReverifyPeriod: setup.reverifyPeriod,
		Companion:           setup.companion,
	}
	if setup.policy != nil {
		deps.Policy = func() *policy.Compiled { return setup.policy }
		deps.Clock = clocktesting.NewFakeClock(scT0)
	}
	if setup.standby {
		s.gate = &leader.Gate{}
		s.held = client.NewHeldRecorder(s.Rec, s.gate)
		deps.Leader, deps.Events = s.gate, s.held
	}
	s.c = New(deps)
	if !setup.standby {
		s.c.lead() // as Run does once the (open) gate lets it
	}
	s.Graph = s.c
	s.reverify = newReverifySchedule(s.c.opts.OwnerReverifyPeriod)
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
	// Whatever was not asserted is an API call or Event nobody expected: the harness checks.
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
			return true, nil, modified(d.GetResource(), d.GetName())
		}
		return false, nil, nil
	})
}

// modified is the API server's 409 for a write whose precondition no longer holds.
func modified(r schema.GroupVersionResource, name string) error {
	return apierrors.NewConflict(r.GroupResource(), name,
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// honorPatchPreconditions makes the fake answer a patch whose metadata.resourceVersion is not the
// live object's with 409, and a strategic merge patch whose metadata.uid is not the live
// object's with 422 (uid is immutable), as the API server does.
func honorPatchPreconditions(fake *metadatafake.FakeMetadataClient) {
	fake.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchAction)
		obj, err := fake.Tracker().Get(p.GetResource(), p.GetNamespace(), p.GetName())
		if err != nil {
			return false, nil, nil // the tracker answers 404
		}
		live := obj.(*metav1.PartialObjectMetadata)
		var body struct {
			Metadata struct {
				UID             types.UID `json:"uid"`
				ResourceVersion string    `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		switch m := body.Metadata; {
		case m.UID != "" && m.UID != live.UID:
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: p.GetResource().Group, Kind: live.Kind}, p.GetName(),
				field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), m.UID, "field is immutable")})
		case m.ResourceVersion != "" && m.ResourceVersion != live.ResourceVersion:
			return true, nil, modified(p.GetResource(), p.GetName())
		}
		return false, nil, nil
	})
}

// --- step plumbing ---

// end closes a step that may have changed the graph: its consistency is checked.
func (s *scenario) end() {
	s.t.Helper()
	s.c.mu.RLock()
	err := checkGraph(s.c.g, s.universe)
	s.c.mu.RUnlock()
	if err != nil {
		s.t.Fatalf("%s: graph inconsistent:\n%v", s.StepName(), err)
	}
}

func (s *scenario) store(obj *metav1.PartialObjectMetadata) *graphStore {
	s.t.Helper()
	gvr := s.GVR(obj)
	m, ok := s.c.monitors.byR[gvr]
	if !ok {
		s.Fatalf("%s is not watched: its objects are never observed", GVRString(gvr))
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
	s.Begin("observe %s", gctest.Names(objs))
	for _, o := range objs {
		s.knowObject(o)
		if err := s.store(o).Update(o.DeepCopy()); err != nil {
			s.Fatalf("store: %v", err)
		}
	}
	s.end()
}

// observeDeleted delivers the deletion of objs as a watch would.
func (s *scenario) observeDeleted(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.Begin("observeDeleted %s", gctest.Names(objs))
	for _, o := range objs {
		s.know(o.UID)
		if err := s.store(o).Delete(o.DeepCopy()); err != nil {
			s.Fatalf("store: %v", err)
		}
	}
	s.end()
}

// deliver observes the live version of objs (what the watch brings after a write).
func (s *scenario) deliver(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	live := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		live = append(live, s.Live(o))
	}
	s.observe(live...)
}

// relist delivers a complete list of r (the reflector's Replace), which ends a failure.
func (s *scenario) relist(r Resource, objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.Begin("relist %s %s", GVRString(r.GVR), gctest.Names(objs))
	list := make([]any, 0, len(objs))
	for _, o := range objs {
		s.knowObject(o)
		list = append(list, o.DeepCopy())
	}
	if err := s.c.monitors.byR[r.GVR].store.Replace(list, ""); err != nil {
		s.Fatalf("replace: %v", err)
	}
	s.end()
}

// watch starts watching r as the discovery loop does when discovery lists it (a new preferred
// version, say); its initial list is not in yet (relist).
func (s *scenario) watch(r Resource) {
	s.t.Helper()
	s.Begin("watch %s", GVRString(r.GVR))
	if _, ok := s.ByKind[r.GVR.GroupVersion().WithKind(r.Kind)]; !ok {
		s.Fatalf("%s is not mapped in this scenario", GVRString(r.GVR))
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
	s.Begin("discoveryRound")
	s.c.unwatchStopped(context.Background())
	s.end()
}

// unwatch stops watching r as the discovery loop does when discovery no longer lists it: its
// monitor is stopped, then the stopped resources that are due are handed to the graph
// (unwatchStopped, graph.EventUnwatched).
func (s *scenario) unwatch(r Resource) {
	s.t.Helper()
	s.Begin("unwatch %s", GVRString(r.GVR))
	// Stopped long enough ago to be due now (as a kind gone, or one missing from discovery for
	// GhostGrace): the scenarios that use it are about what follows.
	s.c.monitors.stop(r.GVR, time.Time{})
	s.c.unwatchStopped(context.Background())
	s.end()
}

// failStore records a list or watch failure of r's monitor.
func (s *scenario) failStore(r Resource, err error) {
	s.t.Helper()
	s.Begin("failStore %s", GVRString(r.GVR))
	s.c.monitors.byR[r.GVR].store.failed(err)
	s.end()
}

// --- steps: the API ---

// setLive writes objs to the fake API (create or replace) without any watch event.
func (s *scenario) setLive(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.Begin("setLive %s", gctest.Names(objs))
	s.SetObjects(objs...)
	s.end()
}

// deleteLive removes objs from the fake API without any watch event.
func (s *scenario) deleteLive(objs ...*metav1.PartialObjectMetadata) {
	s.t.Helper()
	s.Begin("deleteLive %s", gctest.Names(objs))
	s.DeleteObjects(objs...)
	s.end()
}

// failNext makes the next call of verb (get, delete, patch) fail with err.
func (s *scenario) failNext(verb string, err error) {
	s.t.Helper()
	s.Begin("failNext %s", verb)
	used := false
	s.Fake.PrependReactor(verb, "*", func(clienttesting.Action) (bool, runtime.Object, error) {
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
	s.Begin("lead")
	if s.gate != nil {
		s.gate.Open()
		_ = s.held.Run(context.Background()) // the gate is open: sends what was held, returns
	}
	s.c.lead()
	s.end()
}

func (s *scenario) mustLead() {
	s.t.Helper()
	if !s.c.leading.Load() {
		s.Fatalf("a standby runs no workers: lead() first")
	}
}

// processDeletes runs attemptToDelete on every dependent queued, until none is left. Items
// retried wait for retryPending.
func (s *scenario) processDeletes() {
	s.t.Helper()
	s.Begin("processDeletes")
	s.mustLead()
	gctest.Drive(s.Harness, context.Background(), s.c.deleteQueue, "delete", func(u types.UID) string { return string(u) }, s.c.attemptToDelete, s.pendingDeletes)
	s.end()
}

// processVerifies runs verifyOwner on every claim queued, until none is left.
func (s *scenario) processVerifies() {
	s.t.Helper()
	s.Begin("processVerifies")
	s.mustLead()
	gctest.Drive(s.Harness, context.Background(), s.c.verifyQueue, "verify", func(r graph.Ref) string { return string(r.UID) }, s.c.verifyOwner, s.pendingVerifies)
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
	s.Fatalf("the queues never emptied")
}

// retryPending adds again every item whose last outcome was Retry or WaitForSync, as their
// backoff would once elapsed.
func (s *scenario) retryPending() {
	s.t.Helper()
	s.Begin("retryPending")
	gctest.Retry(s.pendingDeletes, s.c.deleteQueue.Add)
	gctest.Retry(s.pendingVerifies, s.c.verifyQueue.Add)
	s.end()
}

// enqueueDelete hands dependents to the delete workers (as a resync would).
func (s *scenario) enqueueDelete(uids ...types.UID) {
	s.t.Helper()
	s.Begin("enqueueDelete %v", uids)
	for _, u := range uids {
		s.c.deleteQueue.Add(u)
	}
	s.end()
}

// resyncForeground runs one round of the foreground resync.
func (s *scenario) resyncForeground() {
	s.t.Helper()
	s.Begin("resyncForeground")
	s.c.resyncForeground()
	s.end()
}

// reverifyAt runs one round of the re-verification of present-but-unobserved claims at scT0+d
// (runReverify's tick).
func (s *scenario) reverifyAt(d time.Duration) {
	s.t.Helper()
	s.Begin("reverifyAt %v", d)
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
	s.Begin("assertQueued")
	gotD, gotV := gctest.Peek(s.c.deleteQueue), gctest.Peek(s.c.verifyQueue)
	slices.Sort(gotD)
	wantD := slices.Clone(deletes)
	slices.Sort(wantD)
	if !slices.Equal(gotD, wantD) {
		s.Errorf("delete queue = %v, want %v", gotD, wantD)
	}
	byString := func(a, b graph.Ref) int { return strings.Compare(a.String(), b.String()) }
	slices.SortFunc(gotV, byString)
	wantV := slices.Clone(verifies)
	slices.SortFunc(wantV, byString)
	if !slices.Equal(gotV, wantV) {
		s.Errorf("verify queue = %v, want %v", gotV, wantV)
	}
}

// assertHandedOver checks the owners handed to the finalizers since the last call, in order.
func (s *scenario) assertHandedOver(want ...types.UID) {
	s.t.Helper()
	s.Begin("assertHandedOver")
	if !slices.Equal(s.handed.uids, want) {
		s.Errorf("owners handed to the finalizers = %v, want %v", s.handed.uids, want)
	}
	s.handed.uids = nil
}

// assertStats checks some of the graph's counts.
func (s *scenario) assertStats(check func(graph.Stats) error) {
	s.t.Helper()
	s.Begin("assertStats")
	if err := check(s.c.GraphStats()); err != nil {
		s.Errorf("%v", err)
	}
}

// assertUnsynced checks what Unsynced says: "gizmos.v1.example.com synced=false err=...".
func (s *scenario) assertUnsynced(want ...string) {
	s.t.Helper()
	s.Begin("assertUnsynced")
	var got []string
	for _, u := range s.c.Unsynced() {
		got = append(got, fmt.Sprintf("%s synced=%t err=%s", GVRString(u.Resource.GVR), u.Synced, u.Err))
	}
	if !slices.Equal(got, want) {
		s.Errorf("Unsynced() = %v, want %v", got, want)
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

// TestCheckGraphSeesInconsistency: the harness's consistency check is not vacuous: a universe
// that misses a node the graph holds makes the counts disagree.
func TestCheckGraphSeesInconsistency(t *testing.T) {
	g := graph.New()
	dep := graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: "dep", UID: "u-dep"}, ResourceVersion: "1",
		Owners: []graph.OwnerRef{{APIVersion: "example.com/v1", Kind: "Widget", Name: "o", UID: "u-o"}}}
	g.Apply(graph.Event{Type: graph.EventObserved, Object: dep})
	if err := checkGraph(g, map[types.UID]struct{}{"u-dep": {}, "u-o": {}}); err != nil {
		t.Errorf("consistent graph: %v", err)
	}
	if err := checkGraph(g, map[types.UID]struct{}{"u-dep": {}}); err == nil {
		t.Error("a virtual node outside the universe went unnoticed")
	}
}

// --- objects ---

// scObj is an object of r in namespace "ns".
func scObj(r Resource, name string, uid types.UID, rv string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return gctest.Obj(r.GVR.GroupVersion().WithKind(r.Kind), r.Namespaced, name, uid, rv, refs...)
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

// notFoundForPath is the API server's 404 for a path it does not serve: no name in details.
func notFoundForPath() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
		Message: "the server could not find the requested resource", Details: &metav1.StatusDetails{}}}
}
