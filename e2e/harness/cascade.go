package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Cascade is a running cascade process against a ControlPlane.
type Cascade struct {
	*Process
	MetricsURL string // http://127.0.0.1:port/metrics
	HealthURL  string // http://127.0.0.1:port (append /healthz or /readyz)
}

// BuildCascade returns the cascade binary to run: $CASCADE_BINARY if set (the Makefile builds
// bin/cascade), else a fresh `go build` of ./cmd/cascade into dir.
func BuildCascade(dir string) (string, error) {
	if b := os.Getenv("CASCADE_BINARY"); b != "" {
		return filepath.Abs(b)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "cascade")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/cascade")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/cascade: %v\n%s", err, b)
	}
	return out, nil
}

// StartCascade runs bin against cp on free metrics and health ports, with extra flags appended.
// The process is tracked: cp.Stop ends it. name distinguishes restarts in the log files.
func (cp *ControlPlane) StartCascade(name, bin string, tee io.Writer, extra ...string) (*Cascade, error) {
	return cp.StartCascadeWith(name, bin, ProcessOptions{Tee: tee}, extra...)
}

// StartCascadeWith is StartCascade with the process's options (its environment: client-go's
// KUBE_FEATURE_* gates, GOGC, GOMEMLIMIT).
func (cp *ControlPlane) StartCascadeWith(name, bin string, opt ProcessOptions, extra ...string) (*Cascade, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
	}, extra...)
	p, err := StartProcess(cp.Dir, name, bin, args, opt)
	if err != nil {
		return nil, err
	}
	cp.Track(p)
	return &Cascade{
		Process:    p,
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics",
		HealthURL:  "http://127.0.0.1:" + strconv.Itoa(ports[1]),
	}, nil
}

// WaitReady polls /readyz every 50 ms (fine enough to time start-up) until it answers 200, the
// process exits, or ctx ends.
func (c *Cascade) WaitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if exited, err := c.Exited(); exited {
			return fmt.Errorf("cascade exited before becoming ready: %v\n%s", err, c.Tail(30))
		}
		if resp, err := client.Get(c.HealthURL + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cascade not ready: %w\n%s", ctx.Err(), c.Tail(30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// metricsClient asks for uncompressed metrics: tests scrape often, and gzip would cost
// cascade CPU that benchmarks would count against it.
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}

// Metrics returns the text of cascade's /metrics.
func (c *Cascade) Metrics() (string, error) {
	resp, err := metricsClient.Get(c.MetricsURL) //nolint:noctx
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
