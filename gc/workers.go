package gc

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy"
)

// attemptToDelete decides on one dependent from the graph's view and carries the decision out
// (decide.go decides, for Explain too). In the common path that is one API call: a DELETE
// whose preconditions (UID, resourceVersion) are the view's.
func (c *Controller) attemptToDelete(ctx context.Context, uid types.UID) (work.Outcome, error) {
	n, owners, res, ok := c.decidable(uid)
	if !ok {
		if len(owners) > 0 { // decidable returns owners only of an observed dependent: its resource is not watched
			// Its resource is missing from discovery for now (a discovery round answered
			// while kube-apiserver restarted, a CRD's version briefly not served): nothing is
			// decided on what cannot be seen, but it is looked at again, since the resource's
			// return changes none of its objects and so brings no event (found by make
			// test-chaos, seed 1: a Sprocket whose owner was verified absent, taken from the
			// queue in the second its resource was not watched, stayed for ever). Once the
			// resource's ghost grace ends (ghosts.go) the node is no longer observed and this
			// ends.
			return work.WaitForSync, nil
		}
		return work.Done, nil
	}
	logger := klog.FromContext(ctx).WithValues("uid", uid, "object", n.Ref) // a Stringer: formatted only when a line is written
	in, d, err := c.decide(ctx, res, n, owners)
	if err != nil {
		return work.Retry, err
	}
	logger.V(5).Info("Decided", "decision", d.String())
	if needsRecord(in, d) && c.holdForRecord(uid) {
		logger.V(4).Info("Waiting for the orphan record before collecting: an absent owner may be one it names", "decision", d.String())
		return work.Done, nil
	}
	target := client.Target{GVR: res.GVR, Namespace: n.Namespace, Name: n.Name, UID: uid}
	switch d.Action {
	case policy.Keep:
		return work.Done, nil
	case policy.Wait:
		// An owner is still being verified; its answer re-enqueues this dependent (and so does
		// the dependent dropping that reference), when it has a reference to act on.
		return work.Done, nil
	case policy.RemoveRefs:
		return c.removeRefs(ctx, logger, target, n, in, d)
	case policy.Delete:
		return c.collect(ctx, logger, target, n, d)
	case policy.Retry:
		return c.retryUnmapped(d)
	case policy.Requeue:
		c.deleteQueue.AddAfter(uid, d.After)
		return work.Done, nil
	case policy.RecordOrphanedAt: // the policy's collect: After (policy.go)
		return c.recordOrphanedAt(ctx, logger, target, n, in)
	}
	return work.Done, nil
}

// decidable returns the graph's view of dependent uid (its node and owners) and its resource,
// or false when there is nothing to decide: gone, not an object cascade observed, owned by
// nobody, or of a resource no longer watched (a CRD removed: never act on what cannot be seen).
func (c *Controller) decidable(uid types.UID) (graph.NodeView, []graph.OwnerView, Resource, bool) {
	n, owners, ok := c.view(uid)
	if !ok || n.Virtual || n.Absent || len(owners) == 0 {
		return n, nil, Resource{}, false
	}
	res, ok := c.monitors.resourceFor(n.APIVersion, n.Kind)
	return n, owners, res, ok
}

// removeRefs carries out policy.RemoveRefs: one patch removes the references to d.Owners.
// References whose kind has no REST mapping (d.Unmapped) stay, as in-tree.
func (c *Controller) removeRefs(ctx context.Context, logger klog.Logger, target client.Target, n graph.NodeView, in policy.Input, d policy.Decision) (work.Outcome, error) {
	c.opts.Metrics.RESTMappingErrors.Add(float64(len(d.Unmapped)))
	var err error
	if d.Reason == policy.ReasonStaleOwnerRefs {
		// Kept for its solid owners: valid only while the object still references one.
		err = client.RemoveStaleOwnerRefs(ctx, c.opts.Client, target, n.ResourceVersion, d.Owners, solidOwners(in))
	} else {
		// An orphaned owner's references go whatever else the object references; with
		// collect: Never, the object is kept whatever it references.
		err = client.RemoveOwnerRefs(ctx, c.opts.Client, target, d.Owners)
	}
	if errors.Is(err, client.ErrKeepersGone) {
		// The watch is about to deliver the change; decide again on it.
		logger.V(2).Info("Not removing owner references: the owners that kept the object are no longer referenced", "owners", d.Owners)
		return work.Retry, nil
	}
	if err != nil {
		return work.Retry, fmt.Errorf("removing owner references %v (%s): %w", d.Owners, d.Reason, err)
	}
	c.opts.Metrics.Collected.WithLabelValues("remove_refs").Inc()
	logger.V(2).Info("Removed owner references", "owners", d.Owners, "reason", d.Reason)
	if d.Reason == policy.ReasonCollectNever {
		c.reportCollectNever(n, d, in.Collect.Rule)
	}
	if d.DecideAgain {
		// Other references remain that this decision did not settle; the patch event
		// changes none of their states, so nothing else would bring the dependent back.
		return work.Retry, nil
	}
	return work.Done, nil
}

