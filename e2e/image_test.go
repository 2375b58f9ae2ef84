//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// podmanGlobal and podmanUlimits are the Makefile's PODMAN_FLAGS and PODMAN_ULIMITS: Debian's
// podman as root with runc and cgroupfs (no systemd here), and ulimits below the host's
// (podman's default, the host maximum, is refused on these machines).
var (
	podmanGlobal  = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "file"}
	podmanUlimits = []string{"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}
)

// saMountPath is where the kubelet mounts a pod's service-account token, CA and namespace, and
// where client-go's in-cluster configuration reads them.
const saMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

func podman(args ...string) (string, error) {
	out, err := exec.Command("podman", append(slices.Clone(podmanGlobal), args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func runMake(root string, args ...string) (string, error) {
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", root}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("make %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// requirePodman installs podman and runc where they are missing (`make podman`: Debian's
// packages) and checks that podman answers. Where no container runtime can be had the test is
// skipped, saying why; never in CI (CI=true), where the image must be tested: there it fails.
func requirePodman(t *testing.T, root string) {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true, and no usable container runtime for the image test: %s", msg)
		}
		t.Skipf("SKIP: no usable container runtime, so the image is not tested (`make podman` installs Debian's podman and runc as root): %s", msg)
	}
	start := time.Now()
	out, err := runMake(root, "podman")
	if err != nil {
		unavailable("%v", err)
	}
	if strings.Contains(out, "installed") {
		t.Logf("make podman: %s (%s)", strings.TrimSpace(out), time.Since(start).Round(time.Second))
	}
	if _, err := podman("info", "--format", "{{.Host.OCIRuntime.Name}}"); err != nil {
		unavailable("%v", err)
	}
}

// renderedDeployment returns deploy/base's Deployment as kustomize renders it.
func renderedDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	out, err := adminKubectl("kustomize", deployBaseDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatalf("kubectl kustomize deploy/base: %v", err)
		}
		if d.Kind == "Deployment" && d.Name == "cascade" {
			return &d
		}
	}
	t.Fatal("deploy/base renders no Deployment cascade")
	return nil
}

// replica is one container running the image as one of the Deployment's pods would.
type replica struct {
	*harness.Cascade
	name string
}

