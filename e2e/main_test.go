//go:build e2e

// Package e2e holds cascade's tests and collector benchmarks against a real control plane:
// etcd and kube-apiserver built from pinned Go modules (see e2e/tools and the Makefile) and
// started once for the package by framework.Main. Run with `make e2e` (or `make test`); each
// test uses its own namespace. What tests share with e2e/compare (clients, object helpers, the
// worker pool, waits, metrics) is in e2e/framework; this package keeps only what its own tests
// share.
package e2e

import (
	"os"
	"testing"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// suite is the control plane shared by every test in this package, and the cascade binary
// under test.
var suite framework.Suite

func TestMain(m *testing.M) { os.Exit(framework.Main(m, &suite)) }
