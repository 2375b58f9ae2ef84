//go:build e2e

package scale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// BenchmarkScale loads SCALE_OBJECTS ConfigMaps into one namespace (1 KiB of seeded random data
// and 4 labels each; SCALE_OWNED_PERCENT of them, the last ones created, are dependents, ten to
// an owner, so their owners are a tenth as many and all exist: nothing is garbage), then, for
// each subject in turn (kube-controller-manager with only its GC, and cascade), with the same
// client budget and concurrency:
//
//   - starts the process and times process start → graph synced (cascade: /readyz answers;
//     in-tree: its monitors synced and its graph-changes queue drained), polled every 50 ms;
//   - reads its peak resident set at that moment (VmHWM: the high-water mark of the initial
//     lists and the graph being built), then, after SCALE_SETTLE seconds, its resident set
//     (VmRSS) and Go heap (go_memstats_heap_alloc_bytes), the median of 5 samples a second
//     apart;
//   - deletes every owner (background) and times the first owner DELETE sent → the last
//     dependent's deletion seen on a watch, and counts kube-apiserver's ConfigMap requests in
//     that window (less the owner deletions) per collected object;
//   - stops the process; what was collected is recreated before the next subject, so that each
//     meets the same cluster (a SCALE_DIR left collected is restored at the next run's start).
//
// It writes every measurement to SCALE_OUT (default docs/scale/<objects>.json) and prints a
// table. It reports and never fails on a figure: the machine is shared and noisy. Environment:
//
//	SCALE_OBJECTS=100000        objects to load (10^6: about half an hour to load here)
//	SCALE_OWNED_PERCENT=10      share of the objects that have an owner
//	SCALE_DIR=path              keep the control plane (etcd's data) there; a later run with
//	                            the same layout reuses the loaded objects
//	SCALE_SUBJECTS=in-tree,cascade
//	SCALE_RUNS=1                runs (subjects alternate their order from run to run)
//	SCALE_QPS=0                 client QPS of both collectors (0: unthrottled); SCALE_BURST=30
//	SCALE_WORKERS=20            cascade --workers, in-tree --concurrent-gc-syncs
//	SCALE_LOAD_WORKERS=64       concurrent creates while loading
//	SCALE_COLLECT=1             0 skips the collection (memory and sync only)
//	SCALE_SETTLE=10             seconds between sync and the memory samples
//	SCALE_CASCADE_ARGS=         extra cascade flags, space-separated
//	SCALE_CASCADE_ENV=          extra environment for cascade, comma-separated K=V
//	                            (KUBE_FEATURE_WatchListClient=false, GOGC=50, ...)
//	SCALE_PROFILE=dir           cascade runs with --enable-profiling; CPU profiles of its sync
//	                            and of its collection go to dir
//	SCALE_SEED=1
func BenchmarkScale(b *testing.B) {
	cfg, err := configFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	if cfg.Out == "" {
		cfg.Out = filepath.Join(root, "docs", "scale", strconv.Itoa(cfg.Objects)+".json")
	}
	s := &scale{b: b, cfg: cfg, started: time.Now()}
	s.clients()
	s.load()
	for run := 1; run <= cfg.Runs; run++ {
		subjects := slices.Clone(cfg.Subjects)
		if run%2 == 0 {
			slices.Reverse(subjects)
		}
		for _, subject := range subjects {
			if s.collected { // what the last measurement collected comes back first
				s.restore()
				s.collected = false
			}
			m := s.measure(subject, run)
			s.results = append(s.results, m)
			s.print(m)
			if err := s.write(root); err != nil {
				b.Fatal(err)
			}
		}
	}
	s.summary()
	fmt.Printf("scale: wrote %s (%s)\n", cfg.Out, time.Since(s.started).Round(time.Second))
}

// Config is the benchmark's configuration, recorded with its results.
type Config struct {
	Objects          int               `json:"objects"`
	OwnedPercent     int               `json:"ownedPercent"`
	DependentsPerOwn int               `json:"dependentsPerOwner"`
	DataBytes        int               `json:"dataBytes"`
	Labels           int               `json:"labels"`
	Seed             uint64            `json:"seed"`
	Subjects         []string          `json:"subjects"`
	Runs             int               `json:"runs"`
	QPS              float64           `json:"qps"`
	Burst            int               `json:"burst"`
	Workers          int               `json:"workers"`
	LoadWorkers      int               `json:"loadWorkers"`
	Collect          bool              `json:"collect"`
	SettleSeconds    int               `json:"settleSeconds"`
	CascadeArgs      []string          `json:"cascadeArgs,omitempty"`
	CascadeEnv       []string          `json:"cascadeEnv,omitempty"`
	Out              string            `json:"-"`
	Versions         map[string]string `json:"versions"`
}