// retryUnmapped carries out policy.Retry: references to gone owners name a kind without REST
// mapping (policy/unmapped.go). The dependent is kept and retried with backoff, as the kind may
// appear (a CRD created again); the error is counted and logged once per item.
func (c *Controller) retryUnmapped(d policy.Decision) (work.Outcome, error) {
	c.opts.Metrics.RESTMappingErrors.Add(float64(len(d.Unmapped)))
	return work.Retry, fmt.Errorf("not collected: the references to owners %v name a kind without REST mapping", d.Unmapped)
}

// collect carries out a Delete decision: unblock the owner references first when the decision
// asks (a potential foreground cycle), then DELETE. After an unblock the object's
// resourceVersion has moved on from the view's, so the DELETE's 409 is expected: the live object
// then passes if its references are the view's with blockOwnerDeletion cleared (the only change
// cascade made), and the DELETE goes again at the live resourceVersion, instead of waiting for
// the watch to deliver cascade's own patch (which, while watches lag, made the unblock and the
// 409 repeat on every retry: found by the chaos suite).
func (c *Controller) collect(ctx context.Context, logger klog.Logger, target client.Target, n graph.NodeView, d policy.Decision) (work.Outcome, error) {
	expect := n.Owners
	if d.UnblockOwnerRefs {
		refs := make([]metav1.OwnerReference, 0, len(n.Owners))
		expect = make([]graph.OwnerRef, 0, len(n.Owners))
		for _, o := range n.Owners {
			refs = append(refs, fromGraphOwnerRef(o))
			o.BlockOwnerDeletion = false
			expect = append(expect, o)
		}
		err := client.UnblockOwnerRefs(ctx, c.opts.Client, target, n.ResourceVersion, refs)
		if errors.Is(err, client.ErrRefsChanged) {
			// A reference came or went after the decision: unblocking the live list would
			// unblock what the decision never saw. Decide again on the watch event.
			logger.V(2).Info("Not unblocking: the live owner references are not the ones the decision saw; deciding again")
			return work.Retry, nil
		}
		if err != nil {
			return work.Retry, fmt.Errorf("unblocking owner references: %w", err)
		}
	}
	return c.deleteDependent(ctx, logger, target, n, d.Propagation, expect)
}

// solidOwners returns the UIDs of the owners in solid states, which keep the dependent.
func solidOwners(in policy.Input) []types.UID {
	var uids []types.UID
	for _, o := range in.Owners {
		if o.State == policy.Solid {
			uids = append(uids, o.UID)
		}
	}
	return uids
}

// deleteDependent sends the DELETE with the view's UID and resourceVersion. A 409 means the view
// was stale: GET the live object; if it is still what the decision saw (viewHolds: references,
// deletion, GC finalizers), retry with its resourceVersion, else decide again on the watch event
// that is on its way.
// expect are the owner references the live object must have for that retry (the view's, or the
// view's unblocked after collect unblocked them).
func (c *Controller) deleteDependent(ctx context.Context, logger klog.Logger, t client.Target, n graph.NodeView, prop metav1.DeletionPropagation, expect []graph.OwnerRef) (work.Outcome, error) {
	if n.ResourceVersion == "" {
		// Every object an API server stores has one; an aggregated API may not. The UID
		// precondition still holds.
		logger.Info("Deleting with a UID precondition only: the object has no resourceVersion")
	}
	err := client.Delete(ctx, c.opts.Client, t, n.ResourceVersion, prop)
	if apierrors.IsConflict(err) {
		live, gerr := c.opts.Client.Get(ctx, t.GVR, t.Namespace, t.Name)
		switch {
		case apierrors.IsNotFound(gerr):
			return work.Done, nil
		case gerr != nil:
			return work.Retry, fmt.Errorf("reading the object after a conflict: %w", gerr)
		case live.UID != n.UID:
			return work.Done, nil // replaced by another object of the same name
		case !viewHolds(live, n, expect):
			// It changed in a way that matters (references, deletion, GC finalizers): decide
			// again on the new view, never delete at the live resourceVersion with the old
			// decision's propagation.
			logger.V(2).Info("Not deleting: the live object is no longer what the decision saw; deciding again")
			return work.Retry, nil
		}
		err = client.Delete(ctx, c.opts.Client, t, live.ResourceVersion, prop)
	}
	switch {
	case err == nil:
		c.opts.Metrics.Collected.WithLabelValues("delete").Inc()
		logger.V(2).Info("Deleted dependent whose owners are gone", "propagation", prop)
		return work.Done, nil
	case apierrors.IsNotFound(err):
		return work.Done, nil
	default:
		return work.Retry, fmt.Errorf("deleting: %w", err)
	}
}

