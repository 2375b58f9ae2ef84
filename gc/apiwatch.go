package gc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Discovery follows the API (issue 22.4).
//
// (a) CustomResourceDefinitions and APIServices are watched; any change to one (created,
// established, changed, deleted; an APIService becoming available or not) asks the discovery
// loop for a round at once (coalesced over RediscoverDelay), so a new CRD's objects are in the
// graph within a second instead of a DiscoveryPeriod. A CRD seen established whose resource
// the next round does not list yet (the API server publishes discovery a moment after the
// condition) asks again, every expectRetry, for at most expectFor. The periodic round stays
// as the safety net.
//
// (b) A kind whose CRD cascade saw deleted cannot own anything that exists: the API server
// removes a CRD only after every object of its kind is gone, and UIDs are never reused. A
// reference whose kind has no REST mapping is therefore treated as naming an absent owner,
// and its dependent collected as usual, when all of these hold (kindGone):
//   - the dependent is namespaced, or the CRD was cluster-scoped (a cluster-scoped dependent of
//     a namespaced owner kind is never collected, as in-tree: found by the chaos suite);
//   - cascade's CRD watch delivered the deletion of a CRD that served that group and kind, and
//     no CRD serving it since;
//   - the last discovery round did not fail, for the group or as a whole;
//   - a live check that started after the question was asked finds no CRD serving the group
//     and kind (a CRD re-created a moment ago serves new objects, which the reference may
//     name) and no aggregated API (an APIService with a service) for the group.
//
// Everything else stays "keep and retry", as before: a kind no API ever served, a kind whose
// CRD went while cascade was not watching (before it started: a restarted cascade does not
// know which CRDs went, and keeps such references, as the in-tree collector does), a group
// an aggregated API serves or that discovery cannot reach, a live check that fails.
//
// Only the CRD's group, kind, plural and scope and whether it is established are kept, per CRD
// (transform): the informer holds no schema.

// RediscoverDelay coalesces the burst of CRD and APIService events one change makes (a CRD's
// creation is an add and two status updates) into one discovery round.
const RediscoverDelay = 100 * time.Millisecond

const (
	// expectRetry and expectFor: a CRD seen established whose resource discovery does not list
	// yet is asked for again this often, for at most this long.
	expectRetry = 200 * time.Millisecond
	expectFor   = 10 * time.Second
	// maxGoneKinds bounds the kinds remembered as gone (oldest forgotten first: their
	// references are then kept, the safe side).
	maxGoneKinds = 10000
)

var (
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
)

// crdInfo is what cascade keeps of one CRD.
type crdInfo struct {
	gk          schema.GroupKind
	plural      string
	namespaced  bool // spec.scope; cluster-scoped dependents never lose an owner of a namespaced kind
	established bool
}

// crdInfoOf reads a CRD (unstructured); ok is false when it names no group or kind.
func crdInfoOf(u *unstructured.Unstructured) (crdInfo, bool) {
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
	info := crdInfo{gk: schema.GroupKind{Group: group, Kind: kind}, plural: plural, namespaced: scope != "Cluster"}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
			info.established = true
		}
	}
	return info, group != "" && kind != ""
}

// liveAPIs answers, from live reads, which of groups' kinds a CRD serves now and which of
// groups an aggregated API serves.
type liveAPIs interface {
	check(ctx context.Context, groups map[string]struct{}) (served map[schema.GroupKind]struct{}, aggregated map[string]struct{}, err error)
}

// apiWatch watches CRDs and APIServices (see above).
type apiWatch struct {
	dyn  dynamic.Interface
	meta metadata.Interface
	live liveAPIs
	now  func() time.Time

	// rediscover holds one pending request for a discovery round.
	rediscover chan struct{}

	mu     sync.Mutex
	crds   map[string]crdInfo            // by CRD name; guarded by mu
	expect map[string]time.Time          // established CRDs not yet discovered, until when; guarded by mu
	gone   map[schema.GroupKind]goneKind // kinds of CRDs seen deleted; guarded by mu
	seq    uint64                        // guarded by mu
	rounds *liveRounds
}

// goneKind is a kind whose CRD was seen deleted: its scope, and the order it went in.
type goneKind struct {
	namespaced bool
	seq        uint64
}

func newAPIWatch(dyn dynamic.Interface, meta metadata.Interface) *apiWatch {
	w := &apiWatch{
		dyn:        dyn,
		meta:       meta,
		now:        time.Now,
		rediscover: make(chan struct{}, 1),
		crds:       map[string]crdInfo{},
		expect:     map[string]time.Time{},
		gone:       map[schema.GroupKind]goneKind{},
	}
	if dyn != nil && meta != nil {
		w.live = liveClient{dyn: dyn, meta: meta}
	}
	w.rounds = &liveRounds{w: w}
	return w
}

