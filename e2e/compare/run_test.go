//go:build e2e

package compare

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-gc/cascade/e2e/compare/report"
	"github.com/cascade-gc/cascade/e2e/framework"
)

// comparison is one run of BenchmarkCompareGC: its configuration and what it measured so far.
type comparison struct {
	b            *testing.B
	cfg          report.Config
	cs           framework.Clients
	started      time.Time
	measurements []report.Measurement
	// prev is the report resumed from (resume.go), zero when starting afresh; out and root
	// are where the report is written after every measurement.
	prev      report.Report
	out, root string
}

func newComparison(b *testing.B, cfg report.Config) *comparison {
	return &comparison{b: b, cfg: cfg, cs: suite.Clients(b), started: time.Now()}
}

// run measures every scenario: runs outermost, so that drift over hours spreads over all
// subjects; within a run, each budget, each scenario, then in-tree, cascade, raw one after the
// other. Warm-up and memory come last: they need the large object set, made once.
func (r *comparison) run() {
	fmt.Printf("compare: %d run(s) per figure, budgets %v, scenarios %v, quick=%v\n", r.cfg.Runs, r.cfg.Budgets, r.cfg.Scenarios, r.cfg.Quick)
	for run := 1; run <= r.cfg.Runs; run++ {
		for _, bud := range r.cfg.Budgets {
			for _, sc := range treeScenarios(r.cfg, bud) {
				for _, subject := range report.Subjects {
					if !r.have(sc.key, bud.Name, subject, run) {
						r.record(r.measureTree(sc, subject, bud, run))
					}
				}
			}
			if slices.Contains(r.cfg.Scenarios, "latency") {
				for _, subject := range report.Subjects {
					if !r.have("latency", bud.Name, subject, run) {
						r.record(r.measureLatency(subject, bud, run))
					}
				}
			}
		}
	}
	if slices.Contains(r.cfg.Scenarios, "warmup") {
		r.measureWarmup()
	}
}

// record keeps m (in place of a failed measurement of the same figure and run) and writes the
// report at once, so that a run stopped midway keeps what it measured (resume.go).
func (r *comparison) record(m report.Measurement) {
	r.measurements = slices.DeleteFunc(r.measurements, func(o report.Measurement) bool { return sameFigure(o, m) })
	r.measurements = append(r.measurements, m)
	defer r.flush()
	var parts []string
	if m.ObjectsPerSecond > 0 {
		parts = append(parts, fmt.Sprintf("%d objects in %.2fs = %.1f objects/s, %.3f requests/object (%s)", m.Objects, m.Seconds, m.ObjectsPerSecond, m.RequestsPerObject, m.RequestDetail))
	}
	if m.P99Ms > 0 {
		parts = append(parts, fmt.Sprintf("p50 %.1f ms, p99 %.1f ms", m.P50Ms, m.P99Ms))
	}
	if m.SyncSeconds > 0 {
		parts = append(parts, fmt.Sprintf("synced in %.2fs", m.SyncSeconds))
	}
	if m.RSSBytes > 0 {
		parts = append(parts, fmt.Sprintf("RSS %.1f MiB, Go heap %.1f MiB", m.RSSBytes/(1<<20), m.HeapBytes/(1<<20)))
	}
	if m.Error != "" {
		parts = append(parts, "FAILED: "+m.Error)
	}
	fmt.Printf("compare: [%s] %s %s run %d (%s): %s\n", time.Since(r.started).Round(time.Second), m.Scenario, m.Budget, m.Run, m.Subject, strings.Join(parts, "; "))
}

// nsName names a measurement's namespace: every measurement gets its own.
func nsName(scenario, subject string, bud report.Budget, run int) string {
	return fmt.Sprintf("cmp-%s-%s-%s-r%d", scenario, budgetKey(bud), strings.ReplaceAll(subject, "-", ""), run)
}

