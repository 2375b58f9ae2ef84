// Command localrun is what `make run` executes: it starts the local control plane (etcd and
// kube-apiserver from bin/), runs cascade against it in the foreground with its log on the
// terminal, and stops everything on Ctrl-C (SIGINT) or SIGTERM.
//
// With --members N (make run-fleet MEMBERS=N) it also starts N member kube-apiservers on the
// same etcd, each under its own --etcd-prefix, writes each one's kubeconfig into a directory, and
// runs cascade in fleet mode over them (--fleet-kubeconfig-dir): the first control plane is the
// host (docs/fleet.md).
//
// Usage: localrun [--dir DIR] [--members N] [--cascade bin/cascade] [-- cascade flags...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cascade-gc/cascade/e2e/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "localrun: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "Working directory for the control plane (default: a new temporary directory, removed at exit).")
	bin := flag.String("cascade", "bin/cascade", "The cascade binary to run.")
	members := flag.Int("members", 0, "Member control planes for fleet mode (0: the single cluster).")
	flag.Parse()
	cascadeArgs := flag.Args()
	if *members < 0 || *members > 50 {
		return fmt.Errorf("--members=%d: between 0 and 50", *members)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cascadeBin, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(cascadeBin); err != nil {
		return fmt.Errorf("%s not found: run `make build` (or just `make run`)", cascadeBin)
	}
	fmt.Println("Starting etcd and kube-apiserver ...")
	started := time.Now()
	cp, err := harness.Start(ctx, harness.Options{Dir: *dir, KeepDir: *dir != ""})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\nStopping cascade, kube-apiserver and etcd ...")
		_ = cp.Stop()
		fmt.Println("Stopped; nothing is left running.")
	}()
	kubectl := filepath.Join(cp.BinDir, "kubectl")
	if *members > 0 {
		fleetDir := filepath.Join(cp.Dir, "fleet")
		if err := os.MkdirAll(fleetDir, 0o755); err != nil {
			return err
		}
		var memberCPs []*harness.ControlPlane
		defer func() {
			for _, m := range memberCPs {
				_ = m.Stop()
			}
		}()
		for i := range *members {
			name := fmt.Sprintf("member-%d", i+1)
			fmt.Printf("Starting member %s (kube-apiserver on the same etcd, prefix /%s) ...\n", name, name)
			m, err := harness.Start(ctx, harness.Options{Dir: filepath.Join(cp.Dir, name), KeepDir: true, SharedEtcd: cp.EtcdURL, EtcdPrefix: "/" + name})
			if err != nil {
				return err
			}
			memberCPs = append(memberCPs, m)
			kc := filepath.Join(fleetDir, name+".kubeconfig")
			if err := m.WriteKubeconfig(kc, harness.AdminUser, m.Token); err != nil {
				return err
			}
			fmt.Printf("  %s: %s --kubeconfig %s get configmaps -A\n", name, kubectl, kc)
		}
		cascadeArgs = append([]string{"--fleet-kubeconfig-dir=" + fleetDir}, cascadeArgs...)
	}
	fmt.Printf(`Control plane ready in %s.
  kubeconfig: %s
  logs:       %s
Try, from another terminal:
  %s --kubeconfig %s create configmap owner
  %s --kubeconfig %s api-resources
Press Ctrl-C to stop everything.

`, time.Since(started).Round(100*time.Millisecond), cp.KubeconfigPath, cp.Dir, kubectl, cp.KubeconfigPath, kubectl, cp.KubeconfigPath)

	// A local run serves /metrics and /debug as plain HTTP with no authentication
	// (--metrics-secure=false), unless ARGS turn secure serving back on.
	start := cp.StartCascadeWith
	if secureServing(cascadeArgs) {
		start = cp.StartSecureCascade
	}
	c, err := start("cascade", cascadeBin, harness.ProcessOptions{Tee: os.Stderr}, cascadeArgs...)
	if err != nil {
		return err
	}
	if c.TLS == nil {
		fmt.Printf("cascade: metrics at %s, health at %s/healthz\n"+
			"  /metrics and /debug are plain HTTP with no authentication (--metrics-secure=false), for this local run only;\n"+
			"  cascade serves them over HTTPS to authorized users by default (docs/security.md)\n", c.MetricsURL, c.HealthURL)
	} else {
		fmt.Printf("cascade: metrics at %s (HTTPS, self-signed unless --tls-cert-file; send a bearer token: the admin's is in the kubeconfig), health at %s/healthz\n", c.MetricsURL, c.HealthURL)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-c.Done():
		_, werr := c.Exited()
		return fmt.Errorf("cascade exited: %v (log: %s)", werr, c.LogPath)
	}
}

// secureServing reports whether cascade's flags turn --metrics-secure on (the last one wins,
// as in pflag).
func secureServing(args []string) bool {
	secure := false
	for _, a := range args {
		if a == "--metrics-secure" || strings.HasPrefix(a, "--metrics-secure=") {
			secure = a == "--metrics-secure" || a == "--metrics-secure=true"
		}
	}
	return secure
}
