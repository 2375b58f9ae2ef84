//go:build e2e

package compare

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/compare/report"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// BenchmarkCompareGC runs the same scenarios, on this package's one control plane, against
// (a) the in-tree garbage collector (kube-controller-manager v1.36.3 with only
// --controllers=garbage-collector-controller), (b) cascade, one at a time and with the same
// client QPS/burst budget, and (c) "raw": the benchmark's own client doing the same per-object
// writes directly with the same concurrency and budget. It writes every measurement, the
// medians with their spread, the ratios and the targets to docs/benchmarks.json, and prints the
// targets as met / NOT met; e2e/benchreport renders docs/benchmarks.md and the charts from that
// file. It reports and never fails on a missed target.
//
// It takes hours at full size, so it runs only when CASCADE_COMPARE=1 (`make bench` sets it;
// `make bench QUICK=1` runs a reduced set in minutes). Environment:
//
//	QUICK=1           reduced sizes (but unthrottled trees, which would go in about a second:
//	                  they keep the full sizes), one run per figure
//	BENCH_RUNS=n      runs per figure (default 3; QUICK 1)
//	BENCH_QPS=40,0    client QPS budgets, 0 = unthrottled (default "40,0")
//	BENCH_BURST=30    client burst with a QPS budget (default 30, the in-tree GC's)
//	BENCH_SCENARIOS=  comma-separated subset of background,foreground,orphan,levels,latency,warmup
//	BENCH_SEED=1      seed for the warm-up objects' data, labels and owners
//	BENCH_WORKERS=20  concurrency of every subject (cascade --workers, in-tree
//	                  --concurrent-gc-syncs, raw's concurrent requests)
//	BENCH_PROFILE=dir cascade runs with --enable-profiling; a 5 s CPU profile of each of its
//	                  throughput windows is written to dir/<namespace>.pprof
//	BENCH_OUT=path    where to write the JSON (default docs/benchmarks.json)
//	BENCH_RESUME=     unset: resume the JSON when it is from the same commit and sizes (what it
//	                  has measured is skipped); 1: resume it whatever the commit; 0: start afresh.
//	                  The JSON is written after every measurement, so a stopped run loses none.
func BenchmarkCompareGC(b *testing.B) {
	if os.Getenv("CASCADE_COMPARE") == "" {
		b.Skip("the GC comparison takes minutes to hours: set CASCADE_COMPARE=1 (make bench does)")
	}
	cfg, err := compareConfigFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	out := os.Getenv("BENCH_OUT")
	if out == "" {
		out = filepath.Join(root, "docs", "benchmarks.json")
	}
	r := newComparison(b, cfg)
	r.out, r.root = out, root
	if err := r.resume(os.Getenv("BENCH_RESUME")); err != nil {
		b.Fatal(err)
	}
	r.run()
	rep := r.results(root)
	if err := report.Write(out, rep); err != nil {
		b.Fatal(err)
	}
	printReport(rep)
	fmt.Printf("compare: wrote %s (%s)\n", out, time.Duration(rep.DurationSeconds*float64(time.Second)).Round(time.Second))
}

// latencyPause is the pause after each small-cascade repetition: the time the budget's token
// bucket takes to refill its burst, and at least LatencyMinPauseMs.
func latencyPause(cfg report.Config, b report.Budget) time.Duration {
	pause := time.Duration(cfg.LatencyMinPauseMs) * time.Millisecond
	if b.QPS > 0 {
		pause = max(pause, time.Duration(float64(b.Burst)/float64(b.QPS)*float64(time.Second)))
	}
	return pause
}

// budgetKey names a budget in namespace names.
func budgetKey(b report.Budget) string {
	if b.QPS == 0 {
		return "unthrottled"
	}
	return "qps" + strconv.FormatFloat(float64(b.QPS), 'f', -1, 32)
}

var allScenarios = []string{"background", "foreground", "orphan", "levels", "latency", "warmup"}

// workers is the concurrency of each GC (cascade's --workers, kube-controller-manager's
// --concurrent-gc-syncs: 20 is both defaults) and of the raw client, unless BENCH_WORKERS says.
const workers = 20