// Measurement is one subject's run.
type Measurement struct {
	Subject string `json:"subject"`
	Run     int    `json:"run"`
	// SyncSeconds is process start → graph synced.
	SyncSeconds float64 `json:"syncSeconds"`
	// PeakRSSBytes is VmHWM at sync: the most the process held while listing and building.
	PeakRSSBytes float64 `json:"peakRSSBytes"`
	// RSSBytes and HeapBytes are after SCALE_SETTLE seconds (median of 5 samples).
	RSSBytes  float64 `json:"rssBytes"`
	HeapBytes float64 `json:"heapBytes"`
	// PeakRSSSettledBytes is VmHWM after the samples: a rise past PeakRSSBytes means the
	// peak came after sync.
	PeakRSSSettledBytes float64 `json:"peakRSSSettledBytes"`
	Collected           int     `json:"collected,omitempty"`
	CollectSeconds      float64 `json:"collectSeconds,omitempty"`
	CollectPerSecond    float64 `json:"collectPerSecond,omitempty"`
	RequestsPerObject   float64 `json:"requestsPerObject,omitempty"`
	RequestDetail       string  `json:"requestDetail,omitempty"`
	Error               string  `json:"error,omitempty"`
}

type scale struct {
	b       *testing.B
	cfg     Config
	started time.Time
	cs      framework.Clients
	fast    kubernetes.Interface // protobuf, unthrottled: loading and deleting
	meta    metadata.Interface
	ownUIDs []types.UID // owner i's current UID
	results []Measurement
	// collected is set once a measurement deleted the owners and dependents: they are
	// recreated before the next one (and left deleted after the last).
	collected bool
}

const ns = "scale"

// layoutAnnotation on the namespace records what was loaded, so that a reused SCALE_DIR is
// loaded only once and never measured as another layout.
const layoutAnnotation = "cascade.dev/scale-layout"

func configFromEnv() (Config, error) {
	cfg := Config{
		Objects: 100000, OwnedPercent: 10, DependentsPerOwn: 10, DataBytes: 1024, Labels: 4, Seed: 1,
		Subjects: []string{"in-tree", "cascade"}, Runs: 1, Burst: 30, Workers: 20, LoadWorkers: 64,
		Collect: true, SettleSeconds: 10,
	}
	ints := []struct {
		env string
		dst *int
		min int
	}{
		{"SCALE_OBJECTS", &cfg.Objects, 100}, {"SCALE_OWNED_PERCENT", &cfg.OwnedPercent, 0},
		{"SCALE_RUNS", &cfg.Runs, 1}, {"SCALE_BURST", &cfg.Burst, 1}, {"SCALE_WORKERS", &cfg.Workers, 1},
		{"SCALE_LOAD_WORKERS", &cfg.LoadWorkers, 1}, {"SCALE_SETTLE", &cfg.SettleSeconds, 0},
	}
	for _, v := range ints {
		s := os.Getenv(v.env)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < v.min {
			return cfg, fmt.Errorf("%s=%q: want an integer >= %d", v.env, s, v.min)
		}
		*v.dst = n
	}
	if cfg.OwnedPercent > 90 {
		return cfg, fmt.Errorf("SCALE_OWNED_PERCENT=%d: at most 90 (owners are a tenth of the owned)", cfg.OwnedPercent)
	}
	if s := os.Getenv("SCALE_QPS"); s != "" {
		q, err := strconv.ParseFloat(s, 64)
		if err != nil || q < 0 {
			return cfg, fmt.Errorf("SCALE_QPS=%q: want a number >= 0 (0: unthrottled)", s)
		}
		cfg.QPS = q
	}
	if s := os.Getenv("SCALE_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cfg, fmt.Errorf("SCALE_SEED=%q: %v", s, err)
		}
		cfg.Seed = seed
	}
	if s := os.Getenv("SCALE_SUBJECTS"); s != "" {
		cfg.Subjects = nil
		for _, sub := range strings.Split(s, ",") {
			sub = strings.TrimSpace(sub)
			if sub != "in-tree" && sub != "cascade" {
				return cfg, fmt.Errorf("SCALE_SUBJECTS: unknown subject %q (in-tree, cascade)", sub)
			}
			cfg.Subjects = append(cfg.Subjects, sub)
		}
	}
	cfg.Collect = os.Getenv("SCALE_COLLECT") != "0"
	cfg.CascadeArgs = strings.Fields(os.Getenv("SCALE_CASCADE_ARGS"))
	if s := os.Getenv("SCALE_CASCADE_ENV"); s != "" {
		for _, kv := range strings.Split(s, ",") {
			if !strings.Contains(kv, "=") {
				return cfg, fmt.Errorf("SCALE_CASCADE_ENV: %q is not K=V", kv)
			}
			cfg.CascadeEnv = append(cfg.CascadeEnv, strings.TrimSpace(kv))
		}
	}
	cfg.Out = os.Getenv("SCALE_OUT")
	return cfg, nil
}

