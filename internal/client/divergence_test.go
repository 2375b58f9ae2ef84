package client

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/internal/client/clienttest"
)

// TestDryRunDivergence: some time after the would-be writes, an object cascade would have
// deleted that is still there, and one it would have kept (released) that was deleted, count
// as divergence; objects that went as cascade would have done, or were released, do not.
func TestDryRunDivergence(t *testing.T) {
	fake := clienttest.NewFake(
		clienttest.Widget("ns", "kept", "u-kept", "1", clienttest.OwnerRef("o", nil)),
		clienttest.Widget("ns", "released", "u-released", "1", clienttest.OwnerRef("o", nil)),
	)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d := NewDryRun(New(fake), prometheus.NewRegistry())
	d.div.clock = clk
	ctx := context.Background()
	target := func(name string) Target {
		return Target{GVR: widgets, Namespace: "ns", Name: name, UID: types.UID("u-" + name)}
	}
	// Would delete: "kept" (another collector keeps it) and "collected" (it goes).
	for _, n := range []string{"kept", "collected"} {
		if err := Delete(ctx, d, target(n), "1", metav1.DeletePropagationBackground); err != nil {
			t.Fatal(err)
		}
	}
	// Would release: "released" (it stays) and "lost" (another collector deletes it).
	for _, n := range []string{"released", "lost"} {
		if err := RemoveOwnerRefs(ctx, d, target(n), []types.UID{"o"}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(30 * time.Second)
	d.checkDue(ctx, time.Minute)
	if n := testutil.CollectAndCount(d.div.total); n != 0 {
		t.Fatalf("divergence counted before the delay: %d series", n)
	}
	clk.Step(30 * time.Second)
	d.checkDue(ctx, time.Minute)
	if v := testutil.ToFloat64(d.div.total.WithLabelValues(DivergenceKeptByOther)); v != 1 {
		t.Errorf("kept_by_other = %v, want 1 (kept)", v)
	}
	if v := testutil.ToFloat64(d.div.total.WithLabelValues(DivergenceDeletedByOther)); v != 1 {
		t.Errorf("deleted_by_other = %v, want 1 (lost)", v)
	}
	if v := testutil.ToFloat64(d.div.checked); v != 4 {
		t.Errorf("checked = %v, want 4", v)
	}
	d.checkDue(ctx, time.Minute) // each is checked once
	if v := testutil.ToFloat64(d.div.total.WithLabelValues(DivergenceKeptByOther)) + testutil.ToFloat64(d.div.total.WithLabelValues(DivergenceDeletedByOther)); v != 2 {
		t.Errorf("divergence counted again: %v", v)
	}
}
