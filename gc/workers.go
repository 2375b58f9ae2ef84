package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/policy"
)

// outcome tells a worker what to do with its queue item.
type outcome int

const (
	done    outcome = iota // forget the item
	requeue                // retry with the per-item backoff
	later                  // retry after a fixed short delay (waiting for an informer to sync)
)

// waitForSync is how long an item waits before checking again whether an informer synced.
const waitForSync = time.Second

func (c *Controller) runDeleteWorker(ctx context.Context) {
	for {
		uid, shutdown := c.deleteQueue.Get()
		if shutdown {
			return
		}
		out := c.attemptToDelete(ctx, uid)
		finish(c.deleteQueue, uid, out)
	}
}

func (c *Controller) runVerifyWorker(ctx context.Context) {
	for {
		ref, shutdown := c.verifyQueue.Get()
		if shutdown {
			return
		}
		out := c.verifyOwner(ctx, ref)
		finish(c.verifyQueue, ref, out)
	}
}

type rateLimitedQueue[T comparable] interface {
	Done(T)
	Forget(T)
	AddRateLimited(T)
	AddAfter(T, time.Duration)
}

func finish[T comparable](q rateLimitedQueue[T], item T, out outcome) {
	switch out {
	case done:
		q.Forget(item)
	case requeue:
		q.AddRateLimited(item)
	case later:
		q.Forget(item)
		q.AddAfter(item, waitForSync)
	}
	q.Done(item)
}

// attemptToDelete decides on one dependent from the graph's view and acts on it with one API
// call in the common path: a DELETE whose preconditions (UID, resourceVersion) are the view's.
func (c *Controller) attemptToDelete(ctx context.Context, uid types.UID) outcome {
	logger := klog.FromContext(ctx).WithValues("uid", uid)
	n, owners, ok := c.view(uid)
	if !ok || n.Virtual || n.Absent {
		return done // gone, or not an object we observed: nothing to collect
	}
	logger = logger.WithValues("object", n.Ref.String())
	if len(owners) == 0 {
		return done
	}
	res, ok := c.monitors.resourceFor(n.APIVersion, n.Kind)
	if !ok {
		return done // no longer watched (CRD removed): never act on what we cannot see
	}
	in := policy.Input{
		Owners:              make([]policy.Owner, 0, len(owners)),
		HasDependents:       n.Dependents > 0,
		OrphanFinalizer:     n.Finalizers.Has(graph.FinalizerOrphan),
		ForegroundFinalizer: n.Finalizers.Has(graph.FinalizerForeground),
		BeingDeleted:        n.Deleting,
	}
	var orphaned []types.UID // gone owners whose dependents were orphaned
	for _, o := range owners {
		if o.State == graph.OwnerAbsent && c.orphaned(o.UID) {
			if !slices.Contains(orphaned, o.UID) {
				orphaned = append(orphaned, o.UID)
			}
			continue
		}
		in.Owners = append(in.Owners, policy.Owner{UID: o.UID, State: ownerState(o.State)})
	}
	if len(orphaned) > 0 {
		return c.removeOrphanedRefs(ctx, logger, res, n, orphaned, len(in.Owners) > 0)
	}
	if n.Dependents > 0 {
		in.DependentDeletingDependents = c.anyDependentDeletingDependents(uid)
	}
	d := policy.Decide(in)
	logger.V(5).Info("Decided", "decision", d.String())
	switch d.Action {
	case policy.Keep:
		return done
	case policy.Wait:
		// An owner is still being verified; its answer re-enqueues this dependent.
		return done
	case policy.RemoveRefs:
		err := RemoveOwnerRefs(ctx, c.deps.Client, res.GVR, n.Namespace, n.Name, uid, d.Owners)
		if err != nil {
			logger.V(2).Info("Removing stale owner references failed; will retry", "err", err)
			return requeue
		}
		c.deps.Metrics.Collected.WithLabelValues("remove_refs").Inc()
		logger.V(2).Info("Removed owner references to absent or waiting owners", "owners", d.Owners)
		return done
	case policy.Delete:
		if d.UnblockOwnerRefs {
			refs := make([]metav1.OwnerReference, 0, len(n.Owners))
			for _, o := range n.Owners {
				refs = append(refs, fromGraphOwnerRef(o))
			}
			if err := UnblockOwnerRefs(ctx, c.deps.Client, res.GVR, n.Namespace, n.Name, uid, refs); err != nil {
				logger.V(2).Info("Unblocking owner references failed; will retry", "err", err)
				return requeue
			}
		}
		return c.deleteDependent(ctx, logger, res, n, d.Propagation)
	}
	return done
}

// orphaned reports whether the finalizer handler orphaned the dependents of owner uid.
func (c *Controller) orphaned(uid types.UID) bool {
	return c.deps.Finalizers != nil && c.deps.Finalizers.Orphaned(uid)
}

// removeOrphanedRefs removes the references to owners that were deleted with the orphan policy
// and reached the graph late (observed, or patched, after the owner's orphan finalizer was
// removed): such a reference is removed, never a reason to delete. With other references
// left, the dependent is decided again once the patched object is observed.
func (c *Controller) removeOrphanedRefs(ctx context.Context, logger klog.Logger, res Resource, n graph.NodeView, owners []types.UID, others bool) outcome {
	if err := RemoveOwnerRefs(ctx, c.deps.Client, res.GVR, n.Namespace, n.Name, n.UID, owners); err != nil {
		logger.V(2).Info("Removing references to orphaning owners failed; will retry", "err", err)
		return requeue
	}
	c.deps.Metrics.Collected.WithLabelValues("remove_refs").Inc()
	logger.V(2).Info("Removed references to owners deleted with the orphan policy", "owners", owners)
	if others {
		return requeue
	}
	return done
}