// measureTree creates the scenario's tree in a fresh namespace, starts the subject's GC (none
// for raw) and waits until it has the tree in its graph and the API server saw no more
// ConfigMap requests, then deletes the roots with the scenario's policy and times until every
// dependent is gone (orphan: has no owner reference left and the root is gone; foreground:
// the roots are gone too). Requests are kube-apiserver's per-object ConfigMap requests in that
// window, less the benchmark's own root deletions.
func (r *comparison) measureTree(sc treeScenario, subject string, bud report.Budget, run int) (m report.Measurement) {
	m = report.Measurement{Scenario: sc.key, Budget: bud.Name, Subject: subject, Run: run}
	ns := nsName(sc.key, subject, bud, run)
	r.cs.CreateNamespace(r.b, ns)
	defer cleanupNamespace(r.b, r.cs, ns)
	levels := createTree(r.b, r.cs, ns, sc.shape, sc.block)
	roots := levels[0]
	var deps []string
	for _, l := range levels[1:] {
		deps = append(deps, l...)
	}
	total := len(roots) + len(deps)
	m.Objects = len(deps)

	obs, err := r.observe(subject, bud, ns, total)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer obs.stop()
	tr := obs.tr

	timeout := time.Minute + time.Duration(total)*250*time.Millisecond // at least 4 objects/s
	before := framework.APIServerRequests(r.b, r.cs)
	waitProfile := obs.gc.startProfile(ns, profileSeconds)
	defer waitProfile()
	cpuStart := r.cpuNow(obs.gc)
	start := time.Now()
	if subject == report.Raw {
		raw := rawClient(r.b, bud)
		switch sc.policy {
		case metav1.DeletePropagationOrphan:
			rawRemoveOwners(r.b, raw, ns, deps, r.cfg.Workers)
			rawDeleteNames(r.b, raw, ns, roots, r.cfg.Workers)
		case metav1.DeletePropagationForeground:
			rawDeleteNames(r.b, raw, ns, reversed(deps), r.cfg.Workers)
			rawDeleteNames(r.b, raw, ns, roots, r.cfg.Workers)
		default:
			rawDeleteNames(r.b, raw, ns, roots, r.cfg.Workers)
			rawDeleteNames(r.b, raw, ns, deps, r.cfg.Workers)
		}
	} else {
		for _, name := range roots {
			r.cs.DeleteCM(r.b, ns, name, sc.policy)
		}
	}
	sent := time.Since(start)
	var end time.Time
	switch sc.policy {
	case metav1.DeletePropagationOrphan:
		end, err = tr.waitFor(timeout, func() (bool, time.Time) {
			okF, tF := tr.allFreed(deps)
			okG, tG := tr.allGone(roots)
			return okF && okG, latest(tF, tG)
		})
		if err == nil {
			if gone := tr.countGone(deps); gone > 0 {
				err = fmt.Errorf("%d orphaned dependents were deleted", gone)
			}
		}
	case metav1.DeletePropagationForeground:
		end, err = tr.waitFor(timeout, func() (bool, time.Time) {
			okD, tD := tr.allGone(deps)
			okR, tR := tr.allGone(roots)
			return okD && okR, latest(tD, tR)
		})
	default:
		end, err = tr.waitFor(timeout, func() (bool, time.Time) { return tr.allGone(deps) })
	}
	cpuEnd := r.cpuNow(obs.gc)
	if err != nil {
		m.Error = obs.failure(err)
		return m
	}
	// Requests still in flight when the last event arrived are the subject's too.
	framework.MeasurementPause(2 * time.Second)
	after := framework.APIServerRequests(r.b, r.cs)
	reqs, detail := framework.ObjectRequests(before, after, "configmaps")
	reqs -= float64(len(roots)) // the root deletions stand for the user's
	m.Seconds = end.Sub(start).Seconds()
	m.ObjectsPerSecond = float64(m.Objects) / m.Seconds
	m.Requests, m.RequestDetail = reqs, detail
	m.RequestsPerObject = reqs / float64(m.Objects)
	fmt.Printf("compare: %s %s run %d (%s) timeline: requests sent +%.0f ms, %s\n", sc.key, bud.Name, run, subject, float64(sent.Microseconds())/1000, tr.timeline(deps, start))
	cpu := cpuPerObject(cpuStart, cpuEnd, m.Objects)
	m.CPU = &cpu
	fmt.Printf("compare: %s %s run %d (%s) %s\n", sc.key, bud.Name, run, subject, cpuReport(cpu))
	return m
}

// profileSeconds is how long a BENCH_PROFILE CPU profile of a throughput window lasts.
const profileSeconds = 5