// run watches CRDs until ctx ends. APIServices are not watched here: the monitor of
// apiservices, which the graph needs anyway, kicks (monitors.kick). The CRDs' reflector keeps
// no cache of its own (crdStore): what cascade keeps of each CRD is w.crds. An informer would
// add a cache and five goroutines; a watch and an informer's goroutines fewer per fleet member
// for APIServices.
func (w *apiWatch) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("resource", GVRString(crdGVR))
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return w.dyn.Resource(crdGVR).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return w.dyn.Resource(crdGVR).Watch(ctx, opts)
		},
	}
	cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, w.dyn), &unstructured.Unstructured{}, &crdStore{w: w}, cache.ReflectorOptions{
		Logger: &logger, Name: "cascade/crds", TypeDescription: GVRString(crdGVR),
	}).RunWithContext(ctx)
}

// crdStore is the CRDs' reflector's store: each notification goes to the apiWatch at once,
// and nothing is kept but what crdSeen keeps.
type crdStore struct {
	w      *apiWatch
	synced bool // only the reflector's goroutine touches it
}

var _ cache.ReflectorStore = (*crdStore)(nil)

func (s *crdStore) Add(obj any) error    { s.w.crdSeen(obj, s.synced); return nil }
func (s *crdStore) Update(obj any) error { s.w.crdSeen(obj, true); return nil }
func (s *crdStore) Delete(obj any) error { s.w.crdDeleted(obj); return nil }
func (s *crdStore) Resync() error        { return nil }

// Replace is a complete list: the first is what the first discovery round already covers; a
// relist is a change for every CRD it holds, and the CRDs it no longer holds were deleted
// while the watch was down.
func (s *crdStore) Replace(list []any, _ string) error {
	listed := make(map[string]struct{}, len(list))
	for _, obj := range list {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			listed[u.GetName()] = struct{}{}
			s.w.crdSeen(u, s.synced)
		}
	}
	for _, name := range s.w.crdNames() {
		if _, ok := listed[name]; !ok {
			s.w.crdGone(name)
		}
	}
	s.synced = true
	return nil
}

func (w *apiWatch) kick() {
	select {
	case w.rediscover <- struct{}{}:
	default:
	}
}

func (w *apiWatch) kickIf(b bool) {
	if b {
		w.kick()
	}
}

// crdSeen records a CRD that exists; change is false for the informer's initial list (what
// the first discovery round already covers).
func (w *apiWatch) crdSeen(obj any, change bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	info, ok := crdInfoOf(u)
	w.mu.Lock()
	if ok {
		old, had := w.crds[u.GetName()]
		w.crds[u.GetName()] = info
		delete(w.gone, info.gk) // served again (or still): its objects may exist
		if info.established && (!had || !old.established) && change {
			w.expect[u.GetName()] = w.now().Add(expectFor)
		}
	}
	w.mu.Unlock()
	w.kickIf(change)
}

// crdDeleted records a CRD gone: its kind is gone unless another CRD serves it.
func (w *apiWatch) crdDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	info, ok := crdInfoOf(u)
	w.mu.Lock()
	delete(w.crds, u.GetName())
	delete(w.expect, u.GetName())
	if ok {
		w.markGoneLocked(info)
	}
	w.mu.Unlock()
	w.kick()
}

// crdGone records the CRD name gone, as it was last seen (a relist no longer holds it).
func (w *apiWatch) crdGone(name string) {
	w.mu.Lock()
	info, ok := w.crds[name]
	delete(w.crds, name)
	delete(w.expect, name)
	if ok {
		w.markGoneLocked(info)
	}
	w.mu.Unlock()
	w.kick()
}

// crdNames returns the names of the CRDs seen and not deleted.
func (w *apiWatch) crdNames() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.crds))
	for name := range w.crds {
		names = append(names, name)
	}
	return names
}

func (w *apiWatch) markGoneLocked(info crdInfo) {
	for _, other := range w.crds {
		if other.gk == info.gk {
			return
		}
	}
	w.seq++
	w.gone[info.gk] = goneKind{namespaced: info.namespaced, seq: w.seq}
	if len(w.gone) > maxGoneKinds {
		var oldest schema.GroupKind
		first := true
		var least uint64
		for k, g := range w.gone {
			if first || g.seq < least {
				oldest, least, first = k, g.seq, false
			}
		}
		delete(w.gone, oldest)
	}
}

// seenGone reports whether the watch saw the CRD of gk deleted and no CRD serve it since, and
// whether that CRD was namespaced.
func (w *apiWatch) seenGone(gk schema.GroupKind) (namespaced, gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	g, ok := w.gone[gk]
	return g.namespaced, ok
}