// The layout: objects [0, owners) are the owners, [firstDependent, Objects) the dependents,
// dependent d owned by owner (d-firstDependent)/DependentsPerOwn.
func (s *scale) owned() int { return s.cfg.Objects * s.cfg.OwnedPercent / 100 }
func (s *scale) owners() int {
	return (s.owned() + s.cfg.DependentsPerOwn - 1) / s.cfg.DependentsPerOwn
}
func (s *scale) firstDependent() int { return s.cfg.Objects - s.owned() }
func name(i int) string              { return fmt.Sprintf("s-%07d", i) }

func (s *scale) layout() string {
	return fmt.Sprintf("v1 objects=%d owned=%d%% perOwner=%d data=%d labels=%d seed=%d",
		s.cfg.Objects, s.cfg.OwnedPercent, s.cfg.DependentsPerOwn, s.cfg.DataBytes, s.cfg.Labels, s.cfg.Seed)
}

func (s *scale) clients() {
	s.cs = suite.Clients(s.b)
	cfg := suite.CP.RestConfig()
	cfg.QPS = -1
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf"
	var err error
	if s.fast, err = kubernetes.NewForConfig(cfg); err != nil {
		s.b.Fatal(err)
	}
	if s.meta, err = metadata.NewForConfig(suite.CP.RestConfig()); err != nil {
		s.b.Fatal(err)
	}
	s.cfg.Versions = versions()
}

// object builds object i: seeded data and labels, and its owner reference if it is a dependent.
func (s *scale) object(i int) *corev1.ConfigMap {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, uint64(i)))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	buf := make([]byte, s.cfg.DataBytes)
	for j := range buf {
		buf[j] = alphabet[rng.IntN(len(alphabet))]
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name(i), Labels: map[string]string{
			"app":     fmt.Sprintf("app-%d", rng.IntN(100)),
			"tier":    []string{"frontend", "backend", "cache", "batch"}[rng.IntN(4)],
			"release": fmt.Sprintf("r%d", rng.IntN(20)),
			"shard":   strconv.Itoa(i % 16),
		}},
		Data: map[string]string{"data": string(buf)},
	}
	if d := i - s.firstDependent(); d >= 0 {
		o := d / s.cfg.DependentsPerOwn
		cm.OwnerReferences = []metav1.OwnerReference{framework.RefTo("v1", "ConfigMap", name(o), s.ownUIDs[o], false)}
	}
	return cm
}

// load creates the layout unless the namespace says it holds it already (a reused SCALE_DIR),
// then makes sure every owner and dependent exists (a run stopped during a collection).
func (s *scale) load() {
	ctx := context.Background()
	nsObj, err := s.cs.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		nsObj = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if _, err := s.cs.Kube.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
			s.b.Fatal(err)
		}
	case err != nil:
		s.b.Fatal(err)
	default:
		if got := nsObj.Annotations[layoutAnnotation]; got == s.layout() {
			fmt.Printf("scale: reusing the loaded objects (%s)\n", got)
			if s.count() != s.cfg.Objects { // a run stopped during a collection
				s.restore()
			}
			return
		} else if got != "" || s.count() > 0 {
			s.b.Fatalf("namespace %s holds another layout (%q, want %q): use another SCALE_DIR", ns, got, s.layout())
		}
	}
	start := time.Now()
	s.ownUIDs = make([]types.UID, s.owners())
	// Everything but the dependents, then the dependents (they need their owners' UIDs).
	s.create(0, s.firstDependent(), start)
	s.create(s.firstDependent(), s.cfg.Objects, start)
	fmt.Printf("scale: loaded %d objects in %s (%.0f objects/s)\n", s.cfg.Objects, time.Since(start).Round(time.Second),
		float64(s.cfg.Objects)/time.Since(start).Seconds())
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, layoutAnnotation, s.layout())
	if _, err := s.cs.Kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		s.b.Fatal(err)
	}
}