// measureLatency creates LatencyReps owners with LatencyDeps dependents each, then deletes the
// owners one at a time (background) and takes p50 and p99 of owner DELETE sent → last
// dependent's deletion seen on a watch. After each repetition it pauses until the budget's
// token bucket is full again, so that each small cascade meets an idle collector with its whole
// burst: this is latency, throughput is measured elsewhere. Raw: the client deletes the owner
// and then its dependents concurrently itself.
func (r *comparison) measureLatency(subject string, bud report.Budget, run int) (m report.Measurement) {
	m = report.Measurement{Scenario: "latency", Budget: bud.Name, Subject: subject, Run: run}
	ns := nsName("latency", subject, bud, run)
	r.cs.CreateNamespace(r.b, ns)
	defer cleanupNamespace(r.b, r.cs, ns)
	levels := createTree(r.b, r.cs, ns, []int{r.cfg.LatencyReps, r.cfg.LatencyDeps}, false)
	owners, deps := levels[0], levels[1]
	m.Objects = len(deps)

	obs, err := r.observe(subject, bud, ns, len(owners)+len(deps))
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer obs.stop()
	tr := obs.tr
	var raw kubernetes.Interface
	if subject == report.Raw {
		raw = rawClient(r.b, bud)
	}
	lat := make([]float64, 0, len(owners))
	for i, owner := range owners {
		mine := deps[i*r.cfg.LatencyDeps : (i+1)*r.cfg.LatencyDeps]
		start := time.Now()
		if raw != nil {
			rawDeleteNames(r.b, raw, ns, []string{owner}, 1)
			rawDeleteNames(r.b, raw, ns, mine, min(r.cfg.Workers, len(mine)))
		} else {
			r.cs.DeleteCM(r.b, ns, owner, metav1.DeletePropagationBackground)
		}
		end, err := tr.waitForEvery(time.Minute, time.Millisecond, func() (bool, time.Time) { return tr.allGone(mine) })
		if err != nil {
			m.Error = obs.failure(fmt.Errorf("repetition %d: %w", i, err))
			return m
		}
		lat = append(lat, float64(end.Sub(start).Microseconds())/1000)
		framework.MeasurementPause(latencyPause(r.cfg, bud)) // the subject's rate limiter refills
	}
	m.P50Ms, m.P99Ms = percentile(lat, 0.50), percentile(lat, 0.99)
	return m
}

// measureWarmup creates the warm-up objects once, then, in each run, starts each GC at the
// first budget (the in-tree defaults: 40 QPS) and times process start → graph synced, then
// samples its resident set and Go heap while it holds those objects.
func (r *comparison) measureWarmup() {
	bud := r.cfg.Budgets[0]
	todo := false
	for run := 1; run <= r.cfg.Runs; run++ {
		for _, subject := range []string{report.InTree, report.Cascade} {
			todo = todo || !r.have("warmup", bud.Name, subject, run)
		}
	}
	if !todo {
		return
	}
	ns := "cmp-warmup"
	r.cs.CreateNamespace(r.b, ns)
	defer cleanupNamespace(r.b, r.cs, ns)
	start := time.Now()
	createWarmupObjects(r.b, r.cs, ns, r.cfg)
	fmt.Printf("compare: created %d warm-up objects in %s\n", r.cfg.WarmupObjects, time.Since(start).Round(time.Second))
	for run := 1; run <= r.cfg.Runs; run++ {
		for _, subject := range []string{report.InTree, report.Cascade} {
			if !r.have("warmup", bud.Name, subject, run) {
				r.record(r.measureMemory(subject, bud, run, ns))
			}
		}
	}
}

func (r *comparison) measureMemory(subject string, bud report.Budget, run int, ns string) (m report.Measurement) {
	m = report.Measurement{Scenario: "warmup", Budget: bud.Name, Subject: subject, Run: run, Objects: r.cfg.WarmupObjects}
	waitAPIQuiet(r.b, r.cs)
	gc, err := r.startGC(subject, bud, ns, r.cfg.WarmupObjects)
	if err != nil {
		m.Error = err.Error()
		return m
	}
	defer gc.stop()
	m.SyncSeconds = gc.synced.Seconds()
	framework.MeasurementPause(time.Duration(r.cfg.MemorySettleSeconds) * time.Second) // memory settles after the sync
	var rss, heap []float64
	for i := range r.cfg.MemorySamples {
		if i > 0 {
			framework.MeasurementPause(time.Second) // samples a second apart
		}
		v, err := gc.residentBytes()
		if err != nil {
			m.Error = err.Error()
			return m
		}
		rss = append(rss, float64(v))
		h, err := gc.heapBytes()
		if err != nil {
			m.Error = err.Error()
			return m
		}
		heap = append(heap, h)
	}
	m.RSSBytes, m.HeapBytes = median(rss), median(heap)
	return m
}

