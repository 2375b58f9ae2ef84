package finalizers

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/work"
)

// foreground handles an owner being deleted in the foreground. The collector deletes the
// dependents (the graph handed them over when the owner entered foreground deletion, and the
// collector hands them over again every period); this waits until none blocks the owner
// (blockOwnerDeletion: true and still present, including one that is itself Terminating) and
// then removes the foregroundDeletion finalizer. Dependents that do not block are deleted but
// not waited for. While waiting, the owner is retried with backoff; the departure of a blocking
// dependent also wakes it (RecheckOwner). No finalizer goes while a resource's view is catching
// up (CatchUpWait).
func (p *Processor) foreground(ctx context.Context, logger klog.Logger, owner client.Target, pr *progress) (work.Outcome, error) {
	if blocking := p.view.BlockingDependents(owner.UID); blocking > 0 {
		logger.V(5).Info("Waiting for blocking dependents", "blocking", blocking)
		p.reportUnsyncedBlockers(logger, owner, pr)
		p.reportStuck(ctx, logger, owner, pr, metav1.FinalizerDeleteDependents)
		return work.Retry, nil
	}
	if lagging := p.view.CatchingUp(p.opts.Clock.Now().Add(-p.opts.CatchUpWait)); len(lagging) > 0 {
		// A resource whose watch ended (an API server restart, an expired watch being relisted)
		// may hold a blocking dependent written meanwhile that the graph has not seen: the owner
		// waits until its view is current again, or CatchUpWait after the watch ended.
		logger.V(4).Info("Waiting for resources to catch up before finishing the foreground deletion", "resources", len(lagging), "first", gc.GVRString(lagging[0].GVR))
		return work.Retry, nil
	}
	if unsynced := p.view.Unsynced(); len(unsynced) > 0 && !pr.finishedUnsyncedReported {
		// After --sync-timeout cascade proceeds with what synced (in-tree does the same): a
		// blocking dependent in a resource that never listed cannot be waited for. Say so.
		pr.finishedUnsyncedReported = true
		var names []string
		for _, u := range unsynced {
			names = append(names, gc.GVRString(u.Resource.GVR))
		}
		logger.Info("Finishing a foreground deletion while resources are not synced: blocking dependents there, if any, are not waited for", "unsynced", names)
		if p.opts.Events != nil {
			p.opts.Events.Eventf(ownerObject(owner, p.view), corev1.EventTypeWarning, EventReasonFinishedUnsynced,
				"No known dependent blocks this owner, but %s cannot be listed or watched: blocking dependents there, if any, are not waited for", strings.Join(names, ", "))
		}
	}
	removed, err := p.removeFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
	if err != nil {
		p.opts.Metrics.failed(metav1.FinalizerDeleteDependents)
		return work.Retry, err
	}
	if removed {
		logger.V(2).Info("Removed the foregroundDeletion finalizer: no dependent blocks the owner")
	}
	return work.Done, nil
}

// EventReasonFinishedUnsynced is the reason of the Warning Event on a foreground owner whose
// finalizer cascade removes while some resources are unsynced.
const EventReasonFinishedUnsynced = "ForegroundDeletionFinishedWithUnsyncedResources"

// EventReasonBlockedByUnsynced is the reason of the Warning Event on a foreground owner that
// waits for a dependent whose resource cascade cannot list or watch.
const EventReasonBlockedByUnsynced = "ForegroundDeletionBlockedByUnsyncedResource"

// reportUnsyncedBlockers says, once per owner and resource, that a blocking dependent belongs to
// a resource whose view is incomplete (its list or watch fails): the collector cannot see it
// go, nor always delete it, so the owner may wait until the resource recovers. A log line at
// default verbosity, a counter and a Warning Event on the owner name the resource.
func (p *Processor) reportUnsyncedBlockers(logger klog.Logger, owner client.Target, pr *progress) {
	for _, d := range p.view.Dependents(owner.UID) {
		res, unsynced := p.view.UnsyncedKind(d.APIVersion, d.Kind)
		if !unsynced || !blocks(p.view.Owners(d.UID), owner.UID) {
			continue
		}
		name := gc.GVRString(res.GVR)
		if _, done := pr.reported[name]; done {
			continue
		}
		pr.reported[name] = struct{}{}
		logger.Info("A blocking dependent's resource is not synced: the owner waits until it recovers", "dependent", d.String(), "resource", name)
		p.opts.Metrics.blockedByUnsynced(name)
		if p.opts.Events != nil {
			p.opts.Events.Eventf(ownerObject(owner, p.view), corev1.EventTypeWarning, EventReasonBlockedByUnsynced,
				"Waiting for dependent %s/%s of resource %s, which cascade cannot list or watch; foreground deletion finishes once it syncs", d.Namespace, d.Name, name)
		}
	}
}

// blocks reports whether owners holds a blocking reference to uid.
func blocks(owners []graph.OwnerView, uid types.UID) bool {
	for _, o := range owners {
		if o.UID == uid && o.BlockOwnerDeletion {
			return true
		}
	}
	return false
}

// ownerObject is the owner as an Event's involved object.
func ownerObject(owner client.Target, view gc.View) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: owner.Name, UID: owner.UID}}
	if n, ok := view.Node(owner.UID); ok {
		m.APIVersion, m.Kind = n.APIVersion, n.Kind
	}
	return m
}
