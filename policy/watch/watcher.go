package watch

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/policy"
)

// Event reasons on the policy ConfigMap.
const (
	// EventReasonRejected (Warning): a version of the ConfigMap was rejected; the message
	// names every error and the policy that stays in force.
	EventReasonRejected = "PolicyRejected"
	// EventReasonLoaded (Normal): a version of the ConfigMap is in force.
	EventReasonLoaded = "PolicyLoaded"
	// EventReasonUnenforced (Warning): the version in force has rules cascade does not
	// enforce in its mode (companion: the collect rules); the message names each.
	EventReasonUnenforced = "PolicyRulesUnenforced"
)

// maxEventMessage bounds an Event's message (the API's limit for a note is 1 KiB).
const maxEventMessage = 1000

// Options configure a Watcher.
type Options struct {
	// Client reads the ConfigMap.
	Client kubernetes.Interface
	// Namespace and Name are the policy ConfigMap's.
	Namespace, Name string
	// Events, when set, receives the Events on the ConfigMap (cascade's is
	// internal/client.HeldRecorder: a standby's Events wait until it leads).
	Events record.EventRecorder
	// Metrics count loads; nil: a set registered nowhere.
	Metrics *Metrics
	// Timeout bounds Run's wait for the first read of the ConfigMap; 30 s when zero.
	Timeout time.Duration
	// Served, when set, says what the cluster serves, for the warnings of a loaded policy (a
	// rule for a resource not served yet).
	Served func(ctx context.Context) (policy.Served, error)
	// Companion is --mode=companion: each version put in force says which of its rules
	// cascade does not enforce beside kube-controller-manager's collector
	// (policy.CompanionUnenforced): a log line, a Warning Event and
	// cascade_policy_rules_unenforced.
	Companion bool
	// Unwatched is the resources cascade never watches (--ignored-resources): a
	// defaultPropagation rule for one is refused (policy.CheckUnwatched), as an invalid
	// document is: the last good policy stays.
	Unwatched []policy.GroupResource
}

// Watcher keeps the policy of one ConfigMap in force.
//
// Concurrency: the reflector's store (cmStore) is called on one goroutine; mu guards the
// bookkeeping it and Start share. The policy in force is an atomic pointer, read by any goroutine.
type Watcher struct {
	opts    Options
	current atomic.Pointer[policy.Compiled]
	listErr atomic.Pointer[error] // the last list or watch failure, for Start's error

	mu          sync.Mutex
	generation  int     // guarded by mu: policies put in force since start
	handled     *string // guarded by mu: the document of the last version handled (nil: none or absent)
	loaded      bool    // guarded by mu: the policy in force is the ConfigMap's (not the built-in one)
	loadedRV    string  // guarded by mu: the resourceVersion it was loaded from
	rejected    bool    // guarded by mu: the last version handled was rejected
	present     bool    // guarded by mu: the ConfigMap exists
	missingSaid bool    // guarded by mu: its absence was reported

	firstRead chan struct{} // closed once Run's first read is handled
}

// New returns a Watcher whose policy is the built-in one until Start.
func New(opts Options) *Watcher {
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	w := &Watcher{opts: opts, firstRead: make(chan struct{})}
	w.current.Store(policy.Builtin())
	return w
}

// Policy returns the policy in force. It is safe for concurrent use.
func (w *Watcher) Policy() *policy.Compiled { return w.current.Load() }

// Authoritative reports whether the policy in force is what the ConfigMap says: its last
// accepted version, or the built-in policy because the ConfigMap does not exist. It is false
// while the built-in policy is in force only because every version seen so far was rejected
// (or none was read yet): writes that undo an earlier policy's work (the default-propagation
// stamps) wait for an authoritative policy.
func (w *Watcher) Authoritative() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loaded || w.missingSaid && !w.present
}

// Source says where the policy in force comes from, with its generation (policies put in force
// since start, as cascade_policy_generation): "ConfigMap NS/NAME, resourceVersion RV" (and
// whether a later version was rejected), or the built-in policy and why. It is safe for
// concurrent use.
func (w *Watcher) Source() (generation int, source string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.loaded && w.rejected:
		source = fmt.Sprintf("ConfigMap %s, resourceVersion %s (a later version was rejected: see its PolicyRejected Event)", w.Name(), w.loadedRV)
	case w.loaded:
		source = fmt.Sprintf("ConfigMap %s, resourceVersion %s", w.Name(), w.loadedRV)
	case w.rejected:
		source = fmt.Sprintf("built-in: every version of ConfigMap %s seen was rejected (see its PolicyRejected Event)", w.Name())
	case w.missingSaid:
		source = fmt.Sprintf("built-in: ConfigMap %s not found", w.Name())
	default:
		source = fmt.Sprintf("built-in: ConfigMap %s not read yet", w.Name())
	}
	return w.generation, source
}

// Present reports whether the ConfigMap existed at the last read (a fleet member without a
// policy ConfigMap of its own takes the host's policy). It is safe for concurrent use.
func (w *Watcher) Present() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.present
}

