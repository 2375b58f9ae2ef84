package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cascade-gc/cascade/e2e/harness"
)

// RequirePrometheus returns the prometheus binary, installing Debian's prometheus package
// first where it is missing (`make prometheus`, as root or through sudo). Where it cannot be
// had the test is skipped, saying why and how to install it; never in CI (CI=true), where
// monitoring must be tested: there it fails.
func RequirePrometheus(t testing.TB) string {
	t.Helper()
	if bin, err := exec.LookPath("prometheus"); err == nil {
		return bin
	}
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true, and prometheus cannot be installed for the monitoring test: %s", msg)
		}
		t.Skipf("SKIP: prometheus is not installed and cannot be installed here, so the dashboard and alerts are not evaluated (`make prometheus` installs Debian's prometheus package as root): %s", msg)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		unavailable("%v", err)
	}
	start := time.Now()
	out, err := exec.Command("make", "--no-print-directory", "-C", root, "prometheus").CombinedOutput()
	if err != nil {
		unavailable("make prometheus: %v\n%s", err, out)
	}
	t.Logf("make prometheus: %s (%s)", strings.TrimSpace(string(out)), time.Since(start).Round(time.Second))
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		unavailable("make prometheus succeeded, but: %v", err)
	}
	return bin
}

// StartPrometheus runs Prometheus (RequirePrometheus) for the test with opts, waits until it is
// ready, and stops it at cleanup, logging the end of its log when the test failed.
func (s *Suite) StartPrometheus(t testing.TB, opts harness.PrometheusOptions) *harness.Prometheus {
	t.Helper()
	opts.Bin = RequirePrometheus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := "prometheus-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	p, err := s.CP.StartPrometheus(ctx, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	StopAtCleanup(t, p.Process)
	return p
}
