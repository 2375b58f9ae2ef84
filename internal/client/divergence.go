package client

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Divergence in shadow mode. Beside another collector (kube-controller-manager's), what cascade
// would have done should happen anyway. Some time after each would-be write, the dry-run client
// reads the object again:
//   - a would-be DELETE whose object is still there (same UID, not being deleted): the other
//     collector keeps what cascade would collect (kind="kept_by_other");
//   - a would-be reference removal (orphaning, collect: Never) whose object is gone: the other
//     collector deleted what cascade would keep (kind="deleted_by_other").
//
// Each counts once in cascade_dry_run_divergence_total{kind} with a log line naming the object.
// A non-zero count before switching is the reason to read the log first (docs/migration.md).

// Divergence kinds.
const (
	DivergenceKeptByOther    = "kept_by_other"
	DivergenceDeletedByOther = "deleted_by_other"
)

// maxPendingChecks bounds the would-be writes waiting for their check.
const maxPendingChecks = 100000

type pendingCheck struct {
	action string
	t      Target
	at     time.Time
}

// divergence holds the would-be writes to check again.
type divergence struct {
	total   *prometheus.CounterVec
	checked prometheus.Counter
	clock   clock.WithTicker

	mu      sync.Mutex
	pending []pendingCheck // guarded by mu; in time order
}

func (d *divergence) add(action string, t Target) {
	if action != ActionDelete && action != ActionRemoveOwnerRefs {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) < maxPendingChecks {
		d.pending = append(d.pending, pendingCheck{action: action, t: t, at: d.clock.Now()})
	}
}

// due takes the would-be writes older than after.
func (d *divergence) due(after time.Duration) []pendingCheck {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	n := 0
	for n < len(d.pending) && now.Sub(d.pending[n].at) >= after {
		n++
	}
	out := append([]pendingCheck(nil), d.pending[:n]...)
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return out
}

// Run reads again, every tenth of the divergence delay (at least a second), the objects cascade
// would have written to more than that delay ago, and counts where another collector did
// otherwise. It returns nil when ctx ends.
func (d *DryRun) Run(ctx context.Context) error {
	d.CheckDivergence(ctx, max(d.after/10, time.Second), d.after)
	return nil
}

// CheckDivergence reads again, every period, the objects cascade would have written to more
// than after ago, and counts where another collector did otherwise. It returns when ctx ends.
func (d *DryRun) CheckDivergence(ctx context.Context, period, after time.Duration) {
	t := d.div.clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			d.checkDue(ctx, after)
		}
	}
}

func (d *DryRun) checkDue(ctx context.Context, after time.Duration) {
	logger := klog.FromContext(ctx)
	for _, p := range d.div.due(after) {
		live, err := d.c.Get(ctx, p.t.GVR, p.t.Namespace, p.t.Name)
		gone := apierrors.IsNotFound(err) || (err == nil && (live.UID != p.t.UID || live.DeletionTimestamp != nil))
		if err == nil || apierrors.IsNotFound(err) {
			d.div.checked.Inc()
		}
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			logger.V(2).Info("Dry run: cannot check for divergence", "action", p.action, "target", p.t.String(), "err", err)
		case p.action == ActionDelete && !gone:
			d.div.total.WithLabelValues(DivergenceKeptByOther).Inc()
			logger.Info("Dry run divergence: cascade would have deleted this object; it is still there", "target", p.t.String(), "after", after)
		case p.action == ActionRemoveOwnerRefs && gone:
			d.div.total.WithLabelValues(DivergenceDeletedByOther).Inc()
			logger.Info("Dry run divergence: cascade would have kept this object (removing a reference); it was deleted", "target", p.t.String(), "after", after)
		}
	}
}
