package stamp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy"
)

// Defaults of Options.
const (
	DefaultRate   = 20
	DefaultPeriod = time.Minute
)

const (
	queueName = "default_propagation"
	// policyPoll is how often the policy in force is compared with the one last applied.
	policyPoll = time.Second
)

// Actions, the values of the metric's action label.
const (
	actionStamped   = "stamped"
	actionUnstamped = "unstamped"
	actionReplaced  = "replaced"
)

// View is what the Applier reads of the collector's graph (gc.Controller).
type View interface {
	Synced() bool
	Stampable(want func(schema.GroupResource) bool) []gc.Stampable
}

// Options configure an Applier.
type Options struct {
	// Client reads and stamps objects. Required.
	Client client.Interface
	// Admission writes the MutatingAdmissionPolicy and binding; nil: none are managed.
	Admission client.Admission
	// AdmissionLevel is the level of the admission policy the server offers, detected on every
	// discovery round (features.Set.Level of features.AdmissionPolicy): the objects are
	// written at v1 or v1beta1, none at none (the pass alone stamps), and nothing is done to
	// them while it is "" (not known yet). A change of level re-syncs them at once. Nil: v1.
	AdmissionLevel func() string
	// View is the collector's graph the pass reads. Required.
	View View
	// Workers serve the objects the pass finds; 2 when zero.
	Workers int
	// Policy returns the policy in force, the same pointer until it changes (the admission
	// objects are synced on every change of pointer). Required.
	Policy func() *policy.Compiled
	// Authoritative, when set, reports whether the policy in force is what the policy ConfigMap
	// says (watch.Watcher.Authoritative); nothing is done while it is false, so that a
	// rejected policy at start never undoes the stamps of the last good one.
	Authoritative func() bool
	// Rate bounds the objects stamped or unstamped per second (each a GET and at most one
	// PATCH); DefaultRate when zero.
	Rate float64
	// Period is how often the pass runs when the policy does not change; DefaultPeriod when zero.
	Period time.Duration
	// Metrics and WorkMetrics are updated; nil: sets registered nowhere.
	Metrics     *Metrics
	WorkMetrics *work.Metrics
	// Events, when set, receives a Warning Event ForeignAdmissionObject on an admission object
	// named as cascade's but not labelled as cascade's, once each time it is found.
	Events record.EventRecorder
	// Clock is injected for tests.
	Clock clock.WithTickerAndDelayedExecution
}

// EventReasonForeignAdmission is the reason of the Warning Event on an admission object named
// as cascade's that is not cascade's (ForeignAdmissionError).
const EventReasonForeignAdmission = "ForeignAdmissionObject"

// Applier applies the policy's defaultPropagation rules: see the package documentation.
type Applier struct {
	opts     Options
	queue    *work.Queue[client.Target]
	limiter  flowcontrol.RateLimiter
	nsLabels *client.NamespaceLabels

	// admissionSet is the policy the admission objects were last made to match, at
	// admissionLevel. Only Run's goroutine (syncAdmission) touches them.
	admissionSet   *policy.Compiled
	admissionLevel string
	// foreign is the last ForeignAdmissionError reported (its Event), "" when none: the Event
	// goes once each time a foreign object is found, not every pass it stays.
	foreign string
}

