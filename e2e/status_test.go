//go:build e2e

package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// statusDoc is what `cascade status -o json` prints (docs/cli.md), the fields this test reads.
type statusDoc struct {
	Lease struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Found     bool   `json:"found"`
		Holder    string `json:"holder"`
		Expired   bool   `json:"expired"`
	} `json:"lease"`
	Leader *struct {
		Pod       string `json:"pod"`
		Published bool   `json:"published"`
		Mode      string `json:"mode"`
		Policy    struct {
			Generation int    `json:"generation"`
			Source     string `json:"source"`
		} `json:"policy"`
		Synced            bool              `json:"synced"`
		UnsyncedResources []string          `json:"unsyncedResources"`
		FeatureLevels     map[string]string `json:"featureLevels"`
	} `json:"leader"`
}

// cascadeStatus runs `cascade status ARGS` with the suite's kubeconfig and returns its output.
func cascadeStatus(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(suite.CascadeBin, append([]string{"status", "--kubeconfig", suite.CP.KubeconfigPath}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("cascade status %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestStatus (issue 31.6): the leader publishes its status on its Lease and `cascade status`
// reads it from the cluster, no port-forward: the holder, the mode, the policy in force (its
// generation and ConfigMap), the sync state and the feature levels; once the leader stops, the
// Lease is released and status says nobody leads; a namespace without cascade's Lease says
// "no Lease".
func TestStatus(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	lease := "cascade-status"
	writePolicy(t, cs, ns, policyDoc("rules:\n- resource: configmaps\n  collect: Never\n"))
	c := startWithPolicy(t, ns, 1, "--leader-elect=true", "--leader-elect-resource-namespace="+ns, "--leader-elect-resource-name="+lease,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms")

	var s statusDoc
	framework.Eventually(t, 30*time.Second, "cascade status shows the leader synced", func() (bool, error) {
		s = statusDoc{}
		if err := json.Unmarshal([]byte(cascadeStatus(t, "-n", ns, "--lease", lease, "-o", "json")), &s); err != nil {
			return false, err
		}
		return s.Leader != nil && s.Leader.Published && s.Leader.Synced, nil
	})
	l := s.Leader
	if !s.Lease.Found || s.Lease.Namespace != ns || s.Lease.Expired || !strings.HasPrefix(s.Lease.Holder, l.Pod+"_") || l.Mode != "collector" ||
		l.Policy.Generation != 1 || !strings.HasPrefix(l.Policy.Source, "ConfigMap "+ns+"/"+policyName+", resourceVersion ") ||
		l.FeatureLevels["admission_policy"] == "" || l.FeatureLevels["list"] == "" {
		t.Errorf("status: %+v, leader %+v", s.Lease, *l)
	}
	text := cascadeStatus(t, "-n", ns, "--lease", lease)
	for _, want := range []string{"Leader:    " + l.Pod + " ", "Mode:      collector\n", "Policy:    generation 1, ConfigMap " + ns + "/" + policyName, "Sync:      synced", "Features:  admission_policy="} {
		if !strings.Contains(text, want) {
			t.Errorf("status text lacks %q:\n%s", want, text)
		}
	}

	// Stopped: the Lease released, the status with it.
	if err := c.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if text := cascadeStatus(t, "--lease", ns+"/"+lease); !strings.Contains(text, "held by nobody (released") {
		t.Errorf("after the leader stopped:\n%s", text)
	}
	if text := cascadeStatus(t, "-n", ns, "--lease", "no-such-lease"); !strings.Contains(text, ns+"/no-such-lease: not found (no Lease)") {
		t.Errorf("without a Lease:\n%s", text)
	}
}
