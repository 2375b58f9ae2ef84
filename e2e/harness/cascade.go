package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cascade is a running cascade process against a ControlPlane.
type Cascade struct {
	*Process
	MetricsURL string // http://127.0.0.1:port/metrics; https:// when served securely
	HealthURL  string // http://127.0.0.1:port (append /healthz or /readyz)
	// Token is the bearer token every scrape sends (secure serving); empty: none.
	Token string
	// TLS is the scrapes' TLS configuration (secure serving); nil: plain HTTP.
	TLS *tls.Config

	clientOnce sync.Once
	client     *http.Client
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
//
// The metrics address is served as `make run` serves it, --metrics-secure=false: plain HTTP,
// no authentication, so that tests scrape /metrics and /debug with a plain GET (the e2e tests
// of secure serving use StartSecureCascade).
func (cp *ControlPlane) StartCascade(name, bin string, tee io.Writer, extra ...string) (*Cascade, error) {
	return cp.StartCascadeWith(name, bin, ProcessOptions{Tee: tee}, extra...)
}

// StartCascadeWith is StartCascade with the process's options (its environment: client-go's
// KUBE_FEATURE_* gates, GOGC, GOMEMLIMIT).
func (cp *ControlPlane) StartCascadeWith(name, bin string, opt ProcessOptions, extra ...string) (*Cascade, error) {
	return cp.startCascade(name, bin, opt, false, extra)
}

// StartSecureCascade is StartCascadeWith with cascade's default serving: the metrics address
// serves HTTPS (its self-signed certificate unless extra names files) and reviews every
// request's bearer token with the API server. The Cascade scrapes with the admin's token,
// which may get every path, and trusts any certificate: set TLS and Token to scrape otherwise.
func (cp *ControlPlane) StartSecureCascade(name, bin string, opt ProcessOptions, extra ...string) (*Cascade, error) {
	return cp.startCascade(name, bin, opt, true, extra)
}

func (cp *ControlPlane) startCascade(name, bin string, opt ProcessOptions, secure bool, extra []string) (*Cascade, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
	}
	if !secure {
		args = append(args, "--metrics-secure=false")
	}
	p, err := StartProcess(cp.Dir, name, bin, append(args, extra...), opt)
	if err != nil {
		return nil, err
	}
	cp.Track(p)
	c := &Cascade{
		Process:    p,
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics",
		HealthURL:  "http://127.0.0.1:" + strconv.Itoa(ports[1]),
	}
	if secure {
		c.MetricsURL = "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics"
		c.Token = cp.Token
		c.TLS = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // cascade's self-signed certificate; tests that check it set TLS
	}
	return c, nil
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

// Get sends a GET of path (such as /metrics or /debug/graph?uid=U) to cascade's metrics
// address, with c.Token and c.TLS, and returns the response.
func (c *Cascade) Get(ctx context.Context, path string) (*http.Response, error) {
	c.clientOnce.Do(func() {
		c.client = metricsClient
		if c.TLS != nil {
			c.client = &http.Client{Timeout: metricsClient.Timeout, Transport: &http.Transport{DisableCompression: true, TLSClientConfig: c.TLS}}
		}
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.MetricsURL, "/metrics")+path, nil)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return c.client.Do(req)
}

// Metrics returns the text of cascade's /metrics.
func (c *Cascade) Metrics() (string, error) {
	resp, err := c.Get(context.Background(), "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", c.MetricsURL, resp.Status, b)
	}
	return string(b), err
}
