//go:build e2e

// Package e2e holds cascade's tests and collector benchmarks against a real control plane:
// etcd and kube-apiserver built from pinned Go modules (see e2e/tools and the Makefile) and
// started once for the package by framework.Main. Run with `make e2e` (or `make test`); each
// test uses its own namespace. What tests share with e2e/compare (clients, object helpers, the
// worker pool, waits, metrics) is in e2e/framework; this package keeps only what its own tests
// share.
//
// Checks that something must never happen (an orphan collected, an owner finished too soon)
// never rest on a bare sleep: they first wait for a canary (a fresh dependent collected after
// the point in question) or a condition (a counter cascade moves past that point), then
// watch the object for a quiet period.
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
