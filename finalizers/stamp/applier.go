package stamp

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
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
	// Clock is injected for tests.
	Clock clock.WithTicker
}

// Applier applies the policy's defaultPropagation rules: see the package documentation.
type Applier struct {
	opts     Options
	queue    *work.Queue[client.Target]
	limiter  flowcontrol.RateLimiter
	nsLabels *client.NamespaceLabels

	// admissionSet is the policy the admission objects were last made to match. Only Run's
	// goroutine (syncAdmission) touches it.
	admissionSet *policy.Compiled
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
	logger := klog.FromContext(ctx).WithName("defaults")
	ctx = klog.NewContext(ctx, logger)
	ticker := a.opts.Clock.NewTicker(policyPoll)
	defer ticker.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { a.queue.Run(ctx, max(workers, 1), a.process) })

	var (
		ran     bool
		applied *policy.Compiled
		last    time.Time
	)
	for {
		if view.Synced() && (a.opts.Authoritative == nil || a.opts.Authoritative()) {
			c := a.opts.Policy()
			if !ran || c != applied || a.opts.Clock.Since(last) >= a.opts.Period {
				a.syncAdmission(ctx, c)
				a.pass(ctx, view, c)
				ran, applied, last = true, c, a.opts.Clock.Now()
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

// syncAdmission makes the admission objects match c: created or updated by server-side apply,
// deleted when c stamps nothing. An object of that name not labelled as cascade's is never
// touched (reported instead).
func (a *Applier) syncAdmission(ctx context.Context, c *policy.Compiled) {
	if a.opts.Admission == nil {
		return
	}
	logger := klog.FromContext(ctx)
	p, b := c.Admission()
	err := a.applyAdmission(ctx, p, b)
	if err != nil {
		a.opts.Metrics.AdmissionSynced.Set(0)
	} else {
		a.opts.Metrics.AdmissionSynced.Set(1)
	}
	if err != nil {
		logger.Error(err, "Cannot bring the admission objects in line with the policy; objects created meanwhile are stamped by the next pass", "name", policy.AdmissionName)
		return
	}
	changed := a.admissionSet != c
	a.admissionSet = c
	if changed {
		logger.Info("Admission objects in line with the policy", "name", policy.AdmissionName, "present", p != nil)
	}
}

func (a *Applier) applyAdmission(ctx context.Context, p *admissionv1.MutatingAdmissionPolicy, b *admissionv1.MutatingAdmissionPolicyBinding) error {
	adm := a.opts.Admission
	existing, err := adm.GetPolicy(ctx, policy.AdmissionName)
	switch {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return fmt.Errorf("reading MutatingAdmissionPolicy %s: %w", policy.AdmissionName, err)
	case !policy.ManagedByCascade(existing.Labels):
		return fmt.Errorf("MutatingAdmissionPolicy %s exists without the label %s=%s: it is not cascade's, and cascade leaves it alone; rename or label it",
			policy.AdmissionName, policy.ManagedByLabel, policy.ManagedByValue)
	}
	if p == nil {
		if existing == nil {
			return nil
		}
		if err := adm.DeleteBinding(ctx, policy.AdmissionName); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting MutatingAdmissionPolicyBinding %s: %w", policy.AdmissionName, err)
		}
		if err := adm.DeletePolicy(ctx, policy.AdmissionName, existing.UID); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting MutatingAdmissionPolicy %s: %w", policy.AdmissionName, err)
		}
		return nil
	}
	if err := adm.ApplyPolicy(ctx, p); err != nil {
		return fmt.Errorf("applying MutatingAdmissionPolicy %s: %w", p.Name, err)
	}
	if err := adm.ApplyBinding(ctx, b); err != nil {
		return fmt.Errorf("applying MutatingAdmissionPolicyBinding %s: %w", b.Name, err)
	}
	return nil
}

func groupResource(gr schema.GroupResource) policy.GroupResource {
	return policy.GroupResource{Group: gr.Group, Resource: gr.Resource}
}
