package orphanrecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/graph"
)

const ns = "cascade-system"

func owner(i int) graph.Ref {
	return graph.Ref{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "default", Name: fmt.Sprintf("rs-%d", i),
		UID: types.UID(fmt.Sprintf("8d6ec1f4-6b2c-4f45-9a43-%012d", i))}
}

func newStore(t *testing.T, opts Options, objects ...*corev1.ConfigMap) (*Store, *fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	cs := fake.NewClientset()
	for _, o := range objects {
		if err := cs.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC))
	opts.ConfigMaps = cs.CoreV1().ConfigMaps(ns)
	opts.Clock = clk
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	return New(opts), cs, clk
}

func writes(cs *fake.Clientset) (patches, creates int) {
	for _, a := range cs.Actions() {
		switch a.GetVerb() {
		case "patch":
			patches++
		case "create":
			creates++
		}
	}
	return
}

func sortRefs(r []graph.Ref) []graph.Ref {
	slices.SortFunc(r, func(a, b graph.Ref) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return r
}

// TestRecordThenLoad: what one process records, another loads; the ConfigMap is created on the
// first write and patched afterwards.
func TestRecordThenLoad(t *testing.T) {
	ctx := context.Background()
	s, cs, _ := newStore(t, Options{})
	for i := range 3 {
		if err := s.Record(ctx, owner(i)); err != nil {
			t.Fatalf("Record: %v", err)
		}
	}
	if p, c := writes(cs); c != 1 || p != 3 {
		t.Errorf("writes: %d patches (the first answered 404), %d creates; want 3 and 1", p, c)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels["app.kubernetes.io/managed-by"] != "cascade" {
		t.Errorf("labels %v: want managed-by cascade", cm.Labels)
	}
	other := New(Options{ConfigMaps: cs.CoreV1().ConfigMaps(ns)})
	got, err := other.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []graph.Ref{owner(0), owner(1), owner(2)}; !slices.Equal(sortRefs(got), want) {
		t.Errorf("Load:\n got %v\nwant %v", got, want)
	}
	if v := testutil.ToFloat64(s.opts.Metrics.Writes.WithLabelValues("ok")); v != 3 {
		t.Errorf("writes ok = %v, want 3", v)
	}
}

// TestLoadMissingAndMalformed: no ConfigMap is no record; a malformed entry is skipped and
// counted, the others load.
func TestLoadMissingAndMalformed(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t, Options{})
	if got, err := s.Load(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Load without a ConfigMap = %v, %v; want nothing, no error", got, err)
	}
	good := owner(1)
	s, _, _ = newStore(t, Options{}, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DefaultName},
		Data: map[string]string{
			string(good.UID): `{"apiVersion":"apps/v1","kind":"ReplicaSet","namespace":"default","name":"rs-1","recorded":"2026-11-23T06:00:00Z"}`,
			"not-json":       `{"apiVersion":`,
			"no-name":        `{"apiVersion":"v1","kind":"ConfigMap","recorded":"2026-11-23T06:00:00Z"}`,
		},
	})
	got, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []graph.Ref{good}) {
		t.Errorf("Load = %v, want only %v", got, good)
	}
	if v := testutil.ToFloat64(s.opts.Metrics.Malformed); v != 2 {
		t.Errorf("malformed = %v, want 2", v)
	}
}

