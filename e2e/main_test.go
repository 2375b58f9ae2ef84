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
//
// The tests share the control plane, in any order (-shuffle=on), and no namespace controller
// runs: what a test leaves (its objects, owners still waiting on a GC finalizer once its
// cascade stopped, entries of an orphan record, stamps) stays, and every cascade a later test
// starts sees it and finishes what it can. So a test asserts on its own objects (its namespace,
// its names and UIDs, log lines that name them), or on deltas of cascade's counters from a
// baseline taken once its cascade has worked through what earlier tests left (settled), never
// on a counter's value since the process started; a test that needs a clean cluster starts a
// control plane of its own (TestDryRunBesideInTree).
package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// suite is the control plane shared by every test in this package, and the cascade binary
// under test.
var suite framework.Suite

func TestMain(m *testing.M) { os.Exit(framework.Main(m, &suite)) }

// settleQuiet is how long cascade's work counters must hold still before a test takes its
// baseline: cascade finishes what earlier tests left as soon as its graph has synced, each
// leftover in a few requests, well within a second here.
const settleQuiet = 2 * time.Second

// workCounters move whenever cascade acts on its own (collects, finishes a GC finalizer,
// orphans, records an owner, stamps or unstamps, would act in --dry-run, reports a reference
// across namespaces): while it works through what earlier tests left, and then only for what
// the test does.
var workCounters = []string{
	"cascade_collected_total",
	"cascade_finalizers_removed_total",
	"cascade_orphaned_dependents_total",
	"cascade_orphan_record_writes_total",
	"cascade_orphan_record_degraded_total",
	"cascade_orphan_record_skipped_total",
	"cascade_default_propagation_changes_total",
	"cascade_dry_run_actions_total",
	"cascade_invalid_namespace_refs_total",
}

// settled waits until c has worked through what earlier tests left on the shared control
// plane (its work counters, and the others named, held still for settleQuiet) and returns that
// scrape: the baseline of the test's deltas.
func settled(t testing.TB, c framework.Server, more ...string) framework.Metrics {
	t.Helper()
	return framework.Settled(t, c, settleQuiet, collectTimeout, append(append([]string(nil), workCounters...), more...)...)
}
