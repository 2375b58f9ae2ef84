//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// TestKubeControllerManagerCollects checks what the comparison benchmark (e2e/compare) relies
// on: the harness runs kube-controller-manager with only its garbage collector, the in-tree
// GC's sync is detected (framework.WaitInTreeGCSynced), its /metrics is readable, and it
// collects a dependent of a deleted owner.
func TestKubeControllerManagerCollects(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	owner := cs.CreateCM(t, ns, "owner")
	cs.CreateCM(t, ns, "dep", framework.CMRef(owner))

	k, err := suite.CP.StartKubeControllerManager("kcm-"+t.Name(), harness.KCMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.StopAtCleanup(t, k.Process)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := framework.WaitInTreeGCSynced(ctx, k, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("in-tree GC graph synced %s after start", time.Since(start).Round(time.Millisecond))
	if _, ok := framework.Scrape(t, k).Value("go_memstats_heap_alloc_bytes"); !ok {
		t.Errorf("no go_memstats_heap_alloc_bytes in kube-controller-manager's /metrics")
	}
	if rss, err := harness.ResidentBytes(k.Pid()); err != nil || rss < 1<<20 {
		t.Errorf("RSS of kube-controller-manager: %d, %v", rss, err)
	}
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationBackground)
	cs.WaitCMGone(t, ns, "dep", time.Minute)
}
