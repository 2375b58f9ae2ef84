//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestFlowSchema (issue 25.5): with deploy/base applied, the requests cascade sends as its
// ServiceAccount are classified by the base's FlowSchema cascade at the priority level
// workload-high (kube-controller-manager's garbage collector's), as kube-apiserver's API Priority
// and Fairness metrics count them, not at workload-low where service-accounts would put them.
func TestFlowSchema(t *testing.T) {
	cs := suite.Clients(t)
	deployBase(t)
	dispatched := func() (cascade, other float64) {
		raw, err := cs.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			t.Fatalf("scrape kube-apiserver's metrics: %v", err)
		}
		m, err := framework.ParseMetrics(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Samples("apiserver_flowcontrol_dispatched_requests_total") {
			if s.Labels["flow_schema"] == "cascade" {
				if s.Labels["priority_level"] == "workload-high" {
					cascade += s.Value
				} else {
					other += s.Value
				}
			}
		}
		return cascade, other
	}
	// kube-apiserver counts since it started: this test's cascade's requests are the counts'
	// rise from here.
	before, otherBefore := dispatched()

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := suite.CP.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", serviceAccountToken(t, cs)); err != nil {
		t.Fatal(err)
	}
	suite.StartCascade(t, "--kubeconfig="+kc, "--dry-run", "--orphan-record-configmap=")
	framework.Eventually(t, 30*time.Second, "cascade's requests dispatched at workload-high by the FlowSchema cascade", func() (bool, error) {
		high, other := dispatched()
		if other > otherBefore {
			t.Fatalf("the FlowSchema cascade dispatched %v requests at another priority level", other-otherBefore)
		}
		return high > before, nil
	})
}
