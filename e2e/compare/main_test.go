//go:build e2e

// Package compare holds BenchmarkCompareGC, the side-by-side comparison of cascade with
// kube-controller-manager's garbage collector and with a raw client (`make bench`; what it
// relies on is checked in the e2e suite by TestKubeControllerManagerCollects). It runs on its
// own local control plane (framework.Main), like the e2e package, and writes
// docs/benchmarks.json in the schema of e2e/compare/report, which e2e/benchreport renders.
package compare

import (
	"os"
	"testing"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// suite is the control plane the benchmark runs on, and the cascade binary under test.
var suite framework.Suite

func TestMain(m *testing.M) { os.Exit(framework.Main(m, &suite)) }
