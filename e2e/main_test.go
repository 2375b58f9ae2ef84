//go:build e2e

// Package e2e holds cascade's tests against a real control plane: etcd and kube-apiserver built
// from pinned Go modules (see e2e/tools and the Makefile) and started by the harness package.
// Run with `make e2e` (or `make test`). Each test uses its own namespace.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/cascade-gc/cascade/e2e/harness"
)

var (
	// cp is the control plane shared by every test in this package.
	cp *harness.ControlPlane
	// cascadeBin is the cascade binary under test.
	cascadeBin string
)

var keep = flag.Bool("keep", false, "keep the control plane's directory (logs, kubeconfig) after the run")

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	cp, err = harness.Start(ctx, harness.Options{KeepDir: *keep})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: start control plane: %v\n", err)
		return 1
	}
	// Stop the control plane however the run ends: normal exit, failure, panic, or Ctrl-C.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping the control plane\n", s)
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

	binDir, err := os.MkdirTemp("", "cascade-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(binDir)
	if cascadeBin, err = harness.BuildCascade(binDir); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	return m.Run()
}
