//go:build e2e

package compare

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/compare/report"
)

// BenchmarkCollectorCPU measures CPU per collected object (issue 41): a background deletion of
// 10 owners × 1,000 dependents, unthrottled, 20 workers, collected by kube-controller-manager's
// garbage collector and by cascade one after the other on this package's control plane, for
// CPU_PAIRS pairs (default 5, at least 3), the order alternating (in-tree first in odd pairs,
// cascade first in even ones) so that the machine's drift falls on both. For each window (the
// roots' deletion until the last dependent is gone, as BenchmarkCompareGC measures it) it reads
// the user+system CPU of the collector, kube-apiserver and etcd from /proc and prints, per
// pair, cascade's figure over in-tree's for the collector alone and for the three processes
// together; then the medians of those ratios. It fails no target: the figures go to
// docs/scale.md with the commit that measured them. BENCH_PROFILE=dir keeps a 5 s CPU profile of
// each cascade window (merge them with `go tool pprof -top bin/cascade dir/*.pprof`).
// Runs only when CASCADE_COMPARE=1 (make bench-cpu sets it).
func BenchmarkCollectorCPU(b *testing.B) {
	if os.Getenv("CASCADE_COMPARE") == "" {
		b.Skip("the CPU comparison takes minutes: set CASCADE_COMPARE=1 (make bench-cpu does)")
	}
	pairs := 5
	if v := os.Getenv("CPU_PAIRS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			b.Fatalf("CPU_PAIRS=%q: want an integer of at least 3 (a median of fewer says little)", v)
		}
		pairs = n
	}
	cfg := report.Config{Runs: pairs, Workers: workers, Seed: 1, Background: []int{10, 1000}}
	if v := os.Getenv("BENCH_WORKERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			b.Fatalf("BENCH_WORKERS=%q: want an integer from 1 to 1000", v)
		}
		cfg.Workers = n
	}
	r := newComparison(b, cfg)
	bud := report.Budget{Name: "unthrottled"}
	sc := treeScenario{key: "cpu", title: "background 10 × 1,000", shape: cfg.Background, policy: metav1.DeletePropagationBackground}

	var gcRatios, cpRatios []float64
	var inTree, cascade []report.CPUPerObject
	for pair := 1; pair <= pairs; pair++ {
		order := []string{report.InTree, report.Cascade}
		if pair%2 == 0 {
			order = []string{report.Cascade, report.InTree}
		}
		got := map[string]report.CPUPerObject{}
		for _, subject := range order {
			m := r.measureTree(sc, subject, bud, pair)
			r.record(m)
			if m.Error != "" || m.CPU == nil {
				b.Fatalf("pair %d (%s): %s", pair, subject, m.Error)
			}
			got[subject] = *m.CPU
		}
		it, c := got[report.InTree], got[report.Cascade]
		inTree, cascade = append(inTree, it), append(cascade, c)
		gcRatios = append(gcRatios, c.GC/it.GC)
		cpRatios = append(cpRatios, c.ControlPlane()/it.ControlPlane())
		fmt.Printf("cpu: pair %d (%s first): collector ms/object in-tree %.3f cascade %.3f = %.2fx; apiserver+etcd+collector in-tree %.3f cascade %.3f = %.2fx\n",
			pair, order[0], it.GC, c.GC, c.GC/it.GC, it.ControlPlane(), c.ControlPlane(), c.ControlPlane()/it.ControlPlane())
	}
	gcOf := func(c report.CPUPerObject) float64 { return c.GC }
	fmt.Printf("cpu: %d pairs, medians: collector ms/object in-tree %.3f cascade %.3f; ratio per pair %s, median %.2fx (target at most 0.5x)\n",
		pairs, medianCPU(inTree, gcOf), medianCPU(cascade, gcOf), ratios(gcRatios), median(gcRatios))
	fmt.Printf("cpu: %d pairs, medians: apiserver+etcd+collector ms/object in-tree %.3f cascade %.3f; ratio per pair %s, median %.2fx (target at most 0.7x)\n",
		pairs, medianCPU(inTree, report.CPUPerObject.ControlPlane), medianCPU(cascade, report.CPUPerObject.ControlPlane), ratios(cpRatios), median(cpRatios))
	b.ReportMetric(medianCPU(cascade, gcOf), "cascade-ms/object")
	b.ReportMetric(medianCPU(inTree, gcOf), "in-tree-ms/object")
	b.ReportMetric(median(gcRatios), "collector-ratio")
	b.ReportMetric(median(cpRatios), "control-plane-ratio")
}

// medianCPU is the median of f over cs.
func medianCPU(cs []report.CPUPerObject, f func(report.CPUPerObject) float64) float64 {
	v := make([]float64, len(cs))
	for i, c := range cs {
		v[i] = f(c)
	}
	return median(v)
}

// ratios prints v as "0.52x 0.48x ...".
func ratios(v []float64) string {
	out := ""
	for i, x := range v {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%.2fx", x)
	}
	return out
}