// Name is the ConfigMap's NAMESPACE/NAME.
func (w *Watcher) Name() string { return w.opts.Namespace + "/" + w.opts.Name }

// Run watches the ConfigMap until ctx ends, when it returns nil. It returns an error when the
// first read does not succeed within Options.Timeout (see Start); Loaded is closed once it did.
func (w *Watcher) Run(ctx context.Context) error {
	if err := w.Start(ctx, w.opts.Timeout); err != nil {
		return err
	}
	close(w.firstRead)
	<-ctx.Done()
	return nil
}

// Loaded is closed once Run has read the ConfigMap (or found it absent) for the first time.
func (w *Watcher) Loaded() <-chan struct{} { return w.firstRead }

// Start watches the ConfigMap until ctx ends and waits, at most timeout, for its first list to
// be handled: the policy in force is then the ConfigMap's, or the built-in one when it does not
// exist. If the ConfigMap cannot be listed in time (RBAC, a broken API server) it returns an
// error naming why: running on without the policy an operator configured could collect what
// the policy keeps.
func (w *Watcher) Start(ctx context.Context, timeout time.Duration) error {
	sel := fields.OneTermEqualSelector("metadata.name", w.opts.Name).String()
	cms := w.opts.Client.CoreV1().ConfigMaps(w.opts.Namespace)
	failed := func(err error) {
		if err != nil {
			w.listErr.Store(&err)
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			l, err := cms.List(ctx, o)
			failed(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (apiwatch.Interface, error) {
			o.FieldSelector = sel
			wi, err := cms.Watch(ctx, o)
			failed(err)
			return wi, err
		},
	}
	// A reflector whose store hands each version to the Watcher at once: an informer would keep
	// a copy of the ConfigMap and five goroutines more, per fleet member.
	store := &cmStore{ctx: ctx, w: w}
	logger := klog.FromContext(ctx).WithValues("configmap", w.Name())
	refl := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, w.opts.Client), &corev1.ConfigMap{}, store, cache.ReflectorOptions{
		Logger: &logger, Name: "cascade/policy", TypeDescription: "policy ConfigMap " + w.Name(),
	})
	go refl.RunWithContext(ctx)
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return store.synced.Load(), nil
	})
	if err != nil {
		why := "no answer"
		if p := w.listErr.Load(); p != nil {
			why = (*p).Error()
		}
		return fmt.Errorf("cannot read the policy ConfigMap %s within %s: %s (cascade needs get, list and watch on it)", w.Name(), timeout, why)
	}
	w.mu.Lock()
	absent := !w.present
	w.mu.Unlock()
	if absent {
		w.missing(ctx, "not found")
	}
	return nil
}

// cmStore is the reflector's store: Add and Update load a version, Delete and a list without
// the ConfigMap report it gone (a list that finds it absent the first time is Start's to
// report).
type cmStore struct {
	ctx    context.Context
	w      *Watcher
	synced atomic.Bool
}

var _ cache.ReflectorStore = (*cmStore)(nil)

func (s *cmStore) Add(obj any) error    { s.w.observe(s.ctx, obj); return nil }
func (s *cmStore) Update(obj any) error { s.w.observe(s.ctx, obj); return nil }
func (s *cmStore) Delete(obj any) error { s.w.gone(s.ctx, obj); return nil }
func (s *cmStore) Resync() error        { return nil }

func (s *cmStore) Replace(list []any, _ string) error {
	found := false
	for _, obj := range list {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == s.w.opts.Name {
			found = true
			s.w.observe(s.ctx, cm)
		}
	}
	if !found && s.synced.Load() && s.w.Present() {
		s.w.missing(s.ctx, "deleted") // while the watch was down
	}
	s.synced.Store(true)
	return nil
}

func (w *Watcher) observe(ctx context.Context, obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Name != w.opts.Name {
		return
	}
	w.load(ctx, cm)
}

func (w *Watcher) gone(ctx context.Context, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name != w.opts.Name {
		return
	}
	w.missing(ctx, "deleted")
}

