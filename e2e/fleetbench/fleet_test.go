//go:build e2e

package fleetbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// member is one member kube-apiserver on the suite's etcd, and its admin clients.
type member struct {
	name string
	cp   *harness.ControlPlane
	cs   framework.Clients
}

// startMembers starts n member kube-apiservers, one after another (each start is mostly CPU).
func startMembers(b *testing.B, prefix string, n int) []*member {
	b.Helper()
	var ms []*member
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		cp, err := harness.Start(context.Background(), harness.Options{BinDir: suite.CP.BinDir, SharedEtcd: suite.CP.EtcdURL, EtcdPrefix: "/fleetbench-" + name})
		if err != nil {
			b.Fatalf("member %s: %v", name, err)
		}
		b.Cleanup(func() { _ = cp.Stop() })
		ms = append(ms, &member{name: name, cp: cp, cs: framework.ClientsFor(b, cp.RestConfig())})
	}
	return ms
}

// register writes the kubeconfig file that makes a member named name of m in the fleet's
// directory (the --fleet-kubeconfig-dir provider).
func register(b *testing.B, dir, name string, m *member) {
	b.Helper()
	kc, err := os.ReadFile(m.cp.KubeconfigPath)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), kc, 0o600); err != nil {
		b.Fatal(err)
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func envInts(b *testing.B, name, def string) []int {
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want positive numbers separated by commas", name, v)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// apiWatches is the number of WATCH requests the members' kube-apiservers are serving.
func apiWatches(b *testing.B, ms []*member) float64 {
	b.Helper()
	var sum float64
	for _, m := range ms {
		raw, err := m.cs.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		parsed, err := framework.ParseMetrics(string(raw))
		if err != nil {
			b.Fatal(err)
		}
		v, _ := parsed.Value(`apiserver_longrunning_requests{verb="WATCH"}`)
		sum += v
	}
	return sum
}

// usage is what a process (or processes) holds: resident memory, Go heap in use, goroutines.
type usage struct{ rss, heap, stacks, goroutines float64 }

func (u usage) add(o usage) usage {
	return usage{u.rss + o.rss, u.heap + o.heap, u.stacks + o.stacks, u.goroutines + o.goroutines}
}

// measure samples pid's resident memory and srv's heap, goroutine stacks and goroutines five
// times a second apart and returns the medians (heap and stacks: 0 when srv does not export
// them).
func measure(b *testing.B, pid int, srv framework.Server) usage {
	b.Helper()
	var rss, heap, stacks, gs []float64
	for i := range 5 {
		if i > 0 {
			framework.MeasurementPause(time.Second)
		}
		r, err := harness.ResidentBytes(pid)
		if err != nil {
			b.Fatal(err)
		}
		m := framework.Scrape(b, srv)
		h, _ := m.Value("go_memstats_heap_inuse_bytes")
		st, _ := m.Value("go_memstats_stack_inuse_bytes")
		g, _ := m.Value("go_goroutines")
		rss, heap, stacks, gs = append(rss, float64(r)), append(heap, h), append(stacks, st), append(gs, g)
	}
	return usage{median(rss), median(heap), median(stacks), median(gs)}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// settle waits until srv's goroutine count holds still (three samples two seconds apart within
// 1%): members started, lists in, watches open.
func settle(b *testing.B, srv framework.Server, timeout time.Duration) {
	b.Helper()
	var last []float64
	framework.EventuallyEvery(b, 2*time.Second, timeout, "goroutines holding still", func() (bool, error) {
		m, err := framework.ReadMetrics(srv)
		if err != nil {
			return false, nil // a process starting hundreds of members may answer late
		}
		v, _ := m.Value("go_goroutines")
		last = append(last, v)
		if len(last) < 3 {
			return false, nil
		}
		w := last[len(last)-3:]
		return slices.Max(w) <= slices.Min(w)*1.01, nil
	})
}

// waitMembers waits until n members are up, scrapes that fail included (a process starting
// hundreds of members at once may answer late).
func waitMembers(b *testing.B, srv framework.Server, n int, timeout time.Duration) {
	b.Helper()
	framework.EventuallyEvery(b, 2*time.Second, timeout, fmt.Sprintf("%d members up", n), func() (bool, error) {
		m, err := framework.ReadMetrics(srv)
		if err != nil {
			return false, nil
		}
		v, _ := m.Value(`cascade_fleet_members{state="up"}`)
		return v == float64(n), nil
	})
}

// memberGETs is the GET requests cascade made to the members' API servers (every host but the
// fleet's host), from its client metrics.
func memberGETs(b *testing.B, casc framework.Server) float64 {
	b.Helper()
	host := strings.TrimPrefix(suite.CP.RestConfig().Host, "https://")
	var sum float64
	for _, s := range framework.Scrape(b, casc).Samples("rest_client_requests_total") {
		if s.Labels["method"] == "GET" && s.Labels["host"] != host {
			sum += s.Value
		}
	}
	return sum
}

// BenchmarkFleetCost: one fleet process, members added in steps (FLEET_SIZES, default
// 10,100,250; docs/fleet.md publishes up to what this machine holds), each member a
// registration of one of FLEET_APISERVERS kube-apiservers (default 3) holding FLEET_OBJECTS
// ConfigMaps (default 1,000), on a connection of its own. At each size, once the process has
// settled: resident memory, Go heap in use, goroutines, connections, the WATCH requests the
// members' API servers serve for it, the objects in the members' graphs, and over
// FLEET_IDLE_SECONDS (default 60) of idleness the GET requests to members per second (while
// idle, discovery's are the only periodic ones), and then resident memory, heap and stacks again
// (an idle process's stacks shrink at its collections, one at least every 2 minutes). Per
// member: the difference from the process with no member, divided by the members.
func BenchmarkFleetCost(b *testing.B) {
	sizes := envInts(b, "FLEET_SIZES", "10,100,250")
	ms := startMembers(b, "cost", envInt(b, "FLEET_APISERVERS", 3))
	objects := envInt(b, "FLEET_OBJECTS", 1000)
	for _, m := range ms {
		m.cs.CreateNamespace(b, "bench")
		var owner metav1.OwnerReference
		uids := m.cs.CreateConfigMaps(b, "bench", 1, 1, func(int) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}
		})
		owner = metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: uids[0]}
		m.cs.CreateConfigMaps(b, "bench", objects-1, 20, func(i int) *corev1.ConfigMap {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("obj-%05d", i)}, Data: map[string]string{"k": "v"}}
			if i%10 == 0 { // a tenth are dependents, so the graphs hold edges too
				cm.OwnerReferences = []metav1.OwnerReference{owner}
			}
			return cm
		})
	}
	idle := time.Duration(envInt(b, "FLEET_IDLE_SECONDS", 60)) * time.Second
	for b.Loop() {
		dir := b.TempDir()
		watches0 := apiWatches(b, ms)
		args := []string{"--fleet-kubeconfig-dir=" + dir, "--orphan-record-configmap="}
		profiles := os.Getenv("FLEET_PROFILE") // a directory: heap and goroutine profiles at each size
		if profiles != "" {
			args = append(args, "--enable-profiling")
		}
		casc := suite.StartCascade(b, args...)
		settle(b, casc, time.Minute)
		base := measure(b, casc.Pid(), casc)
		fmt.Printf("fleet-cost: no member: RSS %.0f MiB, heap %.0f MiB, %.0f goroutines\n", base.rss/(1<<20), base.heap/(1<<20), base.goroutines)
		fmt.Printf("| members | RSS MiB | heap MiB | goroutines | connections | watches | graph objects | per member: RSS MiB | heap MiB | stacks MiB | goroutines | watches | idle member GETs/s per 100 members |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		registered := 0
		for _, n := range sizes {
			start := time.Now()
			for ; registered < n; registered++ {
				register(b, dir, fmt.Sprintf("member-%04d", registered), ms[registered%len(ms)])
			}
			waitMembers(b, casc, n, 2*time.Minute+time.Duration(n)*time.Second)
			settle(b, casc, 5*time.Minute)
			up := time.Since(start)
			u := measure(b, casc.Pid(), casc)
			m := framework.Scrape(b, casc)
			conns, _ := m.Value("cascade_fleet_connections")
			objs, _ := m.Value("cascade_member_graph_objects")
			w := apiWatches(b, ms) - watches0
			g0 := memberGETs(b, casc)
			framework.MeasurementPause(idle)
			gets := (memberGETs(b, casc) - g0) / idle.Seconds()
			per := func(v, v0 float64) float64 { return (v - v0) / float64(n) }
			ui := measure(b, casc.Pid(), casc)
			fmt.Printf("fleet-cost: after %s idle, per member: RSS %.2f MiB, heap %.2f MiB, stacks %.2f MiB\n", idle,
				per(ui.rss, base.rss)/(1<<20), per(ui.heap, base.heap)/(1<<20), per(ui.stacks, base.stacks)/(1<<20))
			fmt.Printf("| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.0f | %.1f | %.3f |\n",
				n, u.rss/(1<<20), u.heap/(1<<20), u.goroutines, conns, w, objs,
				per(u.rss, base.rss)/(1<<20), per(u.heap, base.heap)/(1<<20), per(u.stacks, base.stacks)/(1<<20),
				per(u.goroutines, base.goroutines), w/float64(n), gets*100/float64(n))
			fmt.Printf("fleet-cost: %d members up and settled %.0fs after the step began\n", n, up.Seconds())
			if profiles != "" {
				for _, p := range []string{"heap", "goroutine"} {
					saveProfile(b, strings.TrimSuffix(casc.MetricsURL, "/metrics")+"/debug/pprof/"+p, filepath.Join(profiles, fmt.Sprintf("%s-%d.pprof", p, n)))
				}
			}
			b.ReportMetric(per(u.rss, base.rss)/(1<<20), "MiB-RSS/member")
			b.ReportMetric(per(u.goroutines, base.goroutines), "goroutines/member")
		}
		_ = casc.Stop(30 * time.Second)
	}
}

