//go:build e2e

package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-gc/cascade/e2e/compare/report"
	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// gcRun is a running garbage collector under comparison: kube-controller-manager or cascade.
type gcRun struct {
	proc *harness.Process
	srv  framework.Server
	// synced is process start → graph synced, as detected by polling every 50 ms.
	synced time.Duration
	// pprofURL is cascade's /debug/pprof when BENCH_PROFILE is set ("" otherwise).
	pprofURL string
}

// profileDir is $BENCH_PROFILE: where cascade's CPU profile of each measured window goes
// (cascade then runs with --enable-profiling). Empty: no profiling.
var profileDir = os.Getenv("BENCH_PROFILE")

// startProfile fetches a CPU profile of seconds from cascade into profileDir/name.pprof in the
// background; the returned function waits for it. A no-op without BENCH_PROFILE or for
// kube-controller-manager.
func (g *gcRun) startProfile(name string, seconds int) (wait func()) {
	if g == nil || g.pprofURL == "" || profileDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			fmt.Printf("compare: profile %s: %v\n", name, err)
			return
		}
		resp, err := http.Get(g.pprofURL + "/profile?seconds=" + strconv.Itoa(seconds)) //nolint:noctx // bounded by seconds
		if err != nil {
			fmt.Printf("compare: profile %s: %v\n", name, err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			err = os.WriteFile(filepath.Join(profileDir, name+".pprof"), b, 0o644)
		}
		if err != nil {
			fmt.Printf("compare: profile %s: %v\n", name, err)
		}
	}()
	return func() { <-done }
}

// startGC starts subject's process with the budget and waits until its dependency graph holds
// the cluster (at least minObjects objects). Both are detected by polling every 50 ms: cascade's
// /readyz (ready = every informer's initial list is in the graph); kube-controller-manager's
// log line that all monitors synced followed by its graph-changes queue drained.
func (r *comparison) startGC(subject string, bud report.Budget, ns string, minObjects int) (*gcRun, error) {
	name := ns + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	switch subject {
	case report.InTree:
		opts := harness.KCMOptions{Burst: bud.Burst, ConcurrentGCSyncs: r.cfg.Workers}
		if bud.QPS == 0 {
			opts.QPS = -1 // negative: client-go builds no rate limiter (the GC's client gets -2)
		} else {
			opts.QPS = bud.QPS / 2 // kube-controller-manager doubles it for the GC's client
		}
		k, err := suite.CP.StartKubeControllerManager("kcm-"+name, opts)
		if err != nil {
			return nil, err
		}
		g := &gcRun{proc: k.Process, srv: k}
		if err := framework.WaitInTreeGCSynced(ctx, k, float64(minObjects)); err != nil {
			g.stop()
			return nil, err
		}
		g.synced = time.Since(start)
		return g, nil
	case report.Cascade:
		args := []string{
			"--workers=" + strconv.Itoa(r.cfg.Workers),
			"--kube-api-qps=" + strconv.FormatFloat(float64(bud.QPS), 'f', -1, 32),
			"--kube-api-burst=" + strconv.Itoa(bud.Burst),
		}
		if profileDir != "" {
			args = append(args, "--enable-profiling")
		}
		c, err := suite.CP.StartCascade("cascade-"+name, suite.CascadeBin, nil, args...)
		if err != nil {
			return nil, err
		}
		g := &gcRun{proc: c.Process, srv: c, pprofURL: strings.TrimSuffix(c.MetricsURL, "/metrics") + "/debug/pprof"}
		if err := c.WaitReady(ctx); err != nil {
			g.stop()
			return nil, err
		}
		g.synced = time.Since(start)
		return g, nil
	}
	return nil, fmt.Errorf("unknown subject %q", subject)
}

// observed is what a measurement watches: the namespace, through a tracker, and the subject's
// GC (none for raw).
type observed struct {
	tr *tracker
	gc *gcRun // nil for raw
}