// load handles one version of the ConfigMap.
func (w *Watcher) load(ctx context.Context, cm *corev1.ConfigMap) {
	logger := klog.FromContext(ctx).WithValues("configmap", w.Name(), "resourceVersion", cm.ResourceVersion)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.present, w.missingSaid = true, false
	doc, hasKey := cm.Data[policy.ConfigMapKey]
	if w.handled != nil && hasKey && *w.handled == doc {
		return // another field changed (labels, annotations): the document is the one handled
	}
	w.handled = &doc
	var (
		c    *policy.Compiled
		p    *policy.Policy
		errs field.ErrorList
	)
	if hasKey {
		c, p, errs = policy.Parse([]byte(doc))
		if len(errs) == 0 {
			errs = policy.CheckUnwatched(p, w.opts.Unwatched)
		}
	} else {
		errs = field.ErrorList{field.Required(field.NewPath("data").Key(policy.ConfigMapKey), "the policy document goes under this key")}
	}
	if len(errs) > 0 {
		w.rejected = true
		w.reject(logger, cm, errs)
		return
	}
	w.generation++
	w.loaded, w.loadedRV, w.rejected = true, cm.ResourceVersion, false
	w.current.Store(c)
	msg := fmt.Sprintf("generation %d in force: %d rules, %d ignored resources", w.generation, c.Rules(), len(c.Ignored()))
	logger.Info("Policy loaded", "generation", w.generation, "rules", c.Rules(), "ignoredResources", len(c.Ignored()))
	if notes := w.notes(ctx, p); len(notes) > 0 {
		logger.Info("Policy notes", "generation", w.generation, "notes", strings.Join(notes, "; "))
		msg += "; " + strings.Join(notes, "; ")
	}
	w.event(cm, corev1.EventTypeNormal, EventReasonLoaded, msg)
	unenforced := w.unenforced(logger, cm, p)
	// The metrics last: whoever sees them changed (a test, a dashboard) sees the log line and
	// the Event already out.
	w.opts.Metrics.RulesUnenforced.Set(float64(unenforced))
	w.opts.Metrics.Generation.Set(float64(w.generation))
	w.opts.Metrics.LastLoadSuccess.Set(1)
}

// unenforced says which rules of p, just put in force, cascade does not enforce in its mode,
// and returns how many. Call it with mu held.
func (w *Watcher) unenforced(logger klog.Logger, cm *corev1.ConfigMap, p *policy.Policy) int {
	if !w.opts.Companion {
		return 0
	}
	errs := policy.CompanionUnenforced(p)
	if len(errs) == 0 {
		return 0
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "; ")
	logger.Info("Policy rules not enforced in companion mode: kube-controller-manager's garbage collector collects", "generation", w.generation, "rules", len(errs), "unenforced", all)
	w.event(cm, corev1.EventTypeWarning, EventReasonUnenforced,
		fmt.Sprintf("generation %d: %d rules not enforced in companion mode (they need --mode=collector): %s", w.generation, len(errs), all))
	return len(errs)
}

// notes are what an accepted policy will not do (yet): rules for resources the cluster does
// not serve.
func (w *Watcher) notes(ctx context.Context, p *policy.Policy) []string {
	var notes []string
	if w.opts.Served != nil {
		served, err := w.opts.Served(ctx)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Cannot tell which resources the cluster serves; no warnings for the policy", "err", err)
		}
		for _, warn := range policy.Warnings(p, served) {
			notes = append(notes, "warning: "+warn.Error())
		}
	}
	return notes
}

// reject keeps the policy in force and says why, once per version of the document.
func (w *Watcher) reject(logger klog.Logger, cm *corev1.ConfigMap, errs field.ErrorList) {
	kept := "the built-in policy"
	if w.loaded {
		kept = fmt.Sprintf("generation %d (resourceVersion %s)", w.generation, w.loadedRV)
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "; ")
	logger.Error(nil, "Policy rejected; keeping the policy in force", "kept", kept, "errors", len(errs), "why", all)
	w.event(cm, corev1.EventTypeWarning, EventReasonRejected,
		fmt.Sprintf("%s rejected (%d errors), keeping %s; check it with `cascade policy validate -f FILE`: %s", policy.ConfigMapKey, len(errs), kept, all))
	w.opts.Metrics.LoadErrors.Inc() // last, as in load
	w.opts.Metrics.LastLoadSuccess.Set(0)
}

// missing puts the built-in policy in force when the ConfigMap does not exist, said once.
func (w *Watcher) missing(ctx context.Context, how string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.present, w.handled, w.rejected = false, nil, false
	if w.missingSaid {
		return
	}
	w.missingSaid = true
	if w.loaded {
		w.generation++
		w.loaded, w.loadedRV = false, ""
		w.current.Store(policy.Builtin())
	}
	klog.FromContext(ctx).Info("Policy ConfigMap "+how+"; the built-in policy is in force until it exists",
		"configmap", w.Name(), "generation", w.generation)
	w.opts.Metrics.RulesUnenforced.Set(0)                // the built-in policy has no rule
	w.opts.Metrics.Generation.Set(float64(w.generation)) // last, as in load
	w.opts.Metrics.LastLoadSuccess.Set(1)
}

// event reports on the ConfigMap. Call it with mu held.
func (w *Watcher) event(cm *corev1.ConfigMap, typ, reason, msg string) {
	if w.opts.Events == nil {
		return
	}
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage-3] + "..."
	}
	w.opts.Events.Event(cm, typ, reason, msg)
}

// ParseName reads --policy-configmap: NAMESPACE/NAME.
func ParseName(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", errors.New("want NAMESPACE/NAME, for example cascade-system/cascade-policy")
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return "", "", fmt.Errorf("namespace %q: %s", namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", "", fmt.Errorf("name %q: %s", name, strings.Join(msgs, "; "))
	}
	return namespace, name, nil
}
