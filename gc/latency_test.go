package gc

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cascade-gc/cascade/graph"
)

// TestCollectionDuration: Background runs from the owner's deletion observed to its last
// dependent's deletion observed; Foreground from the owner entering foreground deletion to the
// owner gone; an owner whose dependent is kept never counts.
func TestCollectionDuration(t *testing.T) {
	c, _ := newWorkerTestController(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.latency.now = func() time.Time { return now }
	step := func(d time.Duration) { now = now.Add(d) }

	observe(c, widgetObj("w-u-bg", "u-bg"), widgetObj("a", "u-a", "u-bg"), widgetObj("b", "u-b", "u-bg"))
	observeDeleted(c, "u-bg")
	step(time.Second)
	observeDeleted(c, "u-a")
	step(2 * time.Second)
	observeDeleted(c, "u-b")

	fg := widgetObj("w-u-fg", "u-fg")
	fg.Deleting, fg.Finalizers = true, graph.FinalizerForeground
	observe(c, widgetObj("w-u-fg", "u-fg"), widgetObj("c", "u-c", "u-fg"))
	observe(c, fg)
	step(5 * time.Second)
	observeDeleted(c, "u-c", "u-fg")

	observe(c, widgetObj("w-u-kept", "u-kept"), widgetObj("w-u-live", "u-live"), widgetObj("k", "u-k", "u-kept", "u-live"))
	observeDeleted(c, "u-kept") // k stays: u-live holds it

	for _, tt := range []struct {
		propagation string
		count       uint64
		sum         float64
	}{{"Background", 1, 3}, {"Foreground", 1, 5}} {
		var m dto.Metric
		if err := c.opts.Metrics.CollectionDuration.WithLabelValues(tt.propagation).(interface{ Write(*dto.Metric) error }).Write(&m); err != nil {
			t.Fatal(err)
		}
		if h := m.GetHistogram(); h.GetSampleCount() != tt.count || h.GetSampleSum() != tt.sum {
			t.Errorf("%s: %d samples, sum %v; want %d, %v", tt.propagation, h.GetSampleCount(), h.GetSampleSum(), tt.count, tt.sum)
		}
	}
	if _, ok := c.latency.owners["u-kept"]; !ok {
		t.Error("the owner whose dependent was kept is no longer tracked (it must wait, then expire)")
	}
}