// observe starts tracking ns, starts subject's GC (none for raw) and waits until its graph holds
// at least objects objects, then until the API server is quiet: the measured window can open.
func (r *comparison) observe(subject string, bud report.Budget, ns string, objects int) (*observed, error) {
	obs := &observed{tr: trackNamespace(r.b, r.cs, ns)}
	if subject != report.Raw {
		gc, err := r.startGC(subject, bud, ns, objects)
		if err != nil {
			obs.tr.close()
			return nil, err
		}
		obs.gc = gc
	}
	waitAPIQuiet(r.b, r.cs)
	return obs, nil
}

// stop stops the GC, then the tracker.
func (o *observed) stop() {
	if o.gc != nil {
		o.gc.stop()
	}
	o.tr.close()
}

// failure is err with the end of the GC's log.
func (o *observed) failure(err error) string {
	if o.gc == nil {
		return err.Error()
	}
	return err.Error() + "\n" + o.gc.tail(20)
}

func (g *gcRun) stop() { _ = g.proc.Stop(15 * time.Second) }

func (g *gcRun) tail(n int) string { return g.proc.Tail(n) }

func (g *gcRun) residentBytes() (int64, error) { return harness.ResidentBytes(g.proc.Pid()) }

// heapBytes is go_memstats_heap_alloc_bytes: bytes of allocated heap objects, reachable or not
// yet swept, the figure both processes export.
func (g *gcRun) heapBytes() (float64, error) {
	text, err := g.srv.Metrics()
	if err != nil {
		return 0, err
	}
	m, err := framework.ParseMetrics(text)
	if err != nil {
		return 0, err
	}
	v, ok := m.Value("go_memstats_heap_alloc_bytes")
	if !ok {
		return 0, errors.New("no go_memstats_heap_alloc_bytes in /metrics")
	}
	return v, nil
}

