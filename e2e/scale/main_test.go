//go:build e2e

// Package scale holds BenchmarkScale (`make bench-scale`): cascade and kube-controller-manager's
// garbage collector, one at a time, on a local control plane loaded with SCALE_OBJECTS
// ConfigMaps (10^5 by default; 10^6 and more by setting it). It measures what grows with the
// cluster: time to synced, peak and steady resident memory, Go heap, and the throughput of
// collecting the owned tenth. Loading is the slow part, so the control plane can live in a
// directory of its own (SCALE_DIR) whose etcd is loaded once and reused by later runs.
package scale

import (
	"os"
	"testing"
	"time"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

var suite framework.Suite

func TestMain(m *testing.M) {
	os.Exit(framework.MainWith(m, &suite, func() harness.Options {
		// kube-apiserver fills its watch cache from etcd before it is ready: minutes with
		// millions of objects.
		return harness.Options{Dir: os.Getenv("SCALE_DIR"), ReadyTimeout: 15 * time.Minute}
	}))
}