// createTree creates shape[0] roots and, level by level, shape[i] children of every object of
// the level above, named l<level>-<index>. It returns the names by level.
func createTree(b testing.TB, cs framework.Clients, ns string, shape []int, block bool) [][]string {
	b.Helper()
	var levels [][]string
	var parentNames []string
	var parentUIDs []types.UID
	for lvl, width := range shape {
		count := width
		if lvl > 0 {
			count = width * len(parentNames)
		}
		names := make([]string, count)
		for i := range names {
			names[i] = fmt.Sprintf("l%d-%d", lvl, i)
		}
		pn, pu := parentNames, parentUIDs
		uids := cs.CreateConfigMaps(b, ns, count, createWorkers, func(i int) *corev1.ConfigMap {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}
			if lvl > 0 {
				p := i / width
				cm.OwnerReferences = []metav1.OwnerReference{framework.RefTo("v1", "ConfigMap", pn[p], pu[p], block)}
			}
			return cm
		})
		levels = append(levels, names)
		parentNames, parentUIDs = names, uids
	}
	return levels
}

// createWarmupObjects creates the warm-up set: WarmupObjects ConfigMaps with WarmupDataBytes of
// seeded random data and 4 labels; WarmupOwnedPercent of them (chosen by the seed) are owned by
// one of the others, which exist, so none of them is garbage.
func createWarmupObjects(b testing.TB, cs framework.Clients, ns string, cfg report.Config) {
	b.Helper()
	n := cfg.WarmupObjects
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	perm := rng.Perm(n)
	owned := make([]bool, n)
	for _, i := range perm[:n*cfg.WarmupOwnedPercent/100] {
		owned[i] = true
	}
	var unowned []int
	for i := range n {
		if !owned[i] {
			unowned = append(unowned, i)
		}
	}
	ownerOf := make([]int, n)
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	data := make([]string, n)
	labels := make([]map[string]string, n)
	for i := range n {
		if owned[i] {
			ownerOf[i] = unowned[rng.IntN(len(unowned))]
		}
		buf := make([]byte, cfg.WarmupDataBytes)
		for j := range buf {
			buf[j] = alphabet[rng.IntN(len(alphabet))]
		}
		data[i] = string(buf)
		labels[i] = map[string]string{
			"app":     fmt.Sprintf("app-%d", rng.IntN(100)),
			"tier":    []string{"frontend", "backend", "cache", "batch"}[rng.IntN(4)],
			"release": fmt.Sprintf("r%d", rng.IntN(20)),
			"shard":   fmt.Sprintf("%d", i%16),
		}
	}
	build := func(idx []int, uids map[int]types.UID) func(int) *corev1.ConfigMap {
		return func(k int) *corev1.ConfigMap {
			i := idx[k]
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%d", i), Labels: labels[i]},
				Data:       map[string]string{"data": data[i]},
			}
			if owned[i] {
				o := ownerOf[i]
				cm.OwnerReferences = []metav1.OwnerReference{framework.RefTo("v1", "ConfigMap", fmt.Sprintf("w-%d", o), uids[o], false)}
			}
			return cm
		}
	}
	got := cs.CreateConfigMaps(b, ns, len(unowned), createWorkers, build(unowned, nil))
	uids := make(map[int]types.UID, len(unowned))
	for k, i := range unowned {
		uids[i] = got[k]
	}
	var ownedIdx []int
	for i := range n {
		if owned[i] {
			ownedIdx = append(ownedIdx, i)
		}
	}
	cs.CreateConfigMaps(b, ns, len(ownedIdx), createWorkers, build(ownedIdx, uids))
}

// createWorkers is how many ConfigMaps the benchmark creates at once.
const createWorkers = 32

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

func latest(a, c time.Time) time.Time {
	if a.After(c) {
		return a
	}
	return c
}

// percentile is the nearest-rank percentile p (0..1] of xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	k := int(math.Ceil(float64(len(s))*p)) - 1
	return s[max(0, min(k, len(s)-1))]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
