//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/harness"
)

// TestKubeControllerManagerCollects checks what the comparison benchmark relies on: the
// harness runs kube-controller-manager with only its garbage collector, the in-tree GC's sync is
// detected, its /metrics is readable, and it collects a dependent of a deleted owner.
func TestKubeControllerManagerCollects(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	owner := createCM(t, cs, ns, "owner")
	createCM(t, cs, ns, "dep", cmRef(owner))

	k, err := cp.StartKubeControllerManager("kcm-"+t.Name(), harness.KCMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", k.LogPath, k.Tail(60))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := k.WaitGraphSynced(ctx, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("in-tree GC graph synced %s after start", time.Since(start).Round(time.Millisecond))
	m, err := k.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := harness.SampleValue(m, "go_memstats_heap_alloc_bytes"); !ok {
		t.Errorf("no go_memstats_heap_alloc_bytes in kube-controller-manager's /metrics")
	}
	if rss, err := harness.ResidentBytes(k.Pid()); err != nil || rss < 1<<20 {
		t.Errorf("RSS of kube-controller-manager: %d, %v", rss, err)
	}
	deleteCM(t, cs, ns, "owner", metav1.DeletePropagationBackground)
	waitCMGone(t, cs, ns, "dep", time.Minute)
}