// fetch returns the body served at url (the benchmark's own cascade's profiles).
func fetch(b *testing.B, url string) []byte {
	b.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // the benchmark's own cascade on loopback
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// saveProfile writes the pprof profile at url to path.
func saveProfile(b *testing.B, url, path string) {
	b.Helper()
	body := fetch(b, url)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		b.Fatal(err)
	}
}

// benchProcess is a process measured side by side: cascade or kube-controller-manager.
type benchProcess interface {
	framework.Server
	Pid() int
	Stop(grace time.Duration) error
}

// settledUsage waits until each process has settled, sums what they hold, then stops them.
func settledUsage[P benchProcess](b *testing.B, procs ...P) usage {
	b.Helper()
	var sum usage
	for _, p := range procs {
		settle(b, p, 5*time.Minute)
	}
	for _, p := range procs {
		sum = sum.add(measure(b, p.Pid(), p))
	}
	for _, p := range procs {
		_ = p.Stop(30 * time.Second)
	}
	return sum
}

// BenchmarkFleetSideBySide: FLEET_SIDE members (default 10) over FLEET_APISERVERS
// kube-apiservers, collected three ways one after the other, each measured once settled:
// one cascade in fleet mode; one cascade process per member; one kube-controller-manager per
// member running only its garbage collector. Resident memory and goroutines, summed.
func BenchmarkFleetSideBySide(b *testing.B) {
	n := envInt(b, "FLEET_SIDE", 10)
	ms := startMembers(b, "side", envInt(b, "FLEET_APISERVERS", 3))
	for b.Loop() {
		// One fleet process.
		dir := b.TempDir()
		for i := range n {
			register(b, dir, fmt.Sprintf("member-%02d", i), ms[i%len(ms)])
		}
		casc := suite.StartCascade(b, "--fleet-kubeconfig-dir="+dir, "--orphan-record-configmap=")
		waitMembers(b, casc, n, 5*time.Minute)
		settle(b, casc, 5*time.Minute)
		fleet := measure(b, casc.Pid(), casc)
		_ = casc.Stop(30 * time.Second)

		// One cascade per member.
		var procs []*harness.Cascade
		for i := range n {
			c := framework.StartReady(b, ms[i%len(ms)].cp, fmt.Sprintf("single-%02d", i), suite.CascadeBin, "--leader-elect=false", "--orphan-record-configmap=")
			procs = append(procs, c)
		}
		single := settledUsage(b, procs...)

		// One kube-controller-manager (garbage collector only) per member.
		var ks []*harness.KubeControllerManager
		for i := range n {
			k, err := ms[i%len(ms)].cp.StartKubeControllerManager(fmt.Sprintf("kcm-%02d", i), harness.KCMOptions{})
			if err != nil {
				b.Fatal(err)
			}
			ks = append(ks, k)
		}
		for _, k := range ks {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			err := k.WaitMonitorsSynced(ctx)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
		kcm := settledUsage(b, ks...)
		fmt.Printf("| %d members | RSS MiB | goroutines |\n|---|---|---|\n", n)
		for _, r := range []struct {
			name string
			u    usage
		}{{"cascade, fleet mode (one process)", fleet}, {fmt.Sprintf("cascade, %d processes", n), single}, {fmt.Sprintf("kube-controller-manager (garbage collector only), %d processes", n), kcm}} {
			fmt.Printf("| %s | %.0f | %.0f |\n", r.name, r.u.rss/(1<<20), r.u.goroutines)
		}
		b.ReportMetric(fleet.rss/(1<<20), "fleet-MiB")
		b.ReportMetric(single.rss/(1<<20), "processes-MiB")
		b.ReportMetric(kcm.rss/(1<<20), "kcm-MiB")
	}
}

// quietDriver deletes an owner in its member every second until ctx ends and records how long
// its dependent took to go (owner deleted to the dependent's DELETED event).
func quietDriver(ctx context.Context, m *member, tag string, out chan<- time.Duration) error {
	ns := "quiet"
	w, err := m.cs.Kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	var mu sync.Mutex
	deleted := map[string]time.Time{}
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Deleted || !ok || !strings.HasPrefix(cm.Name, tag+"-dep-") {
				continue
			}
			mu.Lock()
			at, ok := deleted[strings.TrimPrefix(cm.Name, tag+"-dep-")]
			mu.Unlock()
			if ok {
				out <- time.Since(at)
			}
		}
	}()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		id := strconv.Itoa(i)
		owner, err := m.cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tag + "-owner-" + id}}, metav1.CreateOptions{})
		if err != nil {
			return ignoreDone(ctx, err)
		}
		ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
		if _, err := m.cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: tag + "-dep-" + id, OwnerReferences: []metav1.OwnerReference{ref}}}, metav1.CreateOptions{}); err != nil {
			return ignoreDone(ctx, err)
		}
		time.Sleep(200 * time.Millisecond) // the dependent reached cascade's graph
		bg := metav1.DeletePropagationBackground
		mu.Lock()
		deleted[id] = time.Now()
		mu.Unlock()
		if err := m.cs.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			return ignoreDone(ctx, err)
		}
	}
}

