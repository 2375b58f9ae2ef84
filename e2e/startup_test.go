//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestStartsAndWatchesNewCRD: cascade becomes ready against the control plane, watches built-in
// deletable resources (but not the ignored events), and a CRD created after it started is
// among the watched resources within one discovery period.
func TestStartsAndWatchesNewCRD(t *testing.T) {
	const period = 2 * time.Second
	c := suite.StartCascade(t, "--discovery-period="+period.String())
	cs := suite.Clients(t)

	m := framework.Scrape(t, c)
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Version: "v1", Resource: "namespaces"},
	} {
		if !watched(m, gvr) {
			t.Errorf("not watched at start: %v", gvr)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "events"},
		{Group: "events.k8s.io", Version: "v1", Resource: "events"},
	} {
		if watched(m, gvr) {
			t.Errorf("ignored resource is watched: %v", gvr)
		}
	}
	_, goroutines := m.Value("go_goroutines")
	_, rss := m.Value("process_resident_memory_bytes")
	if !goroutines || !rss {
		t.Errorf("/metrics lacks the Go or process collectors")
	}

	gvr := createCRD(t, cs, "startup.e2e.cascade.dev", "Widget", "Namespaced")
	created := time.Now()
	// One discovery period, plus the time the apiserver takes to publish the new group in
	// discovery (its discovery cache refreshes asynchronously) and a scrape.
	framework.Eventually(t, 2*period+5*time.Second, "new CRD watched", func() (bool, error) {
		m, err := framework.ReadMetrics(c)
		return err == nil && watched(m, gvr), err
	})
	t.Logf("CRD watched %s after creation (discovery period %s)", time.Since(created).Round(10*time.Millisecond), period)

	deleteCRD(t, cs, gvr.Resource+"."+gvr.Group)
	framework.Eventually(t, 2*period+10*time.Second, "deleted CRD no longer watched", func() (bool, error) {
		m, err := framework.ReadMetrics(c)
		return err == nil && !watched(m, gvr), err
	})
}

// TestBadInput: each mistake gives one line naming what to fix, and a non-zero exit, before
// anything is started.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("this is: [not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreachable := filepath.Join(dir, "unreachable")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want []string // substrings of the single stderr line
	}{
		{"unreachable apiserver", []string{"--kubeconfig=" + unreachable, "--startup-timeout=2s"}, []string{"cannot reach the API server at https://127.0.0.1:1", "--startup-timeout=2s", "check --kubeconfig"}},
		{"kubeconfig missing", []string{"--kubeconfig=" + filepath.Join(dir, "nope")}, []string{"invalid --kubeconfig=", "no such file"}},
		{"kubeconfig garbage", []string{"--kubeconfig=" + garbage}, []string{"cannot load --kubeconfig=" + garbage}},
		{"no kubeconfig outside a cluster", nil, []string{"no --kubeconfig given", "pass --kubeconfig=PATH"}},
		{"workers", []string{"--kubeconfig=" + suite.CP.KubeconfigPath, "--workers=0"}, []string{"invalid --workers=0: must be between 1 and 1000"}},
		{"qps", []string{"--kubeconfig=" + suite.CP.KubeconfigPath, "--kube-api-qps=-1"}, []string{"invalid --kube-api-qps=-1"}},
		{"metrics address", []string{"--kubeconfig=" + suite.CP.KubeconfigPath, "--metrics-bind-address=nonsense"}, []string{"invalid --metrics-bind-address=nonsense", "host:port"}},
		{"discovery period", []string{"--kubeconfig=" + suite.CP.KubeconfigPath, "--discovery-period=1ms"}, []string{"invalid --discovery-period=1ms", "at least 1s"}},
		{"unknown flag", []string{"--no-such-flag"}, []string{"unknown flag: --no-such-flag"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, suite.CascadeBin, tc.args...)
			cmd.Env = filterEnv(os.Environ(), "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil || cmd.ProcessState.ExitCode() == 0 {
				t.Fatalf("exit code 0, want non-zero; stderr: %s", stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "cascade: ") {
				t.Errorf("last stderr line %q does not start with \"cascade: \"", last)
			}
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("error line %q lacks %q", last, w)
				}
			}
		})
	}
}

func filterEnv(env []string, drop ...string) []string {
	out := env[:0:0]
outer:
	for _, kv := range env {
		for _, d := range drop {
			if strings.HasPrefix(kv, d+"=") {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}