// create creates objects [from, to) with LoadWorkers concurrent requests, printing progress.
// An object that exists already is kept (its UID read back if it is an owner).
func (s *scale) create(from, to int, start time.Time) {
	var done sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	created := 0
	done.Go(func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				fmt.Printf("scale: [%s] created %d of %d\n", time.Since(start).Round(time.Second), from+created, s.cfg.Objects)
				mu.Unlock()
			}
		}
	})
	err := framework.Parallel(to-from, s.cfg.LoadWorkers, func(k int) error {
		i := from + k
		got, err := s.fast.CoreV1().ConfigMaps(ns).Create(context.Background(), s.object(i), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = s.fast.CoreV1().ConfigMaps(ns).Get(context.Background(), name(i), metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", name(i), err)
		}
		if i < len(s.ownUIDs) {
			s.ownUIDs[i] = got.UID
		}
		mu.Lock()
		created++
		mu.Unlock()
		return nil
	})
	close(stop)
	done.Wait()
	if err != nil {
		s.b.Fatal(err)
	}
}

// restore recreates owners and dependents that a collection deleted.
func (s *scale) restore() {
	start := time.Now()
	s.ownUIDs = make([]types.UID, s.owners())
	s.create(0, s.owners(), start)
	s.create(s.firstDependent(), s.cfg.Objects, start)
	if n := s.count(); n != s.cfg.Objects {
		s.b.Fatalf("namespace %s holds %d objects after restoring, want %d", ns, n, s.cfg.Objects)
	}
	fmt.Printf("scale: restored owners and dependents in %s\n", time.Since(start).Round(time.Second))
}

// count is the number of ConfigMaps in the namespace, from a one-item list.
func (s *scale) count() int {
	l, err := s.meta.Resource(configMaps).Namespace(ns).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		s.b.Fatal(err)
	}
	n := len(l.Items)
	if l.RemainingItemCount != nil {
		n += int(*l.RemainingItemCount)
	}
	return n
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// running is a collector under measurement.
type running struct {
	proc    *harness.Process
	metrics framework.Server
	pprof   string // cascade's /debug/pprof with SCALE_PROFILE, else ""
}

// profile fetches a CPU profile of seconds into SCALE_PROFILE/name.pprof in the background; the
// returned function waits for it.
func (r *running) profile(name string, seconds int) func() {
	dir := os.Getenv("SCALE_PROFILE")
	if r.pprof == "" || dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		out := filepath.Join(dir, name+".pprof")
		cmd := exec.Command("curl", "-sS", "-o", out, r.pprof+"/profile?seconds="+strconv.Itoa(seconds))
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Printf("scale: profile %s: %v %s\n", name, err, b)
		}
	}()
	_ = os.MkdirAll(dir, 0o755)
	return func() { <-done }
}

