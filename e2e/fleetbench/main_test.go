//go:build e2e

// Package fleetbench holds the fleet's benchmarks (`make bench-fleet`, docs/fleet.md): what
// one member costs cascade in fleet mode at 10 to 1,000 members (BenchmarkFleetCost), 10
// members in one fleet process beside 10 cascade processes and 10 kube-controller-managers
// running only their garbage collector (BenchmarkFleetSideBySide), and whether a member deleting
// a burst of owners slows the others' collection (BenchmarkFleetFairness).
//
// Members are real kube-apiservers sharing the suite's etcd, each under an --etcd-prefix of
// its own. A 2-core machine holds a few of them, not a thousand: BenchmarkFleetCost registers
// each kube-apiserver as several members, each with its own connection, watches and graph, as
// separate API servers would have.
package fleetbench

import (
	"os"
	"testing"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

var suite framework.Suite

func TestMain(m *testing.M) {
	os.Exit(framework.MainWith(m, &suite, func() harness.Options { return harness.Options{} }))
}
