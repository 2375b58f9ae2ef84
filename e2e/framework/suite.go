package framework

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cascade-gc/cascade/e2e/harness"
)

var keep = flag.Bool("keep", false, "keep the control plane's directory (logs, kubeconfig) after the run")

// Suite is what a test package runs against, set up by Main: one control plane shared by all
// its tests, and the cascade binary under test.
type Suite struct {
	CP         *harness.ControlPlane
	CascadeBin string
	// KubeVersion is the gitVersion the control plane's kube-apiserver serves (v1.36.3) and
	// KubeMinor its minor version (36): what a test that expects something different per
	// version reads (see CASCADE_KUBE_VERSION in versions.go).
	KubeVersion string
	KubeMinor   int
}

// Main is a test package's TestMain body: it starts the control plane, finds the cascade binary
// (harness.BuildCascade: $CASCADE_BINARY or a fresh build), fills s, runs the package's tests
// and benchmarks, and stops the control plane however the run ends (normal exit, failure,
// panic, Ctrl-C), printing the last lines of every log when it failed. It returns the exit
// code:
//
//	var suite framework.Suite
//
//	func TestMain(m *testing.M) { os.Exit(framework.Main(m, &suite)) }
func Main(m *testing.M, s *Suite) (code int) {
	return MainWith(m, s, func() harness.Options { return harness.Options{} })
}

// MainWith is Main with the control plane's options, made after the flags are parsed (-keep is
// added to them): the scale benchmark keeps its loaded etcd in a directory of its own.
func MainWith(m *testing.M, s *Suite, options func() harness.Options) (code int) {
	flag.Parse()
	opts := options()
	opts.KeepDir = opts.KeepDir || *keep
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+opts.ReadyTimeout)
	defer cancel()
	// CASCADE_APISERVER_ARGS: kube-apiserver flags for the whole suite, separated by spaces
	// (make test-versions turns MutatingAdmissionPolicy v1beta1 on for one version with it).
	if extra := strings.Fields(os.Getenv("CASCADE_APISERVER_ARGS")); len(extra) > 0 {
		opts.ExtraAPIServerArgs = append(opts.ExtraAPIServerArgs, extra...)
		fmt.Printf("e2e: kube-apiserver flags from CASCADE_APISERVER_ARGS: %s\n", strings.Join(extra, " "))
	}
	cp, err := harness.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: start control plane: %v\n", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		got := <-sig
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping the control plane\n", got)
		_ = cp.Stop()
		os.Exit(2)
	}()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "e2e: panic: %v\n%s", r, cp.LogTails(40))
			code = 2
		}
		if code != 0 {
			fmt.Fprintf(os.Stderr, "e2e: failed; last log lines:\n%s", cp.LogTails(40))
		}
		_ = cp.Stop()
	}()
	fmt.Printf("e2e: control plane at %s (dir %s)\n", cp.URL, cp.Dir)
	versions, line, err := checkVersions(ctx, cp)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	fmt.Printf("e2e: %s\n", line)

	binDir, err := os.MkdirTemp("", "cascade-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(binDir) }()
	bin, err := harness.BuildCascade(binDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	*s = Suite{CP: cp, CascadeBin: bin, KubeVersion: versions.APIServer, KubeMinor: kubeMinor(versions.APIServer)}
	return WithDecodeCheck(m.Run)
}

// Clients are a test's own clients: the control plane's admin, unthrottled.
type Clients struct {
	Kube kubernetes.Interface
	Dyn  dynamic.Interface
}

// Clients returns new admin clients of the suite's control plane.
func (s *Suite) Clients(t testing.TB) Clients {
	t.Helper()
	return ClientsFor(t, s.CP.RestConfig())
}

// ClientsFor returns new clients for cfg (a test's own control plane, an identity of its own).
func ClientsFor(t testing.TB, cfg *rest.Config) Clients {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Clients{Kube: kube, Dyn: dyn}
}

// StartCascade runs cascade (with extra flags) for the test, waits until it is ready, and stops
// it at cleanup, logging the end of its log when the test failed.
func (s *Suite) StartCascade(t testing.TB, extra ...string) *harness.Cascade {
	t.Helper()
	name := "cascade-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return StartReady(t, s.CP, name, s.CascadeBin, extra...)
}

// StartReady starts cascade (binary bin, with flags) on cp, stops it at cleanup, and waits a
// minute at most until it is ready: for tests on a control plane of their own.
func StartReady(t testing.TB, cp *harness.ControlPlane, name, bin string, flags ...string) *harness.Cascade {
	t.Helper()
	return StartReadyWith(t, cp, name, bin, harness.ProcessOptions{}, flags...)
}

// StartReadyWith is StartReady with the process's options (its environment).
func StartReadyWith(t testing.TB, cp *harness.ControlPlane, name, bin string, opt harness.ProcessOptions, flags ...string) *harness.Cascade {
	t.Helper()
	c, err := cp.StartCascadeWith(name, bin, opt, flags...)
	return ready(t, c, err)
}

// StartSecureCascade is StartCascade with cascade's default, secure serving of its metrics
// address (harness.ControlPlane.StartSecureCascade): the Cascade scrapes over HTTPS with the
// admin's token.
func (s *Suite) StartSecureCascade(t testing.TB, extra ...string) *harness.Cascade {
	t.Helper()
	name := "cascade-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	c, err := s.CP.StartSecureCascade(name, s.CascadeBin, harness.ProcessOptions{}, extra...)
	return ready(t, c, err)
}

func ready(t testing.TB, c *harness.Cascade, err error) *harness.Cascade {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	StopAtCleanup(t, c.Process)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// StopAtCleanup stops p when the test ends, and then logs the end of p's log if the test failed.
func StopAtCleanup(t testing.TB, p *harness.Process) {
	t.Cleanup(func() {
		_ = p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", p.LogPath, p.Tail(60))
		}
	})
}

// StartControlPlane starts a control plane of the test's own (etcd and kube-apiserver with
// opts), waiting three minutes at most, and stops it at cleanup, logging the end of its logs
// when the test failed: for tests that need a clean cluster or flags of their own.
func StartControlPlane(t testing.TB, opts harness.Options) *harness.ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := harness.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start a control plane of the test's own: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", cp.LogTails(40))
		}
		_ = cp.Stop()
	})
	return cp
}