func (s *scale) start(subject string) (*running, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	name := fmt.Sprintf("%s-%d-%d", subject, s.cfg.Objects, time.Now().Unix())
	begin := time.Now()
	switch subject {
	case "in-tree":
		opts := harness.KCMOptions{Burst: s.cfg.Burst, ConcurrentGCSyncs: s.cfg.Workers}
		if s.cfg.QPS == 0 {
			opts.QPS = -1
		} else {
			opts.QPS = float32(s.cfg.QPS / 2) // it doubles the budget for the GC's client
		}
		k, err := suite.CP.StartKubeControllerManager(name, opts)
		if err != nil {
			return nil, 0, err
		}
		r := &running{proc: k.Process, metrics: k}
		if err := waitInTreeGraph(ctx, k, float64(s.cfg.Objects)); err != nil {
			_ = k.Stop(15 * time.Second)
			return nil, 0, err
		}
		return r, time.Since(begin), nil
	default:
		args := []string{
			"--workers=" + strconv.Itoa(s.cfg.Workers),
			"--kube-api-qps=" + strconv.FormatFloat(s.cfg.QPS, 'f', -1, 64),
			"--kube-api-burst=" + strconv.Itoa(s.cfg.Burst),
			"--sync-timeout=1h",
		}
		if os.Getenv("SCALE_PROFILE") != "" {
			args = append(args, "--enable-profiling")
		}
		args = append(args, s.cfg.CascadeArgs...)
		c, err := suite.CP.StartCascadeWith(name, suite.CascadeBin, harness.ProcessOptions{Env: s.cfg.CascadeEnv}, args...)
		if err != nil {
			return nil, 0, err
		}
		r := &running{proc: c.Process, metrics: c}
		if os.Getenv("SCALE_PROFILE") != "" {
			r.pprof = strings.TrimSuffix(c.MetricsURL, "/metrics") + "/debug/pprof"
		}
		if err := c.WaitReady(ctx); err != nil {
			_ = c.Stop(15 * time.Second)
			return nil, 0, err
		}
		return r, time.Since(begin), nil
	}
}

func (s *scale) measure(subject string, run int) (m Measurement) {
	m = Measurement{Subject: subject, Run: run}
	fail := func(err error) Measurement {
		m.Error = err.Error()
		return m
	}
	waitAPIQuiet(s.b, s.cs)
	r, synced, err := s.start(subject)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = r.proc.Stop(30 * time.Second) }()
	m.SyncSeconds = synced.Seconds()
	peak, err := harness.PeakResidentBytes(r.proc.Pid())
	if err != nil {
		return fail(err)
	}
	m.PeakRSSBytes = float64(peak)
	fmt.Printf("scale: %s synced in %.1fs, peak RSS %.0f MiB\n", subject, m.SyncSeconds, m.PeakRSSBytes/(1<<20))
	framework.MeasurementPause(time.Duration(s.cfg.SettleSeconds) * time.Second) // memory settles after the sync
	var rss, heap []float64
	for i := range 5 {
		if i > 0 {
			framework.MeasurementPause(time.Second) // samples a second apart
		}
		v, err := harness.ResidentBytes(r.proc.Pid())
		if err != nil {
			return fail(err)
		}
		rss = append(rss, float64(v))
		h, err := heapAlloc(r.metrics)
		if err != nil {
			return fail(err)
		}
		heap = append(heap, h)
	}
	m.RSSBytes, m.HeapBytes = median(rss), median(heap)
	if peak, err = harness.PeakResidentBytes(r.proc.Pid()); err == nil {
		m.PeakRSSSettledBytes = float64(peak)
	}
	if !s.cfg.Collect || s.owned() == 0 {
		return m
	}
	wait := r.profile(fmt.Sprintf("%s-%d-collect-r%d", subject, s.cfg.Objects, run), 10)
	s.collected = true // the caller restores before the next measurement
	err = s.collect(&m)
	wait()
	if err != nil {
		return fail(fmt.Errorf("%w\n%s", err, r.proc.Tail(20)))
	}
	return m
}

// collect deletes every owner in the background and waits until every dependent is gone.
func (s *scale) collect(m *Measurement) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := s.meta.Resource(configMaps).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	deps := make(map[string]struct{}, s.owned())
	for i := s.firstDependent(); i < s.cfg.Objects; i++ {
		deps[name(i)] = struct{}{}
	}
	gone := make(chan time.Time, 1)
	watchErr := make(chan error, 1)
	go func() { watchErr <- s.watchGone(ctx, l.ResourceVersion, deps, gone) }()

	before := framework.APIServerRequests(s.b, s.cs)
	start := time.Now()
	bg := metav1.DeletePropagationBackground
	err = framework.Parallel(s.owners(), 32, func(i int) error {
		err := s.fast.CoreV1().ConfigMaps(ns).Delete(context.Background(), name(i), metav1.DeleteOptions{PropagationPolicy: &bg})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting the owners: %w", err)
	}
	timeout := 5*time.Minute + time.Duration(s.owned())*20*time.Millisecond // at least 50 objects/s
	var end time.Time
	select {
	case end = <-gone:
	case err := <-watchErr:
		return fmt.Errorf("watching the dependents: %w", err)
	case <-time.After(timeout):
		return fmt.Errorf("%d dependents not all collected within %s", len(deps), timeout)
	}
	framework.MeasurementPause(2 * time.Second) // requests in flight when the last event came are the collector's
	after := framework.APIServerRequests(s.b, s.cs)
	reqs, detail := framework.ObjectRequests(before, after, "configmaps")
	reqs -= float64(s.owners())
	m.Collected = s.owned()
	m.CollectSeconds = end.Sub(start).Seconds()
	m.CollectPerSecond = float64(m.Collected) / m.CollectSeconds
	m.RequestsPerObject = reqs / float64(m.Collected)
	m.RequestDetail = detail + fmt.Sprintf(" (less %d owner DELETEs)", s.owners())
	return nil
}

