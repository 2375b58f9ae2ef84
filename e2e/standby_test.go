//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// writes sums the requests c sent that change something (POST, PUT, PATCH, DELETE), by its own
// cascade_api_requests_total.
func writes(t *testing.T, c *harness.Cascade) float64 {
	t.Helper()
	var sum float64
	for _, s := range framework.Scrape(t, c).Samples("cascade_api_requests_total") {
		switch s.Labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE":
			sum += s.Value
		}
	}
	return sum
}

// TestStandbyStaysSilent (issue 10.5): a replica that does not hold the Lease sends no write of
// any kind, not even the OwnerRefInvalidNamespace Event its warm graph finds, while the leader
// collects, patches and emits. Before the fix the standby POSTed the Event too.
func TestStandbyStaysSilent(t *testing.T) {
	cs := suite.Clients(t)
	ns, other := cs.NewNamespace(t), cs.NewNamespace(t)
	ctx := context.Background()
	lease := "cascade-silent-" + ns
	le := []string{"--leader-elect=true", "--leader-elect-resource-namespace=" + ns, "--leader-elect-resource-name=" + lease,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	leader := suite.StartCascade(t, le...)
	framework.Eventually(t, 30*time.Second, "first replica leads", func() (bool, error) {
		l, err := cs.Kube.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil, nil
	})
	standby := suite.StartCascade(t, le...)
	framework.Eventually(t, 10*time.Second, "second replica standing by", func() (bool, error) {
		return strings.Contains(standby.Tail(200), "Standing by"), nil
	})
	// Baselines once both have worked through what earlier tests left: the leader collects it,
	// and both graphs count the references across namespaces it holds.
	const invalidRefs = `cascade_invalid_namespace_refs_total`
	settled(t, leader)
	leaderBase := writes(t, leader)
	standbyRefs, _ := settled(t, standby).Value(invalidRefs)
	base := writes(t, standby)

	// A reference to an owner in another namespace: both graphs see it; only the leader may
	// report it (and collect the dependent, whose owner counts as absent in its namespace).
	owner := cs.CreateCM(t, other, "elsewhere")
	cs.CreateCM(t, ns, "misplaced", framework.CMRef(owner))
	// A plain background cascade and an orphan deletion: DELETEs and PATCHes for the leader.
	bg := cs.CreateCM(t, ns, "bg-owner")
	cs.CreateCMs(t, ns, "bg-dep", 5, framework.CMRef(bg))
	orphan := cs.CreateCM(t, ns, "orphan-owner")
	cs.CreateCMs(t, ns, "orphaned", 3, framework.CMRef(orphan))
	cs.DeleteCM(t, ns, "bg-owner", metav1.DeletePropagationBackground)
	cs.DeleteCM(t, ns, "orphan-owner", metav1.DeletePropagationOrphan)

	cs.WaitCMGone(t, ns, "misplaced", collectTimeout)
	cs.WaitCMCount(t, ns, "bg-dep-", 0, collectTimeout)
	cs.WaitCMGone(t, ns, "orphan-owner", collectTimeout)
	framework.Eventually(t, collectTimeout, "the leader's OwnerRefInvalidNamespace Event", func() (bool, error) {
		evs, err := cs.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=OwnerRefInvalidNamespace"})
		return err == nil && len(evs.Items) > 0 && evs.Items[0].Type == corev1.EventTypeWarning, err
	})
	// The standby's graph has seen all of it: its own canary shows it processed past the end.
	framework.WaitForMetric(t, standby, invalidRefs, standbyRefs+1, collectTimeout)
	canary(t, cs, ns)

	if w := writes(t, leader) - leaderBase; w < 5 {
		t.Errorf("the leader reports %.0f writes during the test; it collected 6 objects, orphaned 3 and emitted an Event", w)
	}
	if w := writes(t, standby) - base; w != 0 {
		t.Errorf("the standby sent %.0f writes (POST, PUT, PATCH, DELETE) while it did not lead, want 0", w)
	}
}