// rawClient is the benchmark's stand-in for a perfect GC: a client with the same budget.
func rawClient(b testing.TB, bud report.Budget) kubernetes.Interface {
	b.Helper()
	cfg := suite.CP.RestConfig()
	if bud.QPS > 0 {
		cfg.QPS, cfg.Burst = bud.QPS, bud.Burst
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return kube
}

// rawDeleteNames deletes the named ConfigMaps with workers concurrent requests.
func rawDeleteNames(b testing.TB, kube kubernetes.Interface, ns string, names []string, workers int) {
	b.Helper()
	rawEach(b, names, workers, func(name string) error {
		return kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// rawRemoveOwners removes every owner reference of the named ConfigMaps, one JSON merge patch
// each, with workers concurrent requests: what orphaning costs at the least.
func rawRemoveOwners(b testing.TB, kube kubernetes.Interface, ns string, names []string, workers int) {
	b.Helper()
	patch := []byte(`{"metadata":{"ownerReferences":null}}`)
	rawEach(b, names, workers, func(name string) error {
		_, err := kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// rawEach sends do(name) for every name with workers concurrent requests and fails the
// benchmark if any failed.
func rawEach(b testing.TB, names []string, workers int, do func(string) error) {
	b.Helper()
	if err := framework.Parallel(len(names), workers, func(i int) error {
		if err := do(names[i]); err != nil {
			return fmt.Errorf("raw request on %s: %w", names[i], err)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// waitAPIQuiet waits until kube-apiserver has served no per-object ConfigMap request for a
// second (at most 60 s), so that a GC's start-up work (verifying owners it saw before their
// dependents) stays out of the measured window.
func waitAPIQuiet(b testing.TB, cs framework.Clients) {
	b.Helper()
	configMapRequests := func() float64 {
		n, _ := framework.ObjectRequests(framework.RequestCounts{}, framework.APIServerRequests(b, cs), "configmaps")
		return n
	}
	prev := -1.0
	// Not quiet within the minute: measure anyway; the request count shows it.
	_ = framework.Poll(time.Minute, time.Second, func() (bool, error) {
		cur := configMapRequests()
		quiet := cur == prev
		prev = cur
		return quiet, nil
	})
}

// cleanupNamespace deletes every ConfigMap in ns, clearing finalizers left by an unfinished
// foreground or orphan deletion, waits until none is left, then deletes ns. (No namespace
// controller runs here, so an empty namespace stays Terminating; it holds nothing.)
func cleanupNamespace(b testing.TB, cs framework.Clients, ns string) {
	b.Helper()
	ctx := context.Background()
	cms := cs.Kube.CoreV1().ConfigMaps(ns)
	var lastErr error
	err := framework.Poll(15*time.Minute, 200*time.Millisecond, func() (bool, error) {
		// Deleting 100,000 objects outlasts the request timeout (the answer is a timeout or a
		// reset stream); each round deletes more, so errors count only at the deadline.
		if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			lastErr = err
		}
		list, err := cms.List(ctx, metav1.ListOptions{Limit: 1000})
		if err != nil {
			return false, fmt.Errorf("list configmaps in %s: %w", ns, err)
		}
		for _, cm := range list.Items {
			if len(cm.Finalizers) > 0 {
				_, err := cms.Patch(ctx, cm.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return false, fmt.Errorf("clear finalizers of %s/%s: %w", ns, cm.Name, err)
				}
			}
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("emptying namespace %s: %v (last error of DeleteCollection: %v)", ns, err, lastErr)
	}
	if err := cs.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatalf("delete namespace %s: %v", ns, err)
	}
}

// tracker follows the ConfigMaps of a namespace through a watch and records when each was
// deleted and when each was first seen without owner references: the times are those at which
// the events arrived, so every subject is timed the same way.
type tracker struct {
	mu     sync.Mutex
	gone   map[string]time.Time
	freed  map[string]time.Time // zero time: had no owner from the start
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

func trackNamespace(b testing.TB, cs framework.Clients, ns string) *tracker {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		b.Fatalf("list configmaps in %s: %v", ns, err)
	}
	tr := &tracker{gone: map[string]time.Time{}, freed: map[string]time.Time{}, cancel: cancel, done: make(chan struct{})}
	for _, cm := range list.Items {
		if len(cm.OwnerReferences) == 0 {
			tr.freed[cm.Name] = time.Time{}
		}
	}
	go tr.follow(ctx, cs.Kube, ns, list.ResourceVersion)
	return tr
}

func (tr *tracker) follow(ctx context.Context, kube kubernetes.Interface, ns, rv string) {
	defer close(tr.done)
	for ctx.Err() == nil {
		w, err := kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() == nil {
				tr.fail(fmt.Errorf("watch configmaps in %s: %w", ns, err))
			}
			return
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			if ev.Type == watch.Error {
				tr.fail(fmt.Errorf("watch configmaps in %s: %w", ns, apierrors.FromObject(ev.Object)))
				w.Stop()
				return
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			rv = cm.ResourceVersion
			tr.mu.Lock()
			switch ev.Type {
			case watch.Deleted:
				tr.gone[cm.Name] = now
			case watch.Added, watch.Modified:
				if _, seen := tr.freed[cm.Name]; !seen && len(cm.OwnerReferences) == 0 {
					tr.freed[cm.Name] = now
				}
			}
			tr.mu.Unlock()
		}
		w.Stop() // the server ended the watch: resume from the last resource version
	}
}

func (tr *tracker) fail(err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.err == nil {
		tr.err = err
	}
}

func (tr *tracker) close() {
	tr.cancel()
	<-tr.done
}

// allGone reports whether every named object was deleted, and the last deletion's time.
// Call with tr.mu held (waitFor does).
func (tr *tracker) allGone(names []string) (bool, time.Time) { return allIn(tr.gone, names) }

// allFreed reports whether every named object has no owner reference left, and when the last
// one lost its last. Call with tr.mu held.
func (tr *tracker) allFreed(names []string) (bool, time.Time) { return allIn(tr.freed, names) }

func allIn(m map[string]time.Time, names []string) (bool, time.Time) {
	var last time.Time
	for _, n := range names {
		t, ok := m[n]
		if !ok {
			return false, time.Time{}
		}
		if t.After(last) {
			last = t
		}
	}
	return true, last
}

// countGone counts the named objects that were deleted.
func (tr *tracker) countGone(names []string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, name := range names {
		if _, ok := tr.gone[name]; ok {
			n++
		}
	}
	return n
}

// waitFor polls cond (under the tracker's lock) every 5 ms until it holds, and returns the time
// it reports.
func (tr *tracker) waitFor(timeout time.Duration, cond func() (bool, time.Time)) (time.Time, error) {
	return tr.waitForEvery(timeout, 5*time.Millisecond, cond)
}

func (tr *tracker) waitForEvery(timeout, period time.Duration, cond func() (bool, time.Time)) (time.Time, error) {
	var at time.Time
	err := framework.Poll(timeout, period, func() (bool, error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		ok, t := cond()
		at = t
		if ok {
			return true, nil
		}
		return false, tr.err
	})
	return at, err
}

// timeline says when the named objects went, relative to start: the first, the 10th, 50th and
// 90th percentile and the last deletion seen. It shows where a window's time goes: the delay
// before collection starts, the rate in the middle, the tail.
func (tr *tracker) timeline(names []string, start time.Time) string {
	tr.mu.Lock()
	var ms []float64
	for _, n := range names {
		if t, ok := tr.gone[n]; ok {
			ms = append(ms, float64(t.Sub(start).Microseconds())/1000)
		}
	}
	tr.mu.Unlock()
	if len(ms) == 0 {
		return "none gone"
	}
	slices.Sort(ms)
	at := func(p float64) float64 { return ms[min(len(ms)-1, int(p*float64(len(ms))))] }
	return fmt.Sprintf("%d gone: first +%.0f ms, 10%% +%.0f, 50%% +%.0f, 90%% +%.0f, last +%.0f", len(ms), ms[0], at(0.1), at(0.5), at(0.9), ms[len(ms)-1])
}

// cpuSample is the CPU time the processes of a measurement had used at one moment, and the
// machine's busy and total time: the difference of two samples says which process spent the
// window's CPU, and whether the machine (2 cores, shared) had any left.
type cpuSample struct {
	apiserver, etcd, gc, bench time.Duration
	machineBusy, machineAll    time.Duration
}

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

func (r *comparison) cpuNow(gc *gcRun) cpuSample {
	s := cpuSample{
		apiserver: procCPU(suite.CP.APIServer.Pid()),
		etcd:      procCPU(suite.CP.Etcd.Pid()),
		bench:     procCPU(os.Getpid()),
	}
	if gc != nil {
		s.gc = procCPU(gc.proc.Pid())
	}
	s.machineBusy, s.machineAll = machineCPU()
	return s
}

// cpuPerObject is what the window between two samples cost, per processed object.
func cpuPerObject(a, b cpuSample, objects int) report.CPUPerObject {
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(objects) }
	c := report.CPUPerObject{APIServer: per(b.apiserver - a.apiserver), Etcd: per(b.etcd - a.etcd), GC: per(b.gc - a.gc), Bench: per(b.bench - a.bench)}
	if all := b.machineAll - a.machineAll; all > 0 {
		c.MachineBusy = float64(b.machineBusy-a.machineBusy) / float64(all)
	}
	return c
}

// cpuReport prints c.
func cpuReport(c report.CPUPerObject) string {
	return fmt.Sprintf("CPU ms/object apiserver %.3f etcd %.3f gc %.3f bench %.3f; machine busy %.0f%%",
		c.APIServer, c.Etcd, c.GC, c.Bench, 100*c.MachineBusy)
}

// procCPU is process pid's user+system CPU time so far (0 when unreadable).
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after its ')' are fixed.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	k, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	return time.Duration(u+k) * clockTick
}

// machineCPU is the machine's busy and total CPU time so far (/proc/stat's cpu line).
func machineCPU() (busy, all time.Duration) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	var total, idle int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return time.Duration(total-idle) * clockTick, time.Duration(total) * clockTick
}