// watchGone watches the namespace's ConfigMaps (metadata only) from rv and sends on gone the
// time of the deletion that removed the last of deps.
func (s *scale) watchGone(ctx context.Context, rv string, deps map[string]struct{}, gone chan<- time.Time) error {
	left := len(deps)
	for ctx.Err() == nil {
		w, err := s.meta.Resource(configMaps).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				w.Stop()
				return apierrors.FromObject(ev.Object)
			}
			o, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				continue
			}
			rv = o.ResourceVersion
			if ev.Type != watch.Deleted {
				continue
			}
			if _, ok := deps[o.Name]; ok {
				delete(deps, o.Name)
				if left--; left == 0 {
					gone <- time.Now()
					w.Stop()
					return nil
				}
			}
		}
		w.Stop() // the server ended the watch: resume from the last resource version
	}
	return ctx.Err()
}

// waitInTreeGraph waits until kube-controller-manager's garbage collector has at least objects
// objects in its graph: its graph-changes queue (every informer event goes through it) has
// taken that many and stayed empty over three polls 50 ms apart. Unlike
// framework.WaitInTreeGCSynced it does not require the "all resource monitors have synced" log
// line: with millions of objects the in-tree collector's initial sync outlasts its own wait and
// it logs "proceeding anyways" while its informers are still listing; the graph is what counts.
func waitInTreeGraph(ctx context.Context, k *harness.KubeControllerManager, objects float64) error {
	quiet, last := 0, -1.0
	var lastErr error
	err := framework.Poll(time.Hour, 50*time.Millisecond, func() (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if exited, werr := k.Exited(); exited {
			return false, fmt.Errorf("kube-controller-manager exited before its graph synced: %v", werr)
		}
		m, err := framework.ReadMetrics(k)
		if lastErr = err; err != nil {
			return false, nil
		}
		depth, _ := m.Value(`workqueue_depth{name="garbage_collector_graph_changes"}`)
		adds, _ := m.Value(`workqueue_adds_total{name="garbage_collector_graph_changes"}`)
		if depth == 0 && adds >= objects && adds == last {
			quiet++
		} else {
			quiet = 0
		}
		last = adds
		return quiet >= 2, nil
	})
	if err != nil {
		return fmt.Errorf("kube-controller-manager's graph not synced (last scrape error: %v): %w\n%s", lastErr, err, k.Tail(30))
	}
	return nil
}

// waitAPIQuiet waits until kube-apiserver has served no per-object ConfigMap request for two
// seconds (at most two minutes): loading and restoring stay out of what is measured.
func waitAPIQuiet(b testing.TB, cs framework.Clients) {
	prev := -1.0
	_ = framework.Poll(2*time.Minute, 2*time.Second, func() (bool, error) {
		cur, _ := framework.ObjectRequests(framework.RequestCounts{}, framework.APIServerRequests(b, cs), "configmaps")
		quiet := cur == prev
		prev = cur
		return quiet, nil
	})
}