func ignoreDone(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// quietRun runs quietDriver in every quiet member until stop returns, and returns every latency.
func quietRun(b *testing.B, quiet []*member, tag string, stop func()) []time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan time.Duration, 1<<16)
	var wg sync.WaitGroup
	errs := make(chan error, len(quiet))
	for _, m := range quiet {
		wg.Go(func() { errs <- quietDriver(ctx, m, tag, out) })
	}
	stop()
	time.Sleep(5 * time.Second) // the last owners' dependents go
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	close(out)
	var lat []time.Duration
	for d := range out {
		lat = append(lat, d)
	}
	slices.Sort(lat)
	return lat
}

func percentile(lat []time.Duration, p int) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, len(lat)*p/100)]
}

// ownedPairs creates n owners (owner-00000...) in namespace ns of m, each with a dependent
// (dep-00000...).
func ownedPairs(b *testing.B, m *member, ns string, n int) {
	b.Helper()
	owners := m.cs.CreateConfigMaps(b, ns, n, 20, func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("owner-%05d", i)}}
	})
	m.cs.CreateConfigMaps(b, ns, n, 20, func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("dep-%05d", i), OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("owner-%05d", i), UID: owners[i]},
		}}}
	})
}

// deleteOwners deletes the n owners of ownedPairs in the background, 20 at a time.
func deleteOwners(b *testing.B, m *member, ns string, n int) {
	b.Helper()
	bg := metav1.DeletePropagationBackground
	if err := framework.Parallel(n, 20, func(i int) error {
		err := m.cs.Kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), fmt.Sprintf("owner-%05d", i), metav1.DeleteOptions{PropagationPolicy: &bg})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFleetFairness (issue 33.4): one busy member deletes FLEET_BURST owners (default
// 10,000), each with a dependent, while FLEET_QUIET quiet members (default 4, each a
// kube-apiserver of its own: 20 do not fit on 2 cores beside the rest) each delete one owner a
// second. The quiet members' time from owner deleted to dependent gone, p50 and p99, without the
// burst (FLEET_WINDOW seconds, default 40) and during it, side by side in one run; every member's
// client budget is FLEET_QPS (default 200, burst twice that) so that the burst is collected in
// about a minute.
func BenchmarkFleetFairness(b *testing.B) {
	quietN := envInt(b, "FLEET_QUIET", 4)
	burst := envInt(b, "FLEET_BURST", 10000)
	window := time.Duration(envInt(b, "FLEET_WINDOW", 40)) * time.Second
	qps := envInt(b, "FLEET_QPS", 200)
	ms := startMembers(b, "fair", quietN+1)
	busy, quiet := ms[0], ms[1:]
	busy.cs.CreateNamespace(b, "busy")
	for _, m := range quiet {
		m.cs.CreateNamespace(b, "quiet")
	}
	dir := b.TempDir()
	register(b, dir, "busy", busy)
	for i, m := range quiet {
		register(b, dir, fmt.Sprintf("quiet-%02d", i), m)
	}
	casc := suite.StartCascade(b, "--fleet-kubeconfig-dir="+dir, "--orphan-record-configmap=",
		"--fleet-member-qps="+strconv.Itoa(qps), "--fleet-member-burst="+strconv.Itoa(2*qps))
	waitMembers(b, casc, quietN+1, 5*time.Minute)
	for b.Loop() {
		alone := quietRun(b, quiet, "alone", func() { time.Sleep(window) })

		ownedPairs(b, busy, "busy", burst)
		framework.EventuallyEvery(b, 2*time.Second, 5*time.Minute, "the burst's objects in the busy member's graph", func() (bool, error) {
			v, _ := framework.Scrape(b, casc).Value(`cascade_member_graph_objects{member="busy"}`)
			return v >= float64(2*burst), nil
		})
		var collected time.Duration
		during := quietRun(b, quiet, "burst", func() {
			start := time.Now()
			deleteOwners(b, busy, "busy", burst)
			framework.EventuallyEvery(b, 2*time.Second, 30*time.Minute, "the burst's dependents gone", func() (bool, error) {
				n, err := busy.cs.CountCMs("busy", "dep-")
				return n == 0, err
			})
			collected = time.Since(start)
			if rest := window - collected; rest > 0 {
				time.Sleep(rest)
			}
		})
		fmt.Printf("fleet-fairness: the busy member's %d owners deleted and their dependents collected in %.1fs\n", burst, collected.Seconds())
		fmt.Printf("| quiet members' owner deleted to dependent gone | samples | p50 | p99 |\n|---|---|---|---|\n")
		fmt.Printf("| without the burst | %d | %v | %v |\n", len(alone), percentile(alone, 50).Round(time.Millisecond), percentile(alone, 99).Round(time.Millisecond))
		fmt.Printf("| during the burst | %d | %v | %v |\n", len(during), percentile(during, 50).Round(time.Millisecond), percentile(during, 99).Round(time.Millisecond))
		ratio := float64(percentile(during, 99)) / float64(percentile(alone, 99))
		fmt.Printf("fleet-fairness: p99 during the burst is %.2fx its value without it (goal: at most 2)\n", ratio)
		b.ReportMetric(ratio, "p99-ratio")
		b.ReportMetric(collected.Seconds(), "burst-s")
	}
}

// BenchmarkFleetHungMembers (issue 40.3): FLEET_QUIET healthy members (default 4, each a
// kube-apiserver of its own) delete one owner a second each, first alone in the fleet, then
// beside FLEET_HUNG members (default 10) whose API server hangs: all registrations of one more
// kube-apiserver that, with FLEET_HUNG_OWNERS owners (default 200) of its own just deleted and
// their dependents' collection under way, is stopped with SIGSTOP (it accepts connections and
// answers nothing, as a frozen VM does), so every hung member has work in flight and more
// queued. The healthy members' time from owner deleted to dependent gone, p50 and p99, over
// FLEET_WINDOW seconds (default 40) each way, side by side in one run. The pool is the
// default's (20 slots), each member's client budget FLEET_QPS (default 200).
func BenchmarkFleetHungMembers(b *testing.B) {
	quietN := envInt(b, "FLEET_QUIET", 4)
	hungN := envInt(b, "FLEET_HUNG", 10)
	owners := envInt(b, "FLEET_HUNG_OWNERS", 200)
	window := time.Duration(envInt(b, "FLEET_WINDOW", 40)) * time.Second
	qps := envInt(b, "FLEET_QPS", 200)
	ms := startMembers(b, "calm", quietN)
	hung := startMembers(b, "hung", 1)[0]
	// SIGCONT before the control plane's own cleanup stops it (cleanups run last first).
	b.Cleanup(func() { _ = hung.cp.APIServer.Signal(syscall.SIGCONT) })
	for _, m := range ms {
		m.cs.CreateNamespace(b, "quiet")
	}
	hung.cs.CreateNamespace(b, "hung")
	dir := b.TempDir()
	for i, m := range ms {
		register(b, dir, fmt.Sprintf("quiet-%02d", i), m)
	}
	casc := suite.StartCascade(b, "--fleet-kubeconfig-dir="+dir, "--orphan-record-configmap=",
		"--fleet-member-qps="+strconv.Itoa(qps), "--fleet-member-burst="+strconv.Itoa(2*qps))
	waitMembers(b, casc, quietN, 5*time.Minute)
	for b.Loop() {
		alone := quietRun(b, ms, "alone", func() { time.Sleep(window) })

		ownedPairs(b, hung, "hung", owners)
		for i := range hungN {
			register(b, dir, fmt.Sprintf("hung-%02d", i), hung)
		}
		waitMembers(b, casc, quietN+hungN, 5*time.Minute)
		framework.EventuallyEvery(b, time.Second, 2*time.Minute, "the hung members' graphs hold the owners", func() (bool, error) {
			m := framework.Scrape(b, casc)
			for i := range hungN {
				if v, _ := m.Value(fmt.Sprintf(`cascade_member_graph_objects{member="hung-%02d"}`, i)); v < float64(2*owners) {
					return false, nil
				}
			}
			return true, nil
		})
		deleteOwners(b, hung, "hung", owners)
		time.Sleep(300 * time.Millisecond) // the deletions reach the hung members' graphs; collection starts
		if err := hung.cp.APIServer.Signal(syscall.SIGSTOP); err != nil {
			b.Fatal(err)
		}
		during := quietRun(b, ms, "hung", func() { time.Sleep(window) })
		up, _ := framework.Scrape(b, casc).Value(`cascade_fleet_members{state="up"}`)
		restarts, _ := framework.Scrape(b, casc).Value("cascade_fleet_member_restarts_total")
		if err := hung.cp.APIServer.Signal(syscall.SIGCONT); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("fleet-hung: %d members registered on one kube-apiserver stopped with SIGSTOP 300ms after %d owners were deleted; at the end %v members up, %v member restarts\n",
			hungN, owners, up, restarts)
		fmt.Printf("| healthy members' owner deleted to dependent gone | samples | p50 | p99 |\n|---|---|---|---|\n")
		fmt.Printf("| no hung member | %d | %v | %v |\n", len(alone), percentile(alone, 50).Round(time.Millisecond), percentile(alone, 99).Round(time.Millisecond))
		fmt.Printf("| beside %d hung members | %d | %v | %v |\n", hungN, len(during), percentile(during, 50).Round(time.Millisecond), percentile(during, 99).Round(time.Millisecond))
		ratio := float64(percentile(during, 99)) / float64(percentile(alone, 99))
		fmt.Printf("fleet-hung: p99 beside the hung members is %.2fx its value without them (goal: at most 2)\n", ratio)
		b.ReportMetric(ratio, "p99-ratio")
	}
}

// collectGarbage has cascade run a garbage collection (its /debug/pprof/heap with gc=1, served
// with --enable-profiling), so that the heap read next holds live objects only.
func collectGarbage(b *testing.B, casc *harness.Cascade) {
	b.Helper()
	saveProfile(b, strings.TrimSuffix(casc.MetricsURL, "/metrics")+"/debug/pprof/heap?gc=1", filepath.Join(b.TempDir(), "heap.pprof"))
}

// liveUsage is cascade's goroutines, live heap (the bytes of reachable objects after a garbage
// collection, from its heap profile: what removed members could leave behind; the heap_alloc
// gauge read after that collection also counts what was allocated since, the profile's own
// writing included), heap in use (the spans holding them, which counts fragmentation too) and,
// of the live heap, the goroutine descriptors (goroutineDescriptors), once settled.
func liveUsage(b *testing.B, casc *harness.Cascade) (goroutines, heap, inuse, descriptors float64) {
	b.Helper()
	settle(b, casc, 5*time.Minute)
	// Twice, a second apart: what a collection frees can hold more until the cleanups it
	// queued ran (client-go's transport cache drops a transport's entry in one).
	collectGarbage(b, casc)
	framework.MeasurementPause(time.Second)
	collectGarbage(b, casc)
	m := framework.Scrape(b, casc)
	goroutines, _ = m.Value("go_goroutines")
	inuse, _ = m.Value("go_memstats_heap_inuse_bytes")
	descriptors, heap = goroutineDescriptors(b, casc)
	return goroutines, heap, inuse, descriptors
}

// goroutineDescriptors estimates, from cascade's heap profile (text form, after a collection),
// the live heap held by goroutine descriptors: the runtime's g structures (runtime.malg) and
// its list of them (runtime.allgadd). Go never frees a goroutine's descriptor once the
// goroutine ended (golang/go#9869): it keeps it for the next goroutine, so they stay at the
// process's high-water mark of goroutines, however many are left. Each record is scaled by
// its sampling probability, as pprof does; the benchmark runs cascade with
// GODEBUG=memprofilerate=512, so that nearly every descriptor is sampled.
func goroutineDescriptors(b *testing.B, casc *harness.Cascade) (descriptors, live float64) {
	b.Helper()
	body := fetch(b, strings.TrimSuffix(casc.MetricsURL, "/metrics")+"/debug/pprof/heap?gc=1&debug=1")
	descriptors, live, err := framework.GoroutineDescriptorBytes(string(body))
	if err != nil {
		b.Fatal(err)
	}
	return descriptors, live
}

// BenchmarkFleetChurn (issue 33.1): members added and removed FLEET_CYCLES times (default
// 1,000), FLEET_BATCH at a time (default 10), each a registration of one kube-apiserver; the
// process's goroutines and live heap (after a garbage collection) before the first cycle and
// after the last, right after it and FLEET_CHURN_QUIET seconds later (default 120), with one
// member registered throughout. Goal: both back within 2%. The live heap is also given without
// the goroutine descriptors (goroutineDescriptors), which the runtime keeps at the process's
// high-water mark of goroutines: what is left beyond them is what churn leaves. Both from the
// heap profile, after a collection.
func BenchmarkFleetChurn(b *testing.B) {
	cycles := envInt(b, "FLEET_CYCLES", 1000)
	batch := envInt(b, "FLEET_BATCH", 10)
	ms := startMembers(b, "churn", 1)
	for b.Loop() {
		dir := b.TempDir()
		register(b, dir, "steady", ms[0])
		casc := framework.StartReadyWith(b, suite.CP, fmt.Sprintf("churn-%d", time.Now().UnixNano()), suite.CascadeBin,
			harness.ProcessOptions{Env: []string{"GODEBUG=memprofilerate=512"}},
			"--fleet-kubeconfig-dir="+dir, "--orphan-record-configmap=", "--enable-profiling")
		waitMembers(b, casc, 1, 2*time.Minute)
		g0, h0, i0, d0 := liveUsage(b, casc)
		profiles := os.Getenv("FLEET_PROFILE") // a directory: live heap profiles before and after
		if profiles != "" {
			saveProfile(b, strings.TrimSuffix(casc.MetricsURL, "/metrics")+"/debug/pprof/heap?gc=1", filepath.Join(profiles, "churn-before.pprof"))
		}
		start := time.Now()
		for done := 0; done < cycles; done += batch {
			n := min(batch, cycles-done)
			for i := range n {
				register(b, dir, fmt.Sprintf("churn-%d", i), ms[0])
			}
			waitMembers(b, casc, 1+n, 5*time.Minute)
			for i := range n {
				if err := os.Remove(filepath.Join(dir, fmt.Sprintf("churn-%d", i))); err != nil {
					b.Fatal(err)
				}
			}
			framework.EventuallyEvery(b, 500*time.Millisecond, 5*time.Minute, "the batch's members gone", func() (bool, error) {
				m, err := framework.ReadMetrics(casc)
				if err != nil {
					return false, nil
				}
				up, _ := m.Value(`cascade_fleet_members{state="up"}`)
				down, _ := m.Value(`cascade_fleet_members{state="down"}`)
				return up+down == 1, nil
			})
		}
		ga, ha, ia, da := liveUsage(b, casc)
		fmt.Printf("fleet-churn: right after the last removal: goroutines %.0f, live heap %.2f MiB (goroutine descriptors %.2f MiB), heap in use %.1f MiB\n", ga, ha/(1<<20), da/(1<<20), ia/(1<<20))
		// The last members' connections are held by their transports' timers for a while after
		// they are closed (x/net/http2's health check after its 30 s read-idle timeout, client-go's
		// 90 s idle-connection timeout): what is left after them is what churn leaves.
		framework.MeasurementPause(time.Duration(envInt(b, "FLEET_CHURN_QUIET", 120)) * time.Second)
		g1, h1, i1, d1 := liveUsage(b, casc)
		if profiles != "" {
			saveProfile(b, strings.TrimSuffix(casc.MetricsURL, "/metrics")+"/debug/pprof/heap?gc=1", filepath.Join(profiles, "churn-after.pprof"))
		}
		pct := func(before, after float64) float64 { return 100 * (after - before) / before }
		fmt.Printf("fleet-churn: %d add/remove cycles (%d at a time) in %.0fs: goroutines %.0f -> %.0f (%+.1f%%), live heap %.2f -> %.2f MiB (%+.1f%%), of which goroutine descriptors %.2f -> %.2f MiB; without them %.2f -> %.2f MiB (%+.1f%%); heap in use %.1f -> %.1f MiB (%+.1f%%)\n",
			cycles, batch, time.Since(start).Seconds(), g0, g1, pct(g0, g1), h0/(1<<20), h1/(1<<20), pct(h0, h1),
			d0/(1<<20), d1/(1<<20), (h0-d0)/(1<<20), (h1-d1)/(1<<20), pct(h0-d0, h1-d1), i0/(1<<20), i1/(1<<20), pct(i0, i1))
		b.ReportMetric(pct(g0, g1), "goroutines-%")
		b.ReportMetric(pct(h0, h1), "heap-%")
		b.ReportMetric(pct(h0-d0, h1-d1), "heap-without-descriptors-%")
		_ = casc.Stop(30 * time.Second)
	}
}

// shardsHeld is the shards the replicas hold with their gates open (cascade_fleet_shards_held
// summed; a replica that does not answer counts none).
func shardsHeld(replicas []*harness.Cascade) int {
	n := 0
	for _, r := range replicas {
		m, err := framework.ReadMetrics(r)
		if err != nil {
			continue
		}
		v, _ := m.Value("cascade_fleet_shards_held")
		n += int(v)
	}
	return n
}

// BenchmarkFleetShards (issue 34.5): FLEET_SHARD_MEMBERS members (default 6, each a
// kube-apiserver of its own) in 6 shards, collected by 1, 2 and 3 replicas in turn: each time
// FLEET_SHARD_OBJECTS owners (default 2,000 per member), each with a dependent, are deleted
// at once, and the dependents collected per second over the whole fleet and each replica's
// resident memory are measured; with 3 replicas, one is killed and the time until the others
// hold (gates open) every shard again is measured. Every member's budget is FLEET_QPS (default
// 500), so that the replicas' CPU, not the members' budgets, bounds the rate.
func BenchmarkFleetShards(b *testing.B) {
	n := envInt(b, "FLEET_SHARD_MEMBERS", 6)
	objects := envInt(b, "FLEET_SHARD_OBJECTS", 2000)
	qps := envInt(b, "FLEET_QPS", 500)
	ms := startMembers(b, "shards", n)
	dir := b.TempDir()
	for i, m := range ms {
		m.cs.CreateNamespace(b, "bench")
		register(b, dir, fmt.Sprintf("member-%d", i), m)
	}
	ns := suite.Clients(b).NewNamespace(b)
	const lease = 4 * time.Second
	flags := []string{"--fleet-kubeconfig-dir=" + dir, "--fleet-shards=6", "--orphan-record-configmap=",
		"--leader-elect-resource-namespace=" + ns, "--leader-elect-lease-duration=" + lease.String(), "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s",
		"--fleet-member-qps=" + strconv.Itoa(qps), "--fleet-member-burst=" + strconv.Itoa(2*qps)}
	for b.Loop() {
		fmt.Printf("| replicas | dependents collected per second | resident MiB per replica |\n|---|---|---|\n")
		var replicas []*harness.Cascade
		for r := 1; r <= 3; r++ {
			replicas = append(replicas, framework.StartReady(b, suite.CP, fmt.Sprintf("shards-%d-%d", r, time.Now().Unix()), suite.CascadeBin, flags...))
			framework.EventuallyEvery(b, 500*time.Millisecond, 3*time.Minute, "every shard held", func() (bool, error) {
				return shardsHeld(replicas) == 6, nil
			})
			for _, rep := range replicas {
				settle(b, rep, 5*time.Minute)
			}
			prefix := fmt.Sprintf("r%d", r)
			for _, m := range ms {
				owners := m.cs.CreateConfigMaps(b, "bench", objects, 20, func(i int) *corev1.ConfigMap {
					return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-owner-%05d", prefix, i)}}
				})
				m.cs.CreateConfigMaps(b, "bench", objects, 20, func(i int) *corev1.ConfigMap {
					return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-dep-%05d", prefix, i), OwnerReferences: []metav1.OwnerReference{
						{APIVersion: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("%s-owner-%05d", prefix, i), UID: owners[i]},
					}}}
				})
			}
			framework.EventuallyEvery(b, time.Second, 5*time.Minute, "the objects in the members' graphs", func() (bool, error) {
				var sum float64
				for _, rep := range replicas {
					m, err := framework.ReadMetrics(rep)
					if err != nil {
						return false, nil
					}
					v, _ := m.Value("cascade_member_graph_objects")
					sum += v
				}
				return sum >= float64(2*objects*n), nil
			})
			var rss []float64
			for _, rep := range replicas {
				v, err := harness.ResidentBytes(rep.Pid())
				if err != nil {
					b.Fatal(err)
				}
				rss = append(rss, float64(v)/(1<<20))
			}
			start := time.Now()
			bg := metav1.DeletePropagationBackground
			for _, m := range ms {
				if err := framework.Parallel(objects, 20, func(i int) error {
					return m.cs.Kube.CoreV1().ConfigMaps("bench").Delete(context.Background(), fmt.Sprintf("%s-owner-%05d", prefix, i), metav1.DeleteOptions{PropagationPolicy: &bg})
				}); err != nil {
					b.Fatal(err)
				}
			}
			framework.EventuallyEvery(b, time.Second, 30*time.Minute, "every dependent collected", func() (bool, error) {
				for _, m := range ms {
					left, err := m.cs.CountCMs("bench", prefix+"-dep-")
					if err != nil || left > 0 {
						return false, err
					}
				}
				return true, nil
			})
			rate := float64(objects*n) / time.Since(start).Seconds()
			fmt.Printf("| %d | %.0f | %.0f |\n", r, rate, median(rss))
			b.ReportMetric(rate, fmt.Sprintf("collected/s-%d-replicas", r))
		}
		killed := time.Now()
		if err := replicas[0].Signal(syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		framework.EventuallyEvery(b, 100*time.Millisecond, 3*time.Minute, "the others hold every shard", func() (bool, error) {
			return shardsHeld(replicas[1:]) == 6, nil
		})
		recovered := time.Since(killed)
		fmt.Printf("fleet-shards: a killed replica's shards held again (writers started) by the others %.1fs after the kill (lease duration %v, renew deadline 3s)\n", recovered.Seconds(), lease)
		b.ReportMetric(recovered.Seconds(), "recovery-s")
	}
}
