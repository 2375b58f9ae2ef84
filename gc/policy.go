package gc

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy"
)

// The policy's collect rules (package policy decides; this file gathers the decision's inputs
// and carries out what only a collect rule asks for).

// Event reasons of the collect rules, on the dependent (type Normal: the policy doing its job).
const (
	// EventReasonCollectNever: the owners are gone and collect: Never kept the object; the
	// references to them were removed.
	EventReasonCollectNever = "PolicyCollectNever"
	// EventReasonCollectAfter: the owners are gone and collect: After keeps the object until
	// the time the message names.
	EventReasonCollectAfter = "PolicyCollectAfter"
)

// currentPolicy is the policy in force: nil (built in) without Options.Policy.
func (c *Controller) currentPolicy() *policy.Compiled {
	if c.opts.Policy == nil {
		return nil
	}
	return c.opts.Policy()
}

// ignored is --ignored-resources plus the policy's ignoredResources, read every discovery
// round: a resource the policy starts ignoring stops being watched at the next round.
func (c *Controller) ignored() map[schema.GroupResource]struct{} {
	extra := c.currentPolicy().Ignored()
	if len(extra) == 0 {
		return c.opts.Ignored
	}
	out := make(map[schema.GroupResource]struct{}, len(c.opts.Ignored)+len(extra))
	for gr := range c.opts.Ignored {
		out[gr] = struct{}{}
	}
	for _, gr := range extra {
		out[schema.GroupResource{Group: gr.Group, Resource: gr.Resource}] = struct{}{}
	}
	return out
}

// collectInput sets the collect rule of dependent n (of resource res) on in, with the clock
// when the rule needs it. The common case, no rule for the resource, is one map lookup. An
// error (the namespace's labels could not be read for a selector) means: decide later.
func (c *Controller) collectInput(ctx context.Context, res Resource, n graph.NodeView, in *policy.Input) error {
	rules := c.currentPolicy().CollectRules(policy.GroupResource{Group: res.GVR.Group, Resource: res.GVR.Resource})
	if rules == nil {
		return nil
	}
	var nsLabels labels.Set
	if rules.NeedNamespaceLabels() && n.Namespace != "" {
		l, err := c.nsLabels.Get(ctx, c.opts.Client, n.Namespace)
		if err != nil {
			return fmt.Errorf("reading the labels of namespace %s for the policy's namespace selector: %w", n.Namespace, err)
		}
		nsLabels = l
	}
	in.Collect = rules.For(n.Namespace, nsLabels)
	if in.Collect.Mode == policy.CollectAfter {
		in.Now = c.opts.Clock.Now()
	}
	return nil
}

// recordOrphanedAt carries out policy.RecordOrphanedAt: the decision needs the time the
// dependent's owners were found gone, kept on the dependent so that it survives a restart.
// One GET (only dependents of resources with a collect: After rule get here) reads it; if it
// is not there for these owners, now is recorded. Then the decision is taken again: wait for
// what is left of the delay, or delete, with the live resourceVersion.
func (c *Controller) recordOrphanedAt(ctx context.Context, logger klog.Logger, t client.Target, n graph.NodeView, in policy.Input) (work.Outcome, error) {
	live, err := c.opts.Client.Get(ctx, t.GVR, t.Namespace, t.Name)
	switch {
	case apierrors.IsNotFound(err):
		return work.Done, nil
	case err != nil:
		return work.Retry, fmt.Errorf("reading %s for the policy's collect: After: %w", policy.OrphanedAtAnnotation, err)
	case live.UID != n.UID:
		return work.Done, nil // replaced by another object of the same name
	case !viewHolds(live, n, n.Owners):
		// The graph's view is behind (references, deletion or GC finalizers changed): decide
		// again on the next one. The delete below is sent at the live resourceVersion, so it
		// must be decided on what the live object is.
		return work.Retry, nil
	}
	owners := make([]types.UID, 0, len(live.OwnerReferences))
	for _, r := range live.OwnerReferences {
		owners = append(owners, r.UID)
	}
	recorded := false
	at, ok := policy.ParseOrphanedAt(live.Annotations[policy.OrphanedAtAnnotation], owners)
	if !ok {
		value := policy.FormatOrphanedAt(in.Now, owners)
		if err := client.SetAnnotation(ctx, c.opts.Client, t, policy.OrphanedAtAnnotation, value); err != nil {
			return work.Retry, fmt.Errorf("recording %s: %w", policy.OrphanedAtAnnotation, err)
		}
		at, _ = policy.ParseOrphanedAt(value, owners)
		recorded = true
	}
	in.OrphanedAt = at
	d := policy.Decide(in)
	logger.V(5).Info("Decided with the time the owners were found gone", "orphanedAt", at, "decision", d.String())
	switch d.Action {
	case policy.Requeue:
		if recorded {
			until := at.Add(in.Collect.After)
			logger.V(2).Info("Keeping dependent whose owners are gone, by policy", "until", until, "rule", in.Collect.Rule)
			c.policyEvent(n, EventReasonCollectAfter, "Every owner is gone; kept until %s by the cascade policy's %s, then collected",
				until.UTC().Format(time.RFC3339), in.Collect.Rule)
		}
		c.deleteQueue.AddAfter(n.UID, d.After)
		return work.Done, nil
	case policy.Delete:
		n.ResourceVersion = live.ResourceVersion
		return c.collect(ctx, logger, t, n, d)
	default:
		return work.Retry, nil // the view changed under the decision: decide again
	}
}

// reportCollectNever says on the dependent that the policy kept it: the references to its gone
// owners were removed instead of deleting it.
func (c *Controller) reportCollectNever(n graph.NodeView, d policy.Decision, rule string) {
	var gone []string
	for _, o := range n.Owners {
		for _, uid := range d.Owners {
			if o.UID == uid {
				gone = append(gone, fmt.Sprintf("%s %s (uid %s)", o.Kind, o.Name, o.UID))
				break
			}
		}
	}
	c.policyEvent(n, EventReasonCollectNever, "Every owner is gone; kept by the cascade policy's %s: removed the owner references to %s instead of deleting",
		rule, strings.Join(gone, ", "))
}

func (c *Controller) policyEvent(n graph.NodeView, reason, format string, args ...any) {
	if c.opts.Events == nil {
		return
	}
	involved := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: n.APIVersion, Kind: n.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: n.Name, UID: n.UID},
	}
	c.opts.Events.Eventf(involved, "Normal", reason, format, args...)
}