// verifyOwner checks one claimed owner identity with a live GET and feeds the answer to the
// graph. Safety: nothing is answered for a kind without REST mapping, for a namespaced kind
// named by a cluster-scoped dependent, or before the kind's informer has synced.
func (c *Controller) verifyOwner(ctx context.Context, ref graph.Ref) (work.Outcome, error) {
	logger := klog.FromContext(ctx).WithValues("owner", ref.String())
	c.mu.RLock()
	made := c.g.ClaimMade(ref)
	c.mu.RUnlock()
	if !made {
		// Its dependents went or changed their references while it waited (or backed off for
		// lack of a REST mapping): the queue holds no item nobody needs.
		c.opts.Metrics.OwnerVerifications.WithLabelValues("unreferenced").Inc()
		return work.Done, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Kind == "" || ref.Name == "" {
		logger.V(2).Info("Owner reference is malformed; its dependents are never collected because of it", "err", err)
		return work.Done, nil
	}
	gk := gv.WithKind(ref.Kind).GroupKind()
	mapping, err := c.restMapping(gk, gv.Version)
	if err != nil && c.kindGone(ctx, gk, ref.Namespace) { // its CRD was deleted: no such owner can exist (gonekinds.go)
		c.opts.Metrics.OwnerVerifications.WithLabelValues("gone_kind").Inc()
		c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: ref, Present: false})
		return work.Done, nil
	}
	if err != nil {
		c.opts.Metrics.RESTMappingErrors.Inc()
		return work.Retry, err
	}
	ns := ref.Namespace
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	} else if ns == "" {
		logger.V(2).Info("A cluster-scoped dependent names a namespaced owner kind; never collected because of it")
		return work.Done, nil
	}
	if c.monitors.isWatched(gk) && !c.monitors.kindSynced(gk) {
		return work.WaitForSync, nil
	}
	answer := graph.Ref{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ns, Name: ref.Name, UID: ref.UID}
	key := AbsentKey{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ns, Name: ref.Name, UID: ref.UID}
	if c.absent.Has(key) {
		c.opts.Metrics.OwnerVerifications.WithLabelValues("cached_absent").Inc()
		c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: answer, Present: false})
		return work.Done, nil
	}
	live, err := c.opts.Client.Get(ctx, mapping.Resource, ns, ref.Name)
	switch {
	case apierrors.IsNotFound(err) && !namesObject(err, ref.Name):
		// A 404 for the path itself (the resource is gone from the server, or the mapping is
		// stale) says nothing about the owner: an error, retried, never absence.
		c.opts.Metrics.OwnerVerifications.WithLabelValues("error").Inc()
		return work.Retry, fmt.Errorf("verifying owner %s: the server does not know %s: %w", ref.String(), GVRString(mapping.Resource), err)
	case apierrors.IsNotFound(err):
		c.absent.Add(key)
		c.opts.Metrics.OwnerVerifications.WithLabelValues("absent").Inc()
		c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: answer, Present: false})
	case err != nil:
		c.opts.Metrics.OwnerVerifications.WithLabelValues("error").Inc()
		return work.Retry, fmt.Errorf("verifying owner %s: %w", ref.String(), err)
	case live.UID != ref.UID:
		c.absent.Add(key)
		c.opts.Metrics.OwnerVerifications.WithLabelValues("absent").Inc()
		c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: answer, Present: false})
	default:
		c.opts.Metrics.OwnerVerifications.WithLabelValues("present").Inc()
		c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: answer, Present: true})
	}
	return work.Done, nil
}

// namesObject reports whether a NotFound error is about the object name (its status details
// name it), rather than about the request path.
func namesObject(err error, name string) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Name == name
}

// viewHolds reports whether the live object is still what a decision taken on the graph's view
// n saw, in everything of the object's own that the decision reads: not being deleted, the owner
// references (expect: the view's, or the view's as cascade itself changed them) and the GC
// finalizers, which set the DELETE's propagation. A DELETE sent at the live resourceVersion is
// sent only when it holds; otherwise the dependent is decided again on the view that includes the
// change (a user or the default-propagation pass adding the orphan finalizer after the view was
// taken would otherwise get an explicit Background delete: its own dependents collected where
// they had to be orphaned).
func viewHolds(live *metav1.PartialObjectMetadata, n graph.NodeView, expect []graph.OwnerRef) bool {
	if live.DeletionTimestamp != nil || gcFinalizers(live.Finalizers) != n.Finalizers {
		return false
	}
	view := make([]metav1.OwnerReference, len(expect))
	for i, o := range expect {
		view[i] = fromGraphOwnerRef(o)
	}
	return client.SameOwnerRefs(live.OwnerReferences, view)
}

func fromGraphOwnerRef(o graph.OwnerRef) metav1.OwnerReference {
	ref := metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID}
	if o.Controller {
		t := true
		ref.Controller = &t
	}
	if o.BlockOwnerDeletion {
		t := true
		ref.BlockOwnerDeletion = &t
	}
	return ref
}