// unmet reports whether a CRD seen established lately is still missing from resources (the
// discovery loop then asks again shortly); CRDs found, or waited for long enough, are
// forgotten.
func (w *apiWatch) unmet(resources ResourceSet) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.expect) == 0 {
		return false
	}
	served := map[schema.GroupResource]struct{}{}
	for gvr := range resources {
		served[gvr.GroupResource()] = struct{}{}
	}
	now := w.now()
	for name, until := range w.expect {
		info, ok := w.crds[name]
		_, found := served[schema.GroupResource{Group: info.gk.Group, Resource: info.plural}]
		if !ok || found || now.After(until) {
			delete(w.expect, name)
		}
	}
	return len(w.expect) > 0
}

// confirmGone reports whether gk is gone (see the file comment): the watch saw its CRD
// deleted, and a live check started after this call finds nothing serving it.
func (w *apiWatch) confirmGone(ctx context.Context, gk schema.GroupKind) (bool, error) {
	if w == nil || w.live == nil {
		return false, nil
	}
	if _, gone := w.seenGone(gk); !gone {
		return false, nil
	}
	served, aggregated, err := w.rounds.await(ctx, gk.Group)
	if err != nil {
		return false, err
	}
	if _, ok := served[gk]; ok {
		return false, nil
	}
	if _, ok := aggregated[gk.Group]; ok {
		return false, nil
	}
	// A CRD serving it may have been seen since the check started: it says so too.
	_, gone := w.seenGone(gk)
	return gone, nil
}

// liveRounds coalesces live checks: a caller waits for a round that starts after it asked
// (the one in flight may have read the API before the caller's view was taken), so concurrent
// callers share the next round.
type liveRounds struct {
	w *apiWatch

	mu      sync.Mutex
	running *liveRound // guarded by mu
	next    *liveRound // guarded by mu
}

type liveRound struct {
	groups     map[string]struct{}
	done       chan struct{}
	served     map[schema.GroupKind]struct{}
	aggregated map[string]struct{}
	err        error
}

func (r *liveRounds) await(ctx context.Context, group string) (map[schema.GroupKind]struct{}, map[string]struct{}, error) {
	r.mu.Lock()
	if r.next == nil {
		r.next = &liveRound{groups: map[string]struct{}{}, done: make(chan struct{})}
	}
	round := r.next
	round.groups[group] = struct{}{}
	if r.running == nil {
		r.startLocked(ctx)
	}
	r.mu.Unlock()
	select {
	case <-round.done:
		return round.served, round.aggregated, round.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// startLocked runs the next round. The round outlives the caller that started it (others may
// wait for it); it ends with ctx, whose cancellation only stops the worker anyway.
func (r *liveRounds) startLocked(ctx context.Context) {
	round := r.next
	r.next, r.running = nil, round
	go func() {
		round.served, round.aggregated, round.err = r.w.live.check(context.WithoutCancel(ctx), round.groups)
		r.mu.Lock()
		r.running = nil
		if r.next != nil {
			r.startLocked(ctx)
		}
		r.mu.Unlock()
		close(round.done)
	}()
}

// liveClient is liveAPIs over the API server: a metadata-only list of CRDs (their names are
// plural.group), a GET of each CRD of the groups asked about, and a list of APIServices.
type liveClient struct {
	dyn  dynamic.Interface
	meta metadata.Interface
}

func (l liveClient) check(ctx context.Context, groups map[string]struct{}) (map[schema.GroupKind]struct{}, map[string]struct{}, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	served := map[schema.GroupKind]struct{}{}
	aggregated := map[string]struct{}{}
	crds, err := l.meta.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing CRDs: %w", err)
	}
	for _, crd := range crds.Items {
		_, group, ok := strings.Cut(crd.Name, ".")
		if _, asked := groups[group]; !ok || !asked {
			continue
		}
		u, err := l.dyn.Resource(crdGVR).Get(ctx, crd.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading CRD %s: %w", crd.Name, err)
		}
		if info, ok := crdInfoOf(u); ok {
			served[info.gk] = struct{}{}
		} else {
			return nil, nil, fmt.Errorf("CRD %s names no group or kind", crd.Name)
		}
	}
	svcs, err := l.dyn.Resource(apiServiceGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing APIServices: %w", err)
	}
	for _, s := range svcs.Items {
		group, _, _ := unstructured.NestedString(s.Object, "spec", "group")
		svc, found, _ := unstructured.NestedFieldNoCopy(s.Object, "spec", "service")
		if _, asked := groups[group]; asked && found && svc != nil {
			aggregated[group] = struct{}{}
		}
	}
	return served, aggregated, nil
}
