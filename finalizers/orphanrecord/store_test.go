package orphanrecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
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
	opts.ConfigMaps = client.NewEdge(nil, cs).ConfigMaps(ns)
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
	other := New(Options{ConfigMaps: client.NewEdge(nil, cs).ConfigMaps(ns)})
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
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.pending)+inHeld == n, nil
	}); err != nil {
		t.Fatal("the other owners never queued behind the held write")
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

// longOwner is an owner with a 253-character name, the longest a ConfigMap or most kinds allow:
// its entry takes about 460 bytes.
func longOwner(i int) graph.Ref {
	r := owner(i)
	r.Namespace = strings.Repeat("n", 63)
	r.Name = fmt.Sprintf("%06d-", i) + strings.Repeat("x", 253-7)
	return r
}

// enforceLimit makes the fake API server refuse, as kube-apiserver does, a ConfigMap whose
// data exceeds LimitBytes (422, FieldValueTooLong), and counts the writes it saw.
func enforceLimit(t *testing.T, cs *fake.Clientset) *atomic.Int64 {
	t.Helper()
	var writes atomic.Int64
	cs.PrependReactor("patch", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		writes.Add(1)
		pa := a.(clienttesting.PatchAction)
		cur, err := cs.Tracker().Get(a.GetResource(), pa.GetNamespace(), pa.GetName())
		if err != nil {
			return false, nil, nil // the default reactor answers 404
		}
		var body struct{ Data map[string]*string }
		if err := json.Unmarshal(pa.GetPatch(), &body); err != nil {
			t.Error(err)
		}
		n := Bytes(cur.(*corev1.ConfigMap))
		for k, v := range body.Data {
			if v != nil {
				n += len(k) + len(*v)
			}
		}
		if n > LimitBytes {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, pa.GetName(), field.ErrorList{field.TooLong(field.NewPath(""), "", LimitBytes)})
		}
		return false, nil, nil
	})
	return &writes
}

// TestRecordBoundedByBytes: owners with the longest names fill the record by bytes long before
// any entry count would (the old bound, 4,000 entries, let writes fail with 422 from about
// entry 2,300 on). An owner whose entry would pass MaxBytes fails with ErrFull at once, with no
// request; the ConfigMap stays under MaxBytes, so never near the API server's limit; a batch
// that only partly fits writes what fits.
func TestRecordBoundedByBytes(t *testing.T) {
	ctx := context.Background()
	s, cs, _ := newStore(t, Options{})
	writes := enforceLimit(t, cs)
	recorded, full := 0, 0
	for round := 0; full == 0; round++ {
		if round == 10 {
			t.Fatalf("still not full after %d long-named owners", recorded)
		}
		var wg sync.WaitGroup
		errs := make([]error, 500) // concurrent: a few large batches keep the test fast
		for i := range errs {
			wg.Go(func() { errs[i] = s.Record(ctx, longOwner(round*500+i)) })
		}
		wg.Wait()
		for _, err := range errs {
			switch {
			case err == nil:
				recorded++
			case errors.Is(err, ErrFull):
				full++
			default:
				t.Fatalf("Record: %v (after %d owners), want nil or ErrFull", err, recorded)
			}
		}
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	size := Bytes(cm)
	if size > DefaultMaxBytes || len(cm.Data) != recorded {
		t.Fatalf("record: %d entries, %d bytes; want the %d recorded, at most %d bytes", len(cm.Data), size, recorded, DefaultMaxBytes)
	}
	entry := size / recorded
	if entry < 400 || DefaultMaxBytes-size > entry {
		t.Errorf("record full at %d bytes (%d entries of about %d bytes): the long names did not fill it to within one entry of %d", size, recorded, entry, DefaultMaxBytes)
	}
	t.Logf("full after %d long-named owners, %d bytes (%d a entry)", recorded, size, entry)
	if v := testutil.ToFloat64(s.opts.Metrics.Bytes); int(v) != size {
		t.Errorf("bytes gauge = %v, want %d", v, size)
	}
	if v := testutil.ToFloat64(s.opts.Metrics.Writes.WithLabelValues("full")); int(v) != full {
		t.Errorf("writes full = %v, want %d", v, full)
	}
	before := writes.Load()
	if err := s.Record(ctx, longOwner(99999)); !errors.Is(err, ErrFull) {
		t.Errorf("Record into the full record: %v, want ErrFull", err)
	}
	if err := s.Record(ctx, owner(99999)); err != nil {
		t.Errorf("Record of a short entry that still fits: %v", err)
	}
	if w := writes.Load() - before; w != 1 {
		t.Errorf("%d writes for a full entry and one that fits; want 1, the full one costs no request", w)
	}
}

// TestRecordCountsOthersData: the size is the ConfigMap's, read before the first write: data
// someone else wrote counts against the bound.
func TestRecordCountsOthersData(t *testing.T) {
	ctx := context.Background()
	s, cs, _ := newStore(t, Options{MaxBytes: 2000}, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DefaultName},
		Data:       map[string]string{"someone-else": strings.Repeat("x", 1500)},
	})
	if err := s.Record(ctx, owner(0)); err != nil { // ~160 bytes: fits
		t.Fatal(err)
	}
	if err := s.Record(ctx, longOwner(1)); !errors.Is(err, ErrFull) {
		t.Errorf("Record past MaxBytes with someone else's data: %v, want ErrFull", err)
	}
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if want := []string{"get", "patch"}; !slices.Equal(verbs, want) {
		t.Errorf("requests %v, want %v: the size read once, the entry that fits written", verbs, want)
	}
}