func heapAlloc(srv framework.Server) (float64, error) {
	m, err := framework.ReadMetrics(srv)
	if err != nil {
		return 0, err
	}
	v, ok := m.Value("go_memstats_heap_alloc_bytes")
	if !ok {
		return 0, errors.New("no go_memstats_heap_alloc_bytes in /metrics")
	}
	return v, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

const mib = 1 << 20

func (s *scale) print(m Measurement) {
	if m.Error != "" {
		fmt.Printf("scale: [%s] %s run %d FAILED: %s\n", time.Since(s.started).Round(time.Second), m.Subject, m.Run, m.Error)
		return
	}
	n := float64(s.cfg.Objects)
	fmt.Printf("scale: [%s] %s run %d: %d objects: synced in %.1fs; peak RSS %.0f MiB (%.0f B/object); RSS %.0f MiB (%.0f B/object); Go heap %.0f MiB (%.0f B/object)",
		time.Since(s.started).Round(time.Second), m.Subject, m.Run, s.cfg.Objects, m.SyncSeconds,
		m.PeakRSSBytes/mib, m.PeakRSSBytes/n, m.RSSBytes/mib, m.RSSBytes/n, m.HeapBytes/mib, m.HeapBytes/n)
	if m.Collected > 0 {
		fmt.Printf("; collected %d in %.1fs = %.0f objects/s, %.3f requests/object (%s)", m.Collected, m.CollectSeconds, m.CollectPerSecond, m.RequestsPerObject, m.RequestDetail)
	}
	fmt.Println()
}

// summary prints each subject's medians and cascade's ratios to the in-tree collector.
func (s *scale) summary() {
	type fig struct{ med, lo, hi float64 }
	get := func(subject string, f func(Measurement) float64) (fig, bool) {
		var xs []float64
		for _, m := range s.results {
			if m.Subject == subject && m.Error == "" && f(m) > 0 {
				xs = append(xs, f(m))
			}
		}
		if len(xs) == 0 {
			return fig{}, false
		}
		return fig{median(xs), slices.Min(xs), slices.Max(xs)}, true
	}
	rows := []struct {
		name  string
		scale float64
		f     func(Measurement) float64
	}{
		{"time to synced (s)", 1, func(m Measurement) float64 { return m.SyncSeconds }},
		{"peak RSS during the initial list (MiB)", mib, func(m Measurement) float64 { return m.PeakRSSBytes }},
		{"RSS after sync (MiB)", mib, func(m Measurement) float64 { return m.RSSBytes }},
		{"Go heap after sync (MiB)", mib, func(m Measurement) float64 { return m.HeapBytes }},
		{"collection throughput (objects/s)", 1, func(m Measurement) float64 { return m.CollectPerSecond }},
		{"API requests per collected object", 1, func(m Measurement) float64 { return m.RequestsPerObject }},
	}
	fmt.Printf("\nscale: %d objects, median of %d run(s) (min-max)\n", s.cfg.Objects, s.cfg.Runs)
	for _, row := range rows {
		line := fmt.Sprintf("  %-40s", row.name)
		var in, ca fig
		var okIn, okCa bool
		for _, subject := range []string{"in-tree", "cascade"} {
			f, ok := get(subject, row.f)
			if subject == "in-tree" {
				in, okIn = f, ok
			} else {
				ca, okCa = f, ok
			}
			if ok {
				line += fmt.Sprintf(" %s %.4g (%.4g-%.4g)", subject, f.med/row.scale, f.lo/row.scale, f.hi/row.scale)
			}
		}
		if okIn && okCa {
			line += fmt.Sprintf("  cascade/in-tree %.3f", ca.med/in.med)
		}
		fmt.Println(line)
	}
}

func (s *scale) write(root string) error {
	if err := os.MkdirAll(filepath.Dir(s.cfg.Out), 0o755); err != nil {
		return err
	}
	out := struct {
		Date         string        `json:"date"`
		Command      string        `json:"command"`
		Machine      string        `json:"machine"`
		Config       Config        `json:"config"`
		Measurements []Measurement `json:"measurements"`
	}{
		Date:         time.Now().UTC().Format(time.RFC3339),
		Command:      "make bench-scale SCALE_OBJECTS=" + strconv.Itoa(s.cfg.Objects),
		Machine:      machine(),
		Config:       s.cfg,
		Measurements: s.results,
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_ = root
	return os.WriteFile(s.cfg.Out, append(b, '\n'), 0o644)
}

func machine() string {
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		mem = strings.Join(strings.Fields(line)[1:], " ")
	}
	return fmt.Sprintf("%s/%s, %d CPUs, %s memory", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), mem)
}

func versions() map[string]string {
	v := map[string]string{"go": runtime.Version(), "kube-apiserver, kube-controller-manager, etcd": "as pinned in e2e/tools/go.mod"}
	if root, err := harness.RepoRoot(); err == nil {
		if version, ok := harness.CascadeVersion(root); ok {
			v["cascade"] = version
		}
	}
	return v
}