// TestRecordSharesWrites: owners recorded while a write is in flight share the next write, and
// every caller returns only once its owner is written.
func TestRecordSharesWrites(t *testing.T) {
	ctx := context.Background()
	s, cs, _ := newStore(t, Options{})
	if err := s.Record(ctx, owner(0)); err != nil { // creates the ConfigMap
		t.Fatal(err)
	}
	release := make(chan struct{})
	held := make(chan int, 1) // owners in the held patch
	var once sync.Once
	cs.PrependReactor("patch", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { // hold the first patch until every Record is waiting
			var body struct{ Data map[string]string }
			if err := json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &body); err != nil {
				t.Error(err)
			}
			held <- len(body.Data)
			<-release
		})
		return false, nil, nil
	})
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		wg.Go(func() { errs <- s.Record(ctx, owner(i)) })
	}
	inHeld := <-held
	for {
		s.mu.Lock()
		queued := len(s.pending)
		s.mu.Unlock()
		if queued+inHeld == n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	p, _ := writes(cs)
	if p -= 1; p > 2 { // the first Record's 404 patch
		t.Errorf("%d owners took %d patches; want at most 2 (the held one and one for the rest)", n, p)
	}
	got, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n+1 {
		t.Errorf("loaded %d owners, want %d", len(got), n+1)
	}
}

// TestRecordFailsAndFull: a failed write and a full record fail Record (the caller keeps the
// finalizer) and are counted.
func TestRecordFailsAndFull(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t, Options{MaxEntries: 2})
	for i := range 2 {
		if err := s.Record(ctx, owner(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Record(ctx, owner(2)); !errors.Is(err, ErrFull) {
		t.Errorf("Record into a full record: %v, want ErrFull", err)
	}
	if v := testutil.ToFloat64(s.opts.Metrics.Writes.WithLabelValues("full")); v != 1 {
		t.Errorf("writes full = %v, want 1", v)
	}
	s, cs, _ := newStore(t, Options{})
	cs.PrependReactor("*", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcdserver: request timed out")
	})
	if err := s.Record(ctx, owner(0)); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("Record with the API failing: %v, want the error", err)
	}
	if v := testutil.ToFloat64(s.opts.Metrics.Writes.WithLabelValues("error")); v != 1 {
		t.Errorf("writes error = %v, want 1", v)
	}
	if err := s.Record(ctx, graph.Ref{Name: "x", UID: "a uid with spaces"}); err == nil {
		t.Error("Record of a UID that is no ConfigMap key: no error")
	}
}

// TestPrune: only entries older than the TTL go, and only once the leader has been synced for
// the TTL; young entries and everyone else's keys stay.
func TestPrune(t *testing.T) {
	ctx := context.Background()
	s, _, clk := newStore(t, Options{TTL: 10 * time.Minute})
	if err := s.Record(ctx, owner(0)); err != nil {
		t.Fatal(err)
	}
	clk.Step(8 * time.Minute)
	if err := s.Record(ctx, owner(1)); err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	var synced sync.Mutex // held: not synced yet
	synced.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(runCtx, func() bool {
			if synced.TryLock() {
				synced.Unlock()
				return true
			}
			return false
		})
	}()
	waitForRun := func() {
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
	}
	tick := func(d time.Duration) {
		// Let Run wait on the clock, move it, and wait until Run has handled that moment (it
		// waits on the clock again): else a change the test makes next (the graph synced)
		// could be seen at this moment instead of the next one.
		waitForRun()
		clk.Step(d)
		waitForRun()
	}
	loadN := func() int {
		got, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	// Not synced: nothing is pruned, however old.
	tick(5 * time.Minute)
	tick(5 * time.Minute)
	if n := loadN(); n != 2 {
		t.Fatalf("pruned before the graph synced: %d entries left, want 2", n)
	}
	synced.Unlock()
	tick(5 * time.Minute) // synced seen now
	tick(5 * time.Minute) // synced for 5 min < TTL
	if n := loadN(); n != 2 {
		t.Fatalf("pruned before synced for the TTL: %d entries left, want 2", n)
	}
	young := owner(2)
	if err := s.Record(ctx, young); err != nil {
		t.Fatal(err)
	}
	tick(5 * time.Minute) // synced for 10 min: owners 0 and 1 are 33 and 25 min old, 2 is 5 min
	for loadN() != 1 {
		time.Sleep(time.Millisecond)
	}
	if got, _ := s.Load(ctx); !slices.Equal(got, []graph.Ref{young}) {
		t.Errorf("after pruning: %v, want only %v", got, young)
	}
	cancel()
	<-done
}