// TestImage builds the image with `make image` and runs it with podman against the local
// control plane as deploy/base's Deployment runs it in a cluster: in-cluster configuration
// only (KUBERNETES_SERVICE_HOST/PORT, and the token of deploy/base's ServiceAccount, the CA and
// the namespace mounted where the kubelet mounts them), the Deployment's arguments, read-only
// root filesystem, the image's non-root user, no capabilities, no privilege escalation, the
// runtime's default seccomp profile, its memory limit, two replicas with leader election. The
// leader collects; after its container is killed (podman kill), the other takes over and
// collects again. The containers share the host's network (--network host), where
// kube-apiserver listens on 127.0.0.1, which its serving certificate names.
func TestImage(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	requirePodman(t, root)
	cs := suite.Clients(t)
	ctx := context.Background()

	// The image, as `make image` builds it, under a name of this run's own, so that the tags
	// of the machine's own builds and of other runs stay as they are: its one tag, VERSION, is
	// removed at the end, and with it the image. (The Deployment names the Makefile's IMAGE at
	// the next release's version: deploy's unit test checks it.)
	d := renderedDeployment(t)
	c := d.Spec.Template.Spec.Containers[0]
	run := fmt.Sprintf("cascade-e2e-%d", time.Now().UnixNano())
	repo := "localhost/" + run
	version := "e2e-" + run[len("cascade-e2e-"):]
	image := repo + ":" + version
	start := time.Now()
	if _, err := runMake(root, "image", "IMAGE="+repo, "VERSION="+version); err != nil {
		t.Fatal(err)
	}
	t.Logf("make image: %s", time.Since(start).Round(100*time.Millisecond))
	t.Cleanup(func() { _, _ = podman("rmi", "--force", image) })

	// The image is the binary alone, running as a numeric non-root user.
	info, err := podman("image", "inspect", "--format", "{{.Config.User}}|{{len .RootFS.Layers}}|{{.Size}}", image)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(info, "|")
	// The pod names no UID (runAsNonRoot verifies the image's numeric USER; OpenShift assigns
	// its own): the container runs as the Dockerfile's USER.
	if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser != nil || sc.RunAsGroup != nil {
		t.Fatalf("deploy/base's pod securityContext %+v: want runAsNonRoot without a fixed runAsUser or runAsGroup", sc)
	}
	uid := makefileMatch(t, filepath.Join(root, "Dockerfile"), `(?m)^USER (\d+):\d+$`)
	if len(fields) != 3 || fields[0] != uid+":"+uid || fields[1] != "1" {
		t.Fatalf("image user|layers|size = %q, want %s:%s and one layer (the binary)", info, uid, uid)
	}
	size, _ := strconv.ParseInt(fields[2], 10, 64)
	t.Logf("image %s: %.1f MiB, user %s", image, float64(size)/(1<<20), fields[0])

	// --version names the stamped version and commit, in one line.
	head := gitOutput(t, root, "rev-parse", "HEAD")
	out, err := podman(append(append([]string{"run", "--rm", "--pull=never"}, podmanUlimits...), image, "--version")...)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("cascade %s (commit %s, ", version, strings.TrimSpace(head)); !strings.HasPrefix(out, want) || strings.Contains(out, "\n") {
		t.Fatalf("--version printed %q, want one line starting %q", out, want)
	}

	// What the kubelet mounts for the pod: the ServiceAccount's token, the cluster's CA and the
	// pod's namespace, readable by the container's user (defaultMode 0644).
	deployBase(t)
	saDir := filepath.Join(t.TempDir(), "serviceaccount")
	ca, err := os.ReadFile(suite.CP.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(saDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"token": serviceAccountToken(t, cs), "ca.crt": string(ca), "namespace": d.Namespace,
	} {
		if err := os.WriteFile(filepath.Join(saDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(saDir, 0o755); err != nil { // TempDir's parents are 0700; the mount is not
		t.Fatal(err)
	}
	apiserver, err := url.Parse(suite.CP.URL)
	if err != nil {
		t.Fatal(err)
	}

	const lease = "cascade" // the Lease deploy/base's Role lets cascade update
	allPorts, err := harness.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	startReplica := func(i int) replica {
		t.Helper()
		name := fmt.Sprintf("%s-%d", run, i)
		ports := allPorts[2*i : 2*i+2]
		args := []string{"run", "--rm", "--pull=never", "--name", name, "--hostname", name,
			"--network", "host",
			"--read-only", "--read-only-tmpfs=false", // readOnlyRootFilesystem: no tmpfs either
			"--cap-drop", "all", // capabilities: drop ALL
			"--security-opt", "no-new-privileges", // allowPrivilegeEscalation: false
			// seccompProfile RuntimeDefault is podman's default; the user is the image's.
			"--memory", strconv.FormatInt(c.Resources.Limits.Memory().Value(), 10),
			"--timeout", "900", // a backstop should this test die without its cleanup
			"--env", "KUBERNETES_SERVICE_HOST=" + apiserver.Hostname(),
			"--env", "KUBERNETES_SERVICE_PORT=" + apiserver.Port(),
			"--volume", saDir + ":" + saMountPath + ":ro",
		}
		args = append(args, podmanUlimits...)
		args = append(args, image)
		args = append(args, c.Args...)
		// The Deployment's ports are the pod's own; here the replicas share the host's network.
		// The Lease's namespace is not given: cascade reads it from the mounted namespace file.
		args = append(args,
			"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]),
			"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]),
			"--leader-elect-resource-name="+lease,
			"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms")
		t.Cleanup(func() { _, _ = podman("rm", "--force", "--time", "0", "--ignore", name) }) // after the graceful stop below
		p, err := harness.StartProcess(suite.CP.Dir, name, "podman", append(slices.Clone(podmanGlobal), args...), harness.ProcessOptions{})
		if err != nil {
			t.Fatal(err)
		}
		suite.CP.Track(p)
		framework.StopAtCleanup(t, p) // SIGTERM to podman, which passes it to the container
		return replica{
			// The Deployment's secure serving: HTTPS with a self-signed certificate, each scrape
			// reviewed with the API server by the replica's ServiceAccount (deploy/base RBAC); the
			// admin may get /metrics.
			Cascade: &harness.Cascade{
				Process:    p,
				MetricsURL: "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics",
				HealthURL:  "http://127.0.0.1:" + strconv.Itoa(ports[1]),
				Token:      suite.CP.Token,
				TLS:        &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the replica's self-signed certificate
			},
			name: name,
		}
	}
	replicas := []replica{startReplica(0), startReplica(1)}
	started := time.Now()
	for _, r := range replicas {
		readyCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
		err := r.WaitReady(readyCtx) // the readiness probe: /readyz on the health port
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := http.Get(r.HealthURL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK { //nolint:noctx
			t.Fatalf("liveness probe /healthz of %s: %v %v", r.name, resp, err)
		} else {
			_ = resp.Body.Close()
		}
	}
	t.Logf("both replicas ready %s after start", time.Since(started).Round(100*time.Millisecond))

	// The containers run as the pod's securityContext asks (read from the host's /proc).
	for _, r := range replicas {
		ro, err := podman("inspect", "--format", "{{.HostConfig.ReadonlyRootfs}} {{.State.Pid}}", r.name)
		if err != nil {
			t.Fatal(err)
		}
		roFS, pid, _ := strings.Cut(ro, " ")
		if roFS != "true" {
			t.Errorf("%s: root filesystem not read-only", r.name)
		}
		status, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Uid:\t" + strings.Repeat(uid+"\t", 3) + uid, "Gid:\t" + strings.Repeat(uid+"\t", 3) + uid,
			"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2",
		} {
			if !strings.Contains(string(status), want+"\n") {
				t.Errorf("%s (pid %s): /proc status lacks %q", r.name, pid, want)
			}
		}
	}

	// One leads, in the namespace the mounted file names; the other stands by.
	holder := func() string {
		l, err := cs.Kube.CoordinationV1().Leases(d.Namespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var leader, standby replica
	framework.Eventually(t, 60*time.Second, "a replica holds the Lease "+d.Namespace+"/"+lease, func() (bool, error) {
		h := holder()
		for i, r := range replicas {
			if strings.HasPrefix(h, r.name+"_") {
				leader, standby = r, replicas[1-i]
				return true, nil
			}
		}
		return false, fmt.Errorf("holder %q", h)
	})
	framework.Eventually(t, 30*time.Second, standby.name+" standing by", func() (bool, error) {
		return strings.Contains(standby.Tail(200), "Standing by"), nil
	})

	// The leader collects a dependent of an owner deleted in the background. Its DELETEs are
	// counted from once it has collected what earlier tests left.
	const deletes = `cascade_api_requests_total{code="200",verb="DELETE"}`
	base, _ := settled(t, leader, deletes).Value(deletes)
	ns := cs.NewNamespace(t)
	collect := func(round string) {
		t.Helper()
		owner := cs.CreateCM(t, ns, "owner-"+round)
		cs.CreateCMs(t, ns, "dep-"+round, 10, framework.CMRef(owner))
		cs.DeleteCM(t, ns, owner.Name, metav1.DeletePropagationBackground)
		cs.WaitCMCount(t, ns, "dep-"+round+"-", 0, collectTimeout)
	}
	collect("1")
	if n := framework.MetricValue(t, leader, deletes) - base; n < 10 {
		t.Fatalf("the leader %s reports %.0f DELETEs for 10 collected objects", leader.name, n)
	}
	if n := framework.MetricValue(t, standby, deletes); n != 0 {
		t.Fatalf("the standby %s sent %.0f DELETEs while the leader was alive", standby.name, n)
	}

	// The leader's container is killed; the standby takes over and collects.
	if _, err := podman("kill", leader.name); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leader.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("podman run of %s still running 30s after podman kill", leader.name)
	}
	killed := time.Now()
	collect("2")
	if h := holder(); !strings.HasPrefix(h, standby.name+"_") {
		t.Fatalf("Lease held by %q after the leader was killed, want %s", h, standby.name)
	}
	if n := framework.MetricValue(t, standby, deletes); n < 10 {
		t.Fatalf("the new leader %s reports %.0f DELETEs for 10 collected objects", standby.name, n)
	}
	t.Logf("%s took over and collected %s after %s was killed (lease duration 4s)", standby.name, time.Since(killed).Round(100*time.Millisecond), leader.name)
}