func compareConfigFromEnv() (report.Config, error) {
	quick := os.Getenv("QUICK") != "" && os.Getenv("QUICK") != "0"
	cfg := report.Config{
		Quick: quick, Runs: 3, Workers: workers, Seed: 1,
		Background: []int{10, 1000}, Foreground: []int{10, 1000}, Orphan: []int{1, 5000}, Levels: []int{10, 10, 100},
		LatencyReps: 200, LatencyDeps: 10, LatencyMinPauseMs: 100,
		WarmupObjects: 100000, WarmupDataBytes: 1024, WarmupOwnedPercent: 10,
		MemorySettleSeconds: 10, MemorySamples: 5,
		Scenarios: allScenarios,
	}
	if quick {
		cfg.Runs = 1
		// Unthrottled, the reduced trees go in about a second: too short a window to tell
		// throughput from fixed delays and the machine's other load. They keep the full sizes.
		cfg.UnthrottledBackground, cfg.UnthrottledForeground, cfg.UnthrottledOrphan, cfg.UnthrottledLevels = cfg.Background, cfg.Foreground, cfg.Orphan, cfg.Levels
		cfg.Background, cfg.Foreground, cfg.Orphan, cfg.Levels = []int{10, 100}, []int{10, 100}, []int{1, 500}, []int{10, 10, 10}
		cfg.LatencyReps = 30
		cfg.WarmupObjects = 10000
		cfg.MemorySettleSeconds, cfg.MemorySamples = 5, 3
	}
	var err error
	if v := os.Getenv("BENCH_RUNS"); v != "" {
		if cfg.Runs, err = strconv.Atoi(v); err != nil || cfg.Runs < 1 {
			return cfg, fmt.Errorf("BENCH_RUNS=%q: want a positive integer", v)
		}
	}
	if v := os.Getenv("BENCH_WORKERS"); v != "" {
		if cfg.Workers, err = strconv.Atoi(v); err != nil || cfg.Workers < 1 || cfg.Workers > 1000 {
			return cfg, fmt.Errorf("BENCH_WORKERS=%q: want an integer from 1 to 1000", v)
		}
	}
	if v := os.Getenv("BENCH_SEED"); v != "" {
		if cfg.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			return cfg, fmt.Errorf("BENCH_SEED=%q: %v", v, err)
		}
	}
	burst := 30
	if v := os.Getenv("BENCH_BURST"); v != "" {
		if burst, err = strconv.Atoi(v); err != nil || burst < 1 {
			return cfg, fmt.Errorf("BENCH_BURST=%q: want a positive integer", v)
		}
	}
	qpsList := os.Getenv("BENCH_QPS")
	if qpsList == "" {
		qpsList = "40,0"
	}
	for _, s := range strings.Split(qpsList, ",") {
		q, err := strconv.ParseFloat(strings.TrimSpace(s), 32)
		if err != nil || q < 0 || (q > 0 && q < 2) {
			return cfg, fmt.Errorf("BENCH_QPS: %q is not a QPS budget (0 = unthrottled, else >= 2)", s)
		}
		bud := report.Budget{Name: "unthrottled", QPS: float32(q), Burst: burst}
		if q > 0 {
			bud.Name = strconv.FormatFloat(q, 'f', -1, 32) + " QPS"
		}
		cfg.Budgets = append(cfg.Budgets, bud)
	}
	if v := os.Getenv("BENCH_SCENARIOS"); v != "" {
		cfg.Scenarios = nil
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(allScenarios, s) {
				return cfg, fmt.Errorf("BENCH_SCENARIOS: unknown scenario %q (known: %s)", s, strings.Join(allScenarios, ","))
			}
			cfg.Scenarios = append(cfg.Scenarios, s)
		}
	}
	return cfg, nil
}

// treeScenario deletes the roots of a tree of ConfigMaps with a propagation policy.
type treeScenario struct {
	key    string
	title  string
	shape  []int
	policy metav1.DeletionPropagation
	// block sets blockOwnerDeletion on the references (what controllers do; foreground waits
	// for such dependents).
	block bool
}

// treeScenarios are the tree scenarios c selects, with their sizes at budget b.
func treeScenarios(c report.Config, b report.Budget) []treeScenario {
	bg, fg, orphan, levels := c.Trees(b)
	all := []treeScenario{
		{key: "background", title: "background " + shapeTitle(bg), shape: bg, policy: metav1.DeletePropagationBackground},
		{key: "foreground", title: "foreground " + shapeTitle(fg), shape: fg, policy: metav1.DeletePropagationForeground, block: true},
		{key: "orphan", title: "orphan " + shapeTitle(orphan), shape: orphan, policy: metav1.DeletePropagationOrphan},
		{key: "levels", title: fmt.Sprintf("%d levels %s", len(levels), shapeTitle(levels)), shape: levels, policy: metav1.DeletePropagationBackground},
	}
	var out []treeScenario
	for _, s := range all {
		if slices.Contains(c.Scenarios, s.key) {
			out = append(out, s)
		}
	}
	return out
}

// shapeTitle writes a tree shape the way the issue does: "10 × 1,000".
func shapeTitle(shape []int) string {
	parts := make([]string, len(shape))
	for i, n := range shape {
		parts[i] = report.Thousands(n)
	}
	return strings.Join(parts, " × ")
}
