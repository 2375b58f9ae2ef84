//go:build e2e

package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestLeaderFailover: two replicas share a Lease. Only the leader acts (the standby sends no
// DELETE while the leader lives, though its graph is synced); after the leader is killed, the
// standby takes over and collects.
func TestLeaderFailover(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	lease := "cascade-failover-" + ns
	le := []string{"--leader-elect=true", "--leader-elect-resource-namespace=" + ns, "--leader-elect-resource-name=" + lease,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	first := suite.StartCascade(t, le...)
	var holder string
	framework.Eventually(t, 30*time.Second, "first replica leads", func() (bool, error) {
		l, err := cs.Kube.CoordinationV1().Leases(ns).Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *l.Spec.HolderIdentity
		return true, nil
	})
	second := suite.StartCascade(t, le...) // ready means its graph synced: a warm standby
	framework.Eventually(t, 10*time.Second, "second replica standing by", func() (bool, error) {
		return strings.Contains(second.Tail(200), "Standing by"), nil
	})
	// The leader's DELETEs from here are this test's: it also collects what earlier tests left.
	const deletes = `cascade_api_requests_total{code="200",verb="DELETE"}`
	base, _ := settled(t, first, deletes).Value(deletes)

	owner := cs.CreateCM(t, ns, "owner-1")
	cs.CreateCMs(t, ns, "dep-1", 20, framework.CMRef(owner))
	cs.DeleteCM(t, ns, "owner-1", metav1.DeletePropagationBackground)
	cs.WaitCMCount(t, ns, "dep-1-", 0, collectTimeout)
	if d := framework.MetricValue(t, first, deletes) - base; d < 20 {
		t.Fatalf("the leader reports %.0f DELETEs for 20 collected objects", d)
	}
	if d := framework.MetricValue(t, second, deletes); d != 0 {
		t.Fatalf("the standby sent %.0f DELETEs while the leader was alive", d)
	}

	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()
	owner = cs.CreateCM(t, ns, "owner-2")
	cs.CreateCMs(t, ns, "dep-2", 20, framework.CMRef(owner))
	cs.DeleteCM(t, ns, "owner-2", metav1.DeletePropagationBackground)
	start := time.Now()
	cs.WaitCMCount(t, ns, "dep-2-", 0, collectTimeout)
	l, err := cs.Kube.CoordinationV1().Leases(ns).Get(context.Background(), lease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == holder {
		t.Fatalf("lease not taken over by the standby: %v %v", l.Spec.HolderIdentity, err)
	}
	t.Logf("standby took over and finished the cascade %s after the owner's delete (lease duration 4s)", time.Since(start).Round(100*time.Millisecond))
}