// deleteDependent sends the DELETE with the view's UID and resourceVersion. A 409 means the view
// was stale: GET the live object; if its owner references are unchanged, retry with its
// resourceVersion, else leave it to the watch event that is on its way.
func (c *Controller) deleteDependent(ctx context.Context, logger klog.Logger, res Resource, n graph.NodeView, prop metav1.DeletionPropagation) outcome {
	err := c.deps.Client.Delete(ctx, res.GVR, n.Namespace, n.Name, deleteOptions(n.UID, n.ResourceVersion, prop))
	if apierrors.IsConflict(err) {
		live, gerr := c.deps.Client.Get(ctx, res.GVR, n.Namespace, n.Name)
		switch {
		case apierrors.IsNotFound(gerr):
			return done
		case gerr != nil:
			logger.V(2).Info("Reading object after a conflict failed; will retry", "err", gerr)
			return requeue
		case live.UID != n.UID:
			return done // replaced by another object of the same name
		case live.DeletionTimestamp != nil || !sameOwners(live.OwnerReferences, n.Owners):
			return requeue // it changed in a way that matters: decide again on the new view
		}
		err = c.deps.Client.Delete(ctx, res.GVR, n.Namespace, n.Name, deleteOptions(n.UID, live.ResourceVersion, prop))
	}
	switch {
	case err == nil:
		c.deps.Metrics.Collected.WithLabelValues("delete").Inc()
		logger.V(2).Info("Deleted dependent whose owners are gone", "propagation", prop)
		return done
	case apierrors.IsNotFound(err):
		return done
	default:
		logger.V(2).Info("Delete failed; will retry", "err", err)
		return requeue
	}
}

// verifyOwner checks one claimed owner identity with a live GET and feeds the answer to the
// graph. Safety: nothing is answered for a kind without REST mapping, for a namespaced kind
// named by a cluster-scoped dependent, or before the kind's informer has synced.
func (c *Controller) verifyOwner(ctx context.Context, ref graph.Ref) outcome {
	logger := klog.FromContext(ctx).WithValues("owner", ref.String())
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Kind == "" || ref.Name == "" {
		logger.V(2).Info("Owner reference is malformed; its dependents are never collected because of it", "err", err)
		return done
	}
	gk := gv.WithKind(ref.Kind).GroupKind()
	mapping, err := c.restMapping(gk, gv.Version)
	if err != nil {
		c.deps.Metrics.RESTMappingErrors.Inc()
		logger.V(2).Info("No REST mapping for owner kind; will retry", "err", err)
		return requeue
	}
	ns := ref.Namespace
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	} else if ns == "" {
		logger.V(2).Info("A cluster-scoped dependent names a namespaced owner kind; never collected because of it")
		return done
	}
	if c.monitors.isWatched(gk) && !c.monitors.kindSynced(gk) {
		return later
	}
	answer := graph.Ref{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ns, Name: ref.Name, UID: ref.UID}
	key := AbsentKey{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ns, Name: ref.Name, UID: ref.UID}
	if c.absent.Has(key) {
		c.deps.Metrics.OwnerVerifications.WithLabelValues("cached_absent").Inc()
		c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: answer, Present: false})
		return done
	}
	live, err := c.deps.Client.Get(ctx, mapping.Resource, ns, ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		c.absent.Add(key)
		c.deps.Metrics.OwnerVerifications.WithLabelValues("absent").Inc()
		c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: answer, Present: false})
	case err != nil:
		c.deps.Metrics.OwnerVerifications.WithLabelValues("error").Inc()
		logger.V(2).Info("Verifying owner failed; will retry", "err", err)
		return requeue
	case live.UID != ref.UID:
		c.absent.Add(key)
		c.deps.Metrics.OwnerVerifications.WithLabelValues("absent").Inc()
		c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: answer, Present: false})
	default:
		c.deps.Metrics.OwnerVerifications.WithLabelValues("present").Inc()
		c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: answer, Present: true})
	}
	return done
}

func (c *Controller) restMapping(gk schema.GroupKind, version string) (*meta.RESTMapping, error) {
	if c.deps.Mapper == nil {
		return nil, errors.New("no REST mapper")
	}
	m, err := c.deps.Mapper.RESTMapping(gk, version)
	if err != nil {
		return nil, fmt.Errorf("REST mapping of %s/%s: %w", gk, version, err)
	}
	return m, nil
}

// anyDependentDeletingDependents is the in-tree cycle guard's test: is any dependent of uid
// itself being deleted in the foreground?
func (c *Controller) anyDependentDeletingDependents(uid types.UID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, d := range c.g.Dependents(uid) {
		if n, ok := c.g.Node(d.UID); ok && n.Deleting && n.Finalizers.Has(graph.FinalizerForeground) {
			return true
		}
	}
	return false
}

// ownerState maps the graph's verdict on one reference to the decision's input. Anything the
// graph cannot vouch for is Unknown, which never leads to a delete.
func ownerState(s graph.OwnerState) policy.OwnerState {
	switch {
	case s.Solid():
		return policy.Solid
	case s.Waiting():
		return policy.Waiting
	case s.Dangling():
		return policy.Dangling
	default: // Unknown, Mismatch (verification pending), Unresolvable (never collectable)
		return policy.Unknown
	}
}

func sameOwners(live []metav1.OwnerReference, view []graph.OwnerRef) bool {
	if len(live) != len(view) {
		return false
	}
	for i := range live {
		if toGraphOwnerRef(live[i]) != view[i] {
			return false
		}
	}
	return true
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
