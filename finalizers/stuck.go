package finalizers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/work"
)

// Stuck deletions. An owner that waits on its GC finalizer longer than Options.StuckAfter gets
// a Warning Event naming up to maxStuckNamed of the dependents it waits for and what holds
// each (its own finalizers, an unsynced resource, an orphan patch that keeps failing),
// refreshed at most every StuckAfter; cascade_oldest_waiting_owner_seconds{finalizer} feeds the
// alert. The wait is counted from when this process first found the owner waiting (a restart
// starts it again).

const (
	// DefaultStuckAfter is the default of Options.StuckAfter.
	DefaultStuckAfter = 5 * time.Minute
	// EventReasonStuck is the reason of the Warning Event on a stuck owner.
	EventReasonStuck = "DeletionStuck"
	// maxStuckNamed bounds the dependents one Event names (and the live GETs it costs).
	maxStuckNamed = 5
)

// diagnose is process in companion mode: kube-controller-manager's collector finishes the
// owner's GC finalizers; this reports the owner stuck once it has waited longer than
// StuckAfter, and writes nothing. The owner is followed (Retry, with the queue's backoff) while
// something in the graph holds it: a dependent that still references an orphaning owner, a
// blocking dependent of a foreground one. Once nothing does, the in-tree collector is about to
// finish it, and the resync looks again.
func (p *Processor) diagnose(ctx context.Context, logger klog.Logger, owner client.Target, todo Work) work.Outcome {
	pr := p.progressOf(owner.UID)
	waiting := false
	if todo.Orphan && len(p.view.Dependents(owner.UID)) > 0 {
		waiting = true
		p.reportStuck(ctx, logger, owner, pr, metav1.FinalizerOrphanDependents)
	}
	if todo.Foreground && p.view.BlockingDependents(owner.UID) > 0 {
		waiting = true
		p.reportStuck(ctx, logger, owner, pr, metav1.FinalizerDeleteDependents)
	}
	if waiting {
		return work.Retry
	}
	return work.Done
}

// reportStuck emits the Warning Event for owner if it has waited on finalizer longer than
// StuckAfter and was not reported within the last StuckAfter.
func (p *Processor) reportStuck(ctx context.Context, logger klog.Logger, owner client.Target, pr *progress, finalizer string) {
	now := p.opts.Clock.Now()
	waited := now.Sub(pr.since)
	if waited < p.opts.StuckAfter || (!pr.stuckReported.IsZero() && now.Sub(pr.stuckReported) < p.opts.StuckAfter) {
		return
	}
	pr.stuckReported = now
	var holds []string
	total := 0
	for _, d := range p.view.Dependents(owner.UID) {
		if !p.waitsFor(owner.UID, d, pr, finalizer) {
			continue
		}
		total++
		if len(holds) < maxStuckNamed {
			holds = append(holds, p.whatHolds(ctx, d, finalizer))
		}
	}
	msg := fmt.Sprintf("Waiting %s on finalizer %s for %d dependent(s): %s", waited.Round(time.Second), finalizer, total, strings.Join(holds, "; "))
	if total > len(holds) {
		msg += fmt.Sprintf("; and %d more", total-len(holds))
	}
	logger.Info("Deletion stuck", "finalizer", finalizer, "waited", waited.Round(time.Second), "dependents", total, "holds", holds)
	if p.opts.Events != nil {
		p.opts.Events.Event(ownerObject(owner, p.view), corev1.EventTypeWarning, EventReasonStuck, msg)
	}
}

// waitsFor reports whether owner's finalizer waits for dependent d: for foregroundDeletion, d
// references it with blockOwnerDeletion; for orphan, d's reference was not removed yet.
func (p *Processor) waitsFor(owner types.UID, d graph.Ref, pr *progress, finalizer string) bool {
	if finalizer == metav1.FinalizerDeleteDependents {
		return blocks(p.view.Owners(d.UID), owner)
	}
	_, patched := pr.patched[d.UID]
	return !patched
}

// whatHolds says, for one dependent, why the owner still waits for it.
func (p *Processor) whatHolds(ctx context.Context, d graph.Ref, finalizer string) string {
	name := d.Namespace + "/" + d.Name
	if d.Namespace == "" {
		name = d.Name
	}
	name = d.Kind + " " + name
	if res, unsynced := p.view.UnsyncedKind(d.APIVersion, d.Kind); unsynced {
		return fmt.Sprintf("%s (its resource %s is not synced: cascade cannot list or watch it)", name, gc.GVRString(res.GVR))
	}
	if finalizer == metav1.FinalizerOrphanDependents {
		if p.opts.Companion {
			return name + " (still references the owner: kube-controller-manager's garbage collector has not removed the reference)"
		}
		return name + " (removing its reference keeps failing)"
	}
	res, ok := p.view.ResourceFor(d.APIVersion, d.Kind)
	if !ok {
		return name + " (its resource is not watched)"
	}
	ns := d.Namespace
	if !res.Namespaced {
		ns = ""
	}
	live, err := p.opts.Client.Get(ctx, res.GVR, ns, d.Name)
	switch {
	case err != nil:
		return fmt.Sprintf("%s (cannot read it: %v)", name, err)
	case live.UID != d.UID:
		return name + " (gone; its deletion has not reached cascade yet)"
	case live.DeletionTimestamp != nil:
		return fmt.Sprintf("%s (being deleted, held by finalizers %v)", name, live.Finalizers)
	case p.opts.Companion:
		return name + " (not deleted yet: kube-controller-manager's garbage collector deletes it; see its log)"
	default:
		return name + " (not deleted yet: see cascade_worker_errors_total and the log)"
	}
}

// updateOldestWaiting sets cascade_oldest_waiting_owner_seconds from the owners being deleted
// with a GC finalizer now.
func (p *Processor) updateOldestWaiting(owners []types.UID) {
	now := p.opts.Clock.Now()
	oldest := map[string]time.Duration{metav1.FinalizerOrphanDependents: 0, metav1.FinalizerDeleteDependents: 0}
	for _, uid := range owners {
		n, ok := p.view.Node(uid)
		if !ok {
			continue
		}
		age := now.Sub(p.progressOf(uid).since)
		if n.Finalizers.Has(graph.FinalizerOrphan) {
			oldest[metav1.FinalizerOrphanDependents] = max(oldest[metav1.FinalizerOrphanDependents], age)
		}
		if n.Finalizers.Has(graph.FinalizerForeground) {
			oldest[metav1.FinalizerDeleteDependents] = max(oldest[metav1.FinalizerDeleteDependents], age)
		}
	}
	for f, age := range oldest {
		p.opts.Metrics.OldestWaiting.WithLabelValues(f).Set(age.Seconds())
	}
}