// TestRecordFailures: a failed write fails Record and is counted; the size is then unknown,
// so the next write reads it first. A refusal for size (422, too long: someone else filled the
// ConfigMap) is ErrFull.
func TestRecordFailures(t *testing.T) {
	ctx := context.Background()
	s, cs, _ := newStore(t, Options{})
	if err := s.Record(ctx, owner(0)); err != nil {
		t.Fatal(err)
	}
	fail := errors.New("etcdserver: request timed out")
	cs.PrependReactor("patch", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, fail
	})
	if err := s.Record(ctx, owner(1)); !errors.Is(err, fail) {
		t.Errorf("Record with the API failing: %v, want the error", err)
	}
	if v := testutil.ToFloat64(s.opts.Metrics.Writes.WithLabelValues("error")); v != 1 {
		t.Errorf("writes error = %v, want 1", v)
	}
	fail = apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, DefaultName, field.ErrorList{field.TooLong(field.NewPath(""), "", LimitBytes)})
	cs.ClearActions()
	if err := s.Record(ctx, owner(2)); !errors.Is(err, ErrFull) {
		t.Errorf("Record refused as too long: %v, want ErrFull", err)
	}
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if want := []string{"get", "patch"}; !slices.Equal(verbs, want) {
		t.Errorf("requests after a failed write: %v; want %v, the size read again, then the patch", verbs, want)
	}
	if v := testutil.ToFloat64(s.opts.Metrics.Writes.WithLabelValues("full")); v != 1 {
		t.Errorf("writes full = %v, want 1", v)
	}
	if err := s.Record(ctx, graph.Ref{Name: "x", UID: "a uid with spaces"}); err == nil {
		t.Error("Record of a UID that is no ConfigMap key: no error")
	}
}

// TestPruneResourceVersionPrecondition: a prune removes exactly what it judged old on the
// ConfigMap it read: its patch carries that read's resourceVersion; when the ConfigMap changed
// meanwhile (an old owner recorded again, with a new time) it conflicts, and the prune reads
// again and keeps that entry.
func TestPruneResourceVersionPrecondition(t *testing.T) {
	ctx := context.Background()
	old := `{"apiVersion":"apps/v1","kind":"ReplicaSet","namespace":"default","name":"rs","recorded":"2026-11-23T05:00:00Z"}`
	again := `{"apiVersion":"apps/v1","kind":"ReplicaSet","namespace":"default","name":"rs","recorded":"2026-11-23T06:00:00Z"}`
	s, cs, _ := newStore(t, Options{TTL: 10 * time.Minute}, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DefaultName, ResourceVersion: "10"},
		Data:       map[string]string{"uid-a": old, "uid-b": old},
	})
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	var preconditions []string
	cs.PrependReactor("patch", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		var body struct {
			Metadata struct{ ResourceVersion string }
		}
		if err := json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &body); err != nil {
			t.Error(err)
		}
		preconditions = append(preconditions, body.Metadata.ResourceVersion)
		cur, err := cs.Tracker().Get(gvr, ns, DefaultName)
		if err != nil {
			t.Fatal(err)
		}
		cm := cur.(*corev1.ConfigMap).DeepCopy()
		if len(preconditions) == 1 { // between the prune's read and its patch: uid-a recorded again
			cm.Data["uid-a"], cm.ResourceVersion = again, "11"
			if err := cs.Tracker().Update(gvr, cm, ns); err != nil {
				t.Fatal(err)
			}
		}
		if body.Metadata.ResourceVersion != cm.ResourceVersion { // as kube-apiserver does
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), DefaultName, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	n, err := s.prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10", "11"}; !slices.Equal(preconditions, want) {
		t.Errorf("prune patches carried resourceVersions %q; want %q (the conflict read again)", preconditions, want)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"uid-a": again}; n != 1 || !maps.Equal(cm.Data, want) {
		t.Errorf("after prune (%d removed): %v; want only the entry recorded again, %v", n, cm.Data, want)
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
		s.opts.Synced = func() bool {
			if synced.TryLock() {
				synced.Unlock()
				return true
			}
			return false
		}
		_ = s.Run(runCtx)
	}()
	waitForRun := func() {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return clk.HasWaiters(), nil
		}); err != nil {
			t.Fatal("Run never waited on the clock")
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
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return loadN() == 1, nil
	}); err != nil {
		t.Fatalf("never pruned: %d entries left, want 1", loadN())
	}
	if got, _ := s.Load(ctx); !slices.Equal(got, []graph.Ref{young}) {
		t.Errorf("after pruning: %v, want only %v", got, young)
	}
	cancel()
	<-done
}
