package harness

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The in-tree garbage collector's log lines (pkg/controller/garbagecollector/garbagecollector.go,
// Kubernetes v1.36.3): one of the first two, then the third, once the initial sync of every
// resource monitor ended or timed out (after 30 s in kube-controller-manager).
const (
	KCMMonitorsSynced    = "Garbage collector: all resource monitors have synced"
	KCMMonitorsNotSynced = "Garbage collector: not all resource monitors could be synced, proceeding anyways"
	KCMProceeding        = "Proceeding to collect garbage"
)

// KCMOptions configures StartKubeControllerManager.
type KCMOptions struct {
	// Controllers is --controllers. Default: "garbage-collector-controller" only.
	Controllers string
	// QPS and Burst are --kube-api-qps and --kube-api-burst. kube-controller-manager gives the
	// garbage collector's client twice QPS (and the same burst), so QPS 20, Burst 30 (the
	// defaults) is a 40 QPS / burst 30 GC budget. A negative QPS disables client-side limits.
	// Zero values keep kube-controller-manager's defaults.
	QPS   float32
	Burst int
	// ConcurrentGCSyncs is --concurrent-gc-syncs (default 20, the attempt-to-delete and the
	// attempt-to-orphan worker counts).
	ConcurrentGCSyncs int
	// Extra flags are appended.
	Extra []string
	// Tee, if set, also receives the log.
	Tee io.Writer
}

// KubeControllerManager is a running kube-controller-manager against a ControlPlane.
type KubeControllerManager struct {
	*Process
	// URL is its secure port, https://127.0.0.1:port; /metrics, /healthz are readable without
	// credentials (--authorization-always-allow-paths, anonymous authentication).
	URL string
}

// StartKubeControllerManager runs bin/kube-controller-manager against cp with only the
// garbage collector (unless opts say otherwise), no leader election, the admin credentials of
// cp's kubeconfig for every controller, and a secure port on a free loopback port whose
// /metrics needs no credentials. The process is tracked: cp.Stop ends it.
func (cp *ControlPlane) StartKubeControllerManager(name string, opts KCMOptions) (*KubeControllerManager, error) {
	bin := filepath.Join(cp.BinDir, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kube-controller-manager not found in %s: run `make tools` first", cp.BinDir)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	if opts.Controllers == "" {
		opts.Controllers = "garbage-collector-controller"
	}
	if opts.ConcurrentGCSyncs == 0 {
		opts.ConcurrentGCSyncs = 20
	}
	certDir := filepath.Join(cp.Dir, name+"-certs")
	args := []string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--controllers=" + opts.Controllers,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--concurrent-gc-syncs=" + strconv.Itoa(opts.ConcurrentGCSyncs),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		// No --authentication-kubeconfig: every request is anonymous; these paths need no
		// authorization, the rest is forbidden.
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--v=1",
	}
	if opts.QPS != 0 {
		args = append(args, "--kube-api-qps="+strconv.FormatFloat(float64(opts.QPS), 'f', -1, 32))
	}
	if opts.Burst != 0 {
		args = append(args, "--kube-api-burst="+strconv.Itoa(opts.Burst))
	}
	args = append(args, opts.Extra...)
	p, err := StartProcess(cp.Dir, name, bin, args, ProcessOptions{Tee: opts.Tee})
	if err != nil {
		return nil, err
	}
	cp.Track(p)
	return &KubeControllerManager{Process: p, URL: "https://127.0.0.1:" + strconv.Itoa(port)}, nil
}

// kcmClient reads kube-controller-manager's own endpoints. Its serving certificate is
// self-signed at start into --cert-dir, on loopback, and nothing secret is read through it.
var kcmClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	DisableCompression: true,
	TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
}}

// Metrics returns the text of kube-controller-manager's /metrics.
func (k *KubeControllerManager) Metrics() (string, error) {
	resp, err := kcmClient.Get(k.URL + "/metrics") //nolint:noctx
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s/metrics: %s: %s", k.URL, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// WaitMonitorsSynced waits until the in-tree garbage collector logged that all its resource
// monitors synced (their informers hold the initial lists; the graph may still be applying
// them). It fails if the initial sync timed out ("proceeding anyways"), if the process exits,
// or when ctx ends.
func (k *KubeControllerManager) WaitMonitorsSynced(ctx context.Context) error {
	for !containsLine(k.LogPath, KCMMonitorsSynced) {
		if containsLine(k.LogPath, KCMMonitorsNotSynced) {
			return fmt.Errorf("kube-controller-manager: %q\n%s", KCMMonitorsNotSynced, k.Tail(30))
		}
		if exited, err := k.Exited(); exited {
			return fmt.Errorf("kube-controller-manager exited before its monitors synced: %v\n%s", err, k.Tail(30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager's monitors not synced: %w\n%s", ctx.Err(), k.Tail(30))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// ResidentBytes returns the resident set size of process pid (VmRSS in /proc/pid/status).
func ResidentBytes(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

// PeakResidentBytes returns the largest resident set size process pid has had so far (VmHWM in
// /proc/pid/status, the kernel's high-water mark: no sampling can miss the peak).
func PeakResidentBytes(pid int) (int64, error) { return statusBytes(pid, "VmHWM") }

// statusBytes reads a "<field>: N kB" line of /proc/pid/status.
func statusBytes(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest) // "12345", "kB"
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		return kb * 1024, err
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no " + field + " in /proc/" + strconv.Itoa(pid) + "/status")
}
