// Command localrun is what `make run` executes: it starts the local control plane (etcd and
// kube-apiserver from bin/), runs cascade against it in the foreground with its log on the
// terminal, and stops everything on Ctrl-C (SIGINT) or SIGTERM.
//
// Usage: localrun [--dir DIR] [--cascade bin/cascade] [-- cascade flags...]
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
	flag.Parse()
	cascadeArgs := flag.Args()

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
