package framework

import (
	"context"
	"fmt"
	"time"

	"github.com/cascade-gc/cascade/e2e/harness"
)

// inTreeGraphChanges selects the workqueue through which every informer event reaches the
// in-tree GC's single graph writer; its depth falls to 0 once the initial lists are in the
// graph.
const inTreeGraphChanges = `{name="garbage_collector_graph_changes"}`

// WaitInTreeGCSynced waits until kube-controller-manager's garbage collector has the cluster
// in its dependency graph: it logged that all resource monitors synced (their informers hold
// the initial lists), and its graph-changes queue has received at least minEvents events and
// stayed empty over three polls 50 ms apart (the single graph writer has applied them). It
// fails if the monitors' initial sync timed out, if the process exits, or when ctx ends.
func WaitInTreeGCSynced(ctx context.Context, k *harness.KubeControllerManager, minEvents float64) error {
	if err := k.WaitMonitorsSynced(ctx); err != nil {
		return err
	}
	timeout := time.Hour
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	quiet, lastAdds := 0, -1.0
	var lastErr error
	err := Poll(timeout, 50*time.Millisecond, func() (bool, error) {
		if exited, werr := k.Exited(); exited {
			return false, fmt.Errorf("kube-controller-manager exited before its graph synced: %v", werr)
		}
		m, err := ReadMetrics(k)
		if lastErr = err; err != nil {
			return false, nil
		}
		depth, _ := m.Value("workqueue_depth" + inTreeGraphChanges)
		adds, _ := m.Value("workqueue_adds_total" + inTreeGraphChanges)
		if depth == 0 && adds >= minEvents && adds == lastAdds {
			quiet++
		} else {
			quiet = 0
		}
		lastAdds = adds
		return quiet >= 2, nil
	})
	if err != nil {
		return fmt.Errorf("kube-controller-manager's graph not synced (last scrape error: %v): %w\n%s", lastErr, err, k.Tail(30))
	}
	return nil
}