// New returns an Applier; Run starts it.
func New(opts Options) *Applier {
	if opts.Rate <= 0 {
		opts.Rate = DefaultRate
	}
	if opts.Period <= 0 {
		opts.Period = DefaultPeriod
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if opts.AdmissionLevel == nil {
		opts.AdmissionLevel = func() string { return features.LevelV1 }
	}
	return &Applier{
		opts:     opts,
		queue:    work.NewQueue(queueName, work.Options[client.Target]{Clock: opts.Clock, Metrics: opts.WorkMetrics}),
		limiter:  flowcontrol.NewTokenBucketRateLimiterWithClock(float32(opts.Rate), max(1, int(opts.Rate)), opts.Clock),
		nsLabels: client.NewNamespaceLabels(opts.Clock),
	}
}

// Run applies the policy until ctx ends: once the graph has synced, the pass runs, then again
// whenever the policy in force changes and every Period; workers serve the objects it finds.
// It returns nil when ctx ends.
func (a *Applier) Run(ctx context.Context) error {
	view, workers := a.opts.View, a.opts.Workers
	logger := klog.FromContext(ctx).WithName("stamp")
	ctx = klog.NewContext(ctx, logger)
	ticker := a.opts.Clock.NewTicker(policyPoll)
	defer ticker.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { a.queue.Run(ctx, max(workers, 1), a.process) })

	var (
		ran          bool
		applied      *policy.Compiled
		appliedLevel string
		last         time.Time
	)
	for {
		if view.Synced() && (a.opts.Authoritative == nil || a.opts.Authoritative()) {
			c, level := a.opts.Policy(), a.opts.AdmissionLevel()
			if !ran || c != applied || level != appliedLevel || a.opts.Clock.Since(last) >= a.opts.Period {
				a.syncAdmission(ctx, c, level)
				a.pass(ctx, view, c)
				ran, applied, appliedLevel, last = true, c, level, a.opts.Clock.Now()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// pass finds the objects whose stamp differs from what the policy wants, from the graph alone,
// and queues them: objects of a resource with a defaultPropagation rule, and stamped objects of
// any resource (their rule may be gone).
func (a *Applier) pass(ctx context.Context, view View, c *policy.Compiled) {
	logger := klog.FromContext(ctx)
	objs := view.Stampable(func(gr schema.GroupResource) bool { return c.HasDefaults(groupResource(gr)) })
	queued := 0
	for _, o := range objs {
		if o.Deleting {
			continue
		}
		want, err := a.want(ctx, c, o.Resource.GVR.GroupResource(), o.Namespace)
		if err != nil {
			logger.Info("Cannot tell the default propagation of an object yet", "object", klog.KRef(o.Namespace, o.Name), "err", err)
			continue
		}
		if !needsWork(o.StampView, want) {
			continue
		}
		a.queue.Add(client.Target{GVR: o.Resource.GVR, Namespace: o.Namespace, Name: o.Name, UID: o.UID})
		queued++
	}
	a.opts.Metrics.Pending.Set(float64(a.queue.Len()))
	if queued > 0 {
		logger.Info("Default propagation: objects to stamp or unstamp", "objects", queued, "rate", a.opts.Rate)
	}
}

// want is the default propagation the policy asks for an object of gr in namespace: "" for
// none.
func (a *Applier) want(ctx context.Context, c *policy.Compiled, gr schema.GroupResource, namespace string) (metav1.DeletionPropagation, error) {
	pgr := groupResource(gr)
	if !c.HasDefaults(pgr) {
		return "", nil
	}
	var labels map[string]string
	if namespace != "" && c.NeedDefaultNamespaceLabels(pgr) {
		l, err := a.nsLabels.Get(ctx, a.opts.Client, namespace)
		if err != nil {
			return "", fmt.Errorf("reading the labels of namespace %s: %w", namespace, err)
		}
		labels = l
	}
	r, _ := c.DefaultFor(pgr, namespace, labels)
	return r.Propagation, nil
}

// needsWork tells from the graph alone whether policy.PlanStamp could change o: the GET and
// PATCH are only spent on those.
func needsWork(o graph.StampView, want metav1.DeletionPropagation) bool {
	wantFin := stampBit(want)
	if o.Stamp == 0 {
		return wantFin != 0 && o.Finalizers == 0
	}
	return o.Stamp != wantFin
}

func stampBit(p metav1.DeletionPropagation) graph.Finalizers {
	switch p {
	case metav1.DeletePropagationOrphan:
		return graph.FinalizerOrphan
	case metav1.DeletePropagationForeground:
		return graph.FinalizerForeground
	default:
		return 0
	}
}

// process stamps or unstamps one object, at Rate, on its live state with the policy in force
// now.
func (a *Applier) process(ctx context.Context, t client.Target) (work.Outcome, error) {
	defer func() {
		a.opts.Metrics.Pending.Set(float64(a.queue.Len()))
	}()
	if a.opts.Authoritative != nil && !a.opts.Authoritative() {
		return work.Done, nil // the next authoritative pass finds it again
	}
	if err := a.limiter.Wait(ctx); err != nil {
		return work.Done, nil // ctx ended
	}
	want, err := a.want(ctx, a.opts.Policy(), t.GVR.GroupResource(), t.Namespace)
	if err != nil {
		return work.Retry, err
	}
	plan, err := client.StampDefault(ctx, a.opts.Client, t, want)
	if err != nil {
		return work.Retry, fmt.Errorf("default propagation of %s: %w", t, err)
	}
	if !plan.Change {
		return work.Done, nil
	}
	action := actionReplaced
	switch {
	case plan.Removed == "" && plan.Added != "":
		action = actionStamped
	case plan.Added == "":
		action = actionUnstamped
	}
	a.opts.Metrics.Changes.WithLabelValues(action).Inc()
	klog.FromContext(ctx).V(2).Info("Default propagation "+action, "object", t.String(), "added", plan.Added, "removed", plan.Removed)
	return work.Done, nil
}

// syncAdmission makes the admission objects match c at level: created or updated by
// server-side apply, deleted when c stamps nothing; at level none there is nothing to write
// (the pass alone stamps), and at an unknown level nothing is done. An object of that name not
// labelled as cascade's is never touched (reported instead).
func (a *Applier) syncAdmission(ctx context.Context, c *policy.Compiled, level string) {
	if a.opts.Admission == nil || level == "" {
		return
	}
	logger := klog.FromContext(ctx)
	p, b := c.Admission()
	var err error
	switch level {
	case features.LevelNone:
		if p != nil {
			err = fmt.Errorf("the API server serves no MutatingAdmissionPolicy (admissionregistration.k8s.io v1 or v1beta1)")
		}
	default:
		err = a.applyAdmission(ctx, level, p, b)
	}
	if err != nil {
		a.opts.Metrics.AdmissionSynced.Set(0)
	} else {
		a.opts.Metrics.AdmissionSynced.Set(1)
	}
	var foreign *ForeignAdmissionError
	if errors.As(err, &foreign) {
		a.opts.Metrics.ForeignAdmission.Set(float64(len(foreign.Kinds)))
		a.reportForeign(foreign)
	} else if level != features.LevelNone {
		a.opts.Metrics.ForeignAdmission.Set(0)
		a.foreign = ""
	}
	changed := a.admissionSet != c || a.admissionLevel != level
	switch {
	case err != nil && level == features.LevelNone:
		if changed {
			logger.Info("No admission objects can stamp defaults at creation: the stamping pass alone does, at most one period after an object is created", "period", a.opts.Period, "reason", err.Error())
		}
	case err != nil:
		logger.Error(err, "Cannot bring the admission objects in line with the policy; objects created meanwhile are stamped by the next pass", "name", policy.AdmissionName, "version", level)
		return // tried again next time, with the retirement of the other version
	case changed:
		logger.Info("Admission objects in line with the policy", "name", policy.AdmissionName, "version", level, "present", p != nil)
	}
	a.admissionSet, a.admissionLevel = c, level
}

// applyAdmission brings the objects at level (v1 or v1beta1) in line with p and b (nil: none
// wanted). When the level changed since the last success (and at start), cascade's objects at
// the other version are retired: a server that serves both versions serves one object at both,
// which is kept; an object of its own at the other version (another UID) is deleted.
func (a *Applier) applyAdmission(ctx context.Context, level string, p *admissionv1.MutatingAdmissionPolicy, b *admissionv1.MutatingAdmissionPolicyBinding) error {
	at, err := admissionAtLevel(a.opts.Admission, level, p, b)
	if err != nil {
		return err
	}
	if err := at.sync(ctx); err != nil {
		return err
	}
	if a.admissionLevel == level {
		return nil
	}
	other := features.LevelV1beta1
	if level == features.LevelV1beta1 {
		other = features.LevelV1
	}
	old, err := admissionAtLevel(a.opts.Admission, other, nil, nil)
	if err != nil {
		return err
	}
	return old.retire(ctx, at)
}

// admissionObjects is cascade's admission objects at one version, in version-neutral terms.
type admissionObjects struct {
	version string
	// getPolicy and getBinding read the live objects (NotFound: none, or not served).
	getPolicy, getBinding func(context.Context) (metav1.Object, error)
	// apply writes the wanted objects, policy then binding; nil when none are wanted.
	apply func(context.Context) error
	// deletePolicy and deleteBinding delete them, each only while it still has uid.
	deletePolicy, deleteBinding func(context.Context, types.UID) error
}

// admissionAtLevel is adm's objects at level, wanting p and b (rendered at v1; carried to
// v1beta1 there).
func admissionAtLevel(adm client.Admission, level string, p *admissionv1.MutatingAdmissionPolicy, b *admissionv1.MutatingAdmissionPolicyBinding) (admissionObjects, error) {
	name := policy.AdmissionName
	switch level {
	case features.LevelV1:
		o := admissionObjects{
			version:       "v1",
			getPolicy:     func(ctx context.Context) (metav1.Object, error) { return adm.GetPolicy(ctx, name) },
			getBinding:    func(ctx context.Context) (metav1.Object, error) { return adm.GetBinding(ctx, name) },
			deletePolicy:  func(ctx context.Context, uid types.UID) error { return adm.DeletePolicy(ctx, name, uid) },
			deleteBinding: func(ctx context.Context, uid types.UID) error { return adm.DeleteBinding(ctx, name, uid) },
		}
		if p != nil {
			o.apply = func(ctx context.Context) error {
				if err := adm.ApplyPolicy(ctx, p); err != nil {
					return err
				}
				return adm.ApplyBinding(ctx, b)
			}
		}
		return o, nil
	case features.LevelV1beta1:
		pb, bb, err := policy.AdmissionV1beta1(p, b)
		if err != nil {
			return admissionObjects{}, err
		}
		o := admissionObjects{
			version:       "v1beta1",
			getPolicy:     func(ctx context.Context) (metav1.Object, error) { return adm.GetPolicyV1beta1(ctx, name) },
			getBinding:    func(ctx context.Context) (metav1.Object, error) { return adm.GetBindingV1beta1(ctx, name) },
			deletePolicy:  func(ctx context.Context, uid types.UID) error { return adm.DeletePolicyV1beta1(ctx, name, uid) },
			deleteBinding: func(ctx context.Context, uid types.UID) error { return adm.DeleteBindingV1beta1(ctx, name, uid) },
		}
		if pb != nil {
			o.apply = func(ctx context.Context) error {
				if err := adm.ApplyPolicyV1beta1(ctx, pb); err != nil {
					return err
				}
				return adm.ApplyBindingV1beta1(ctx, bb)
			}
		}
		return o, nil
	}
	return admissionObjects{}, fmt.Errorf("no admission objects at level %q", level)
}

// get reads one object: nil when there is none (or the version is not served).
func get(ctx context.Context, read func(context.Context) (metav1.Object, error)) (metav1.Object, error) {
	obj, err := read(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return obj, nil
}

// sync applies the wanted objects, or deletes cascade's when none are wanted. Both objects are
// read first: one of that name not labelled as cascade's is never applied over nor deleted
// (ErrForeignAdmission, reported by the caller), and a delete carries the UID read, so that an
// object someone put in its place meanwhile is left alone.
func (o admissionObjects) sync(ctx context.Context) error {
	existing, err := get(ctx, o.getPolicy)
	if err != nil {
		return fmt.Errorf("reading MutatingAdmissionPolicy %s (%s): %w", policy.AdmissionName, o.version, err)
	}
	binding, err := get(ctx, o.getBinding)
	if err != nil {
		return fmt.Errorf("reading MutatingAdmissionPolicyBinding %s (%s): %w", policy.AdmissionName, o.version, err)
	}
	var foreign []string
	if existing != nil && !policy.ManagedByCascade(existing.GetLabels()) {
		foreign = append(foreign, "MutatingAdmissionPolicy")
	}
	if binding != nil && !policy.ManagedByCascade(binding.GetLabels()) {
		foreign = append(foreign, "MutatingAdmissionPolicyBinding")
	}
	if len(foreign) > 0 {
		return &ForeignAdmissionError{Kinds: foreign, Version: o.version}
	}
	if o.apply == nil {
		if binding != nil {
			if err := o.deleteBinding(ctx, binding.GetUID()); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("deleting MutatingAdmissionPolicyBinding %s (%s): %w", policy.AdmissionName, o.version, err)
			}
		}
		if existing != nil {
			if err := o.deletePolicy(ctx, existing.GetUID()); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("deleting MutatingAdmissionPolicy %s (%s): %w", policy.AdmissionName, o.version, err)
			}
		}
		return nil
	}
	if err := o.apply(ctx); err != nil {
		return fmt.Errorf("applying MutatingAdmissionPolicy and binding %s (%s): %w", policy.AdmissionName, o.version, err)
	}
	return nil
}

// reportForeign emits the Warning Event on each foreign admission object of e, unless the same
// was reported last.
func (a *Applier) reportForeign(e *ForeignAdmissionError) {
	if a.opts.Events == nil || a.foreign == e.Error() {
		return
	}
	a.foreign = e.Error()
	for _, kind := range e.Kinds {
		obj := &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/" + e.Version, Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Name: policy.AdmissionName},
		}
		a.opts.Events.Eventf(obj, corev1.EventTypeWarning, EventReasonForeignAdmission,
			"%s %s is not labelled %s=%s: cascade neither applies over it nor deletes it, and the policy's defaultPropagation rules are not stamped at creation until it is renamed, removed or labelled",
			kind, policy.AdmissionName, policy.ManagedByLabel, policy.ManagedByValue)
	}
}

// ForeignAdmissionError says that an admission object named as cascade's exists without
// cascade's label: someone else's, which cascade neither applies over nor deletes.
type ForeignAdmissionError struct {
	Kinds   []string
	Version string
}

func (e *ForeignAdmissionError) Error() string {
	return fmt.Sprintf("%s %s (%s) exists without the label %s=%s: it is not cascade's, and cascade leaves it alone; rename or label it",
		strings.Join(e.Kinds, " and "), policy.AdmissionName, e.Version, policy.ManagedByLabel, policy.ManagedByValue)
}

// retire deletes cascade's objects at o's version that are not the objects at cur's: the
// binding, then the policy (with its UID). One object seen at both versions (the same UID) is
// kept; so is an object not labelled as cascade's.
func (o admissionObjects) retire(ctx context.Context, cur admissionObjects) error {
	for _, kind := range []struct {
		name      string
		old, keep func(context.Context) (metav1.Object, error)
		del       func(context.Context, types.UID) error
	}{
		{"MutatingAdmissionPolicyBinding", o.getBinding, cur.getBinding, o.deleteBinding},
		{"MutatingAdmissionPolicy", o.getPolicy, cur.getPolicy, o.deletePolicy},
	} {
		old, err := get(ctx, kind.old)
		if err != nil {
			return fmt.Errorf("reading %s %s (%s): %w", kind.name, policy.AdmissionName, o.version, err)
		}
		if old == nil || !policy.ManagedByCascade(old.GetLabels()) {
			continue
		}
		keep, err := get(ctx, kind.keep)
		if err != nil {
			return fmt.Errorf("reading %s %s (%s): %w", kind.name, policy.AdmissionName, cur.version, err)
		}
		if keep != nil && keep.GetUID() == old.GetUID() {
			continue // one object, served at both versions
		}
		if err := kind.del(ctx, old.GetUID()); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s (%s): %w", kind.name, policy.AdmissionName, o.version, err)
		}
		klog.FromContext(ctx).Info("Deleted cascade's admission object of the version no longer used", "kind", kind.name, "name", policy.AdmissionName, "version", o.version, "now", cur.version)
	}
	return nil
}

func groupResource(gr schema.GroupResource) policy.GroupResource {
	return policy.GroupResource{Group: gr.Group, Resource: gr.Resource}
}
