package fleet

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/leader"
)

// testProvider hands the fleet the sets the test sends.
type testProvider struct{ sets chan map[string]Source }

func (p *testProvider) Run(ctx context.Context, update func(map[string]Source)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-p.sets:
			update(s)
		}
	}
}

// journal is what the members' units did, in order.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, fmt.Sprintf(format, args...))
}

func (j *journal) has(e string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Contains(j.events, e)
}

func (j *journal) count(e string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, x := range j.events {
		if x == e {
			n++
		}
	}
	return n
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.events, ", ")
}

// testUnit is a member's unit that records its runs, stops and leaves; a leave waits for
// release (when set) or its context.
type testUnit struct {
	name    string
	j       *journal
	release chan struct{}
	stalled *atomic.Bool // Check fails while set
}

func (u *testUnit) Run(ctx context.Context) error {
	u.j.add("run %s", u.name)
	<-ctx.Done()
	u.j.add("stop %s", u.name)
	return nil
}

func (u *testUnit) Controller() *gc.Controller { return nil }

func (u *testUnit) Check() error {
	if u.stalled != nil && u.stalled.Load() {
		return errors.New("workers stalled: queue attempt_to_delete: 1 items ready, none finished for 5m1s")
	}
	return nil
}

func (u *testUnit) Leave(ctx context.Context) error {
	u.j.add("leave %s", u.name)
	if u.release == nil {
		return nil
	}
	select {
	case <-u.release:
		u.j.add("left %s", u.name)
		return nil
	case <-ctx.Done():
		u.j.add("leave cut %s", u.name)
		return ctx.Err()
	}
}

// testFleet runs a fleet whose members are testUnits (down, Build fails, when down says so).
type testFleet struct {
	f       *Fleet
	j       *journal
	p       *testProvider
	release chan struct{}
	mu      sync.Mutex
	down    map[string]bool
	cancel  context.CancelFunc
	done    chan error
}

func startTestFleet(t *testing.T, gate *leader.Gate, release chan struct{}) *testFleet {
	t.Helper()
	tf := &testFleet{j: &journal{}, p: &testProvider{sets: make(chan map[string]Source)}, release: release, down: map[string]bool{}, done: make(chan error, 1)}
	f, err := New(Options{
		Provider: tf.p, Gate: gate, Workers: 2, UserAgent: "test",
		Build: func(_ context.Context, m Member) (Unit, error) {
			tf.mu.Lock()
			down := tf.down[m.Name]
			tf.mu.Unlock()
			if down {
				return nil, errors.New("connection refused")
			}
			tf.j.add("build %s", m.Name)
			return &testUnit{name: m.Name, j: tf.j, release: tf.release}, nil
		},
		LeaveTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	tf.f = f
	ctx, cancel := context.WithCancel(context.Background())
	tf.cancel = cancel
	go func() { tf.done <- f.Run(ctx) }()
	t.Cleanup(tf.stop)
	return tf
}

func (tf *testFleet) stop() {
	tf.cancel()
	err := <-tf.done
	tf.done <- err // stop is idempotent
}

func (tf *testFleet) set(members ...string) {
	s := map[string]Source{}
	for _, m := range members {
		s[m] = Source{Kubeconfig: []byte(testKubeconfig), Origin: "test"}
	}
	tf.p.sets <- s
}

func (tf *testFleet) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	tf.j.waitFor(t, what, ok)
}

// waitFor waits until ok, and fails the test with the journal after 10 s.
func (j *journal) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("%s: journal %s", what, j)
}

// TestMemberLeavesClean: a member removed from the fleet while it runs is cleaned (Leave) while
// its unit still runs, then stopped, and counted clean; the other members go on.
func TestMemberLeavesClean(t *testing.T) {
	tf := startTestFleet(t, leader.Open(), nil)
	tf.set("a", "b")
	tf.waitFor(t, "both run", func() bool { return tf.j.has("run a") && tf.j.has("run b") })
	tf.set("b")
	tf.waitFor(t, "a stopped", func() bool { return tf.j.has("stop a") })
	if !tf.j.has("leave a") {
		t.Errorf("a removed member was not cleaned: %s", tf.j)
	}
	if tf.j.has("stop b") || tf.j.has("leave b") {
		t.Errorf("another member was stopped or cleaned: %s", tf.j)
	}
	// The leave came before the stop: the collector finishes the deletions under way.
	tf.j.mu.Lock()
	leave, stop := slices.Index(tf.j.events, "leave a"), slices.Index(tf.j.events, "stop a")
	tf.j.mu.Unlock()
	if leave > stop {
		t.Errorf("a stopped before it was cleaned: %s", tf.j)
	}
	if n := testutil.ToFloat64(tf.f.cleanups.WithLabelValues(cleanupClean)); n != 1 {
		t.Errorf("clean cleanups %v, want 1", n)
	}
}

// TestRotationMoveAndShutdownRemoveNothing: a member whose kubeconfig changed is stopped and
// started again, one whose shard moved to another replica (still listed, no longer run here) is
// stopped, and one still in the fleet when the process stops is stopped: none is cleaned.
func TestRotationMoveAndShutdownRemoveNothing(t *testing.T) {
	tf := startTestFleet(t, leader.Open(), nil)
	tf.set("a")
	tf.waitFor(t, "a runs", func() bool { return tf.j.has("run a") })
	rotated := map[string]Source{"a": {Kubeconfig: []byte(testKubeconfig + "# rotated\n"), Origin: "test"}}
	tf.p.sets <- rotated
	tf.waitFor(t, "a restarted", func() bool { return tf.j.count("run a") == 2 })
	// a's shard stops here (it moves to another replica): still listed by the provider, no
	// longer wanted here, as runShard's reconcile sees it.
	tf.f.updateMu.Lock()
	tf.f.update(tf.f.base, map[string]Source{})
	tf.f.updateMu.Unlock()
	if tf.j.count("stop a") != 2 {
		t.Errorf("journal %s, want a stopped when its shard moved", tf.j)
	}
	tf.f.updateMu.Lock()
	tf.f.update(tf.f.base, rotated)
	tf.f.updateMu.Unlock()
	tf.waitFor(t, "a back", func() bool { return tf.j.count("run a") == 3 })
	tf.stop()
	if tf.j.has("leave a") {
		t.Errorf("a rotation, a shard's move or a shutdown cleaned the member: %s", tf.j)
	}
	if tf.j.count("stop a") != 3 {
		t.Errorf("journal %s, want a stopped three times", tf.j)
	}
}

// TestStandbyRemovesNothing: a replica whose gate is closed (a standby) stops a removed member
// without cleaning it: the replica that runs its writers does.
func TestStandbyRemovesNothing(t *testing.T) {
	tf := startTestFleet(t, &leader.Gate{}, nil)
	tf.set("a")
	tf.waitFor(t, "a runs", func() bool { return tf.j.has("run a") })
	tf.set()
	tf.waitFor(t, "a stopped", func() bool { return tf.j.has("stop a") })
	if tf.j.has("leave a") {
		t.Errorf("a standby cleaned a removed member: %s", tf.j)
	}
}

// TestDownMemberLeavesUnreachable: a member that is down when it leaves is counted unreachable,
// and nothing is tried in it.
func TestDownMemberLeavesUnreachable(t *testing.T) {
	tf := startTestFleet(t, leader.Open(), nil)
	tf.mu.Lock()
	tf.down["a"] = true
	tf.mu.Unlock()
	tf.set("a")
	tf.waitFor(t, "a down", func() bool {
		s := tf.f.States()
		return len(s) == 1 && s[0].Reason != "" && s[0].Reason != "starting"
	})
	tf.set()
	tf.waitFor(t, "counted", func() bool { return testutil.ToFloat64(tf.f.cleanups.WithLabelValues(cleanupUnreachable)) == 1 })
	if tf.j.has("leave a") || tf.j.has("build a") {
		t.Errorf("journal %s", tf.j)
	}
}

// TestLeavingBlocksNoOtherMember: while a removed member cleans up (its Leave waits), another
// member is added and runs; the removed member added back ends its leaving first (never two
// units of one member), then runs again.
func TestLeavingBlocksNoOtherMember(t *testing.T) {
	release := make(chan struct{})
	tf := startTestFleet(t, leader.Open(), release)
	tf.set("a")
	tf.waitFor(t, "a runs", func() bool { return tf.j.has("run a") })
	tf.set()
	tf.waitFor(t, "a leaving", func() bool { return tf.j.has("leave a") })
	tf.set("b")
	tf.waitFor(t, "b runs while a leaves", func() bool { return tf.j.has("run b") })
	if tf.j.has("stop a") {
		t.Fatalf("a stopped before its leave ended: %s", tf.j)
	}
	tf.set("a", "b")
	tf.waitFor(t, "a back", func() bool { return tf.j.count("run a") == 2 })
	tf.j.mu.Lock()
	cut, stop := slices.Index(tf.j.events, "leave cut a"), slices.Index(tf.j.events, "stop a")
	again := slices.Index(tf.j.events[slices.Index(tf.j.events, "build a")+1:], "build a") + slices.Index(tf.j.events, "build a") + 1
	tf.j.mu.Unlock()
	if cut < 0 || stop < 0 || cut > again || stop > again {
		t.Errorf("the leaving a was not ended (its leave cut short, its unit stopped) before a came back: %s", tf.j)
	}
	if n := testutil.ToFloat64(tf.f.cleanups.WithLabelValues(cleanupIncomplete)); n != 1 {
		t.Errorf("incomplete cleanups %v, want 1 (the leave cut short)", n)
	}
}

// TestSummarizeMembers is the log's members line: reasons bounded.
func TestSummarizeMembers(t *testing.T) {
	got := SummarizeMembers([]MemberState{{Name: "a", Up: true}, {Name: "b", Reason: "connection refused"}, {Name: "c", Up: true}})
	if want := "members: 2 synced, 1 not: b (connection refused)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got := SummarizeMembers([]MemberState{{Name: "a", Up: true}}); got != "members: 1 synced" {
		t.Errorf("%q", got)
	}
}

// TestRemovedMemberClosesItsConnections: a member's HTTP client, built on the configuration
// the fleet makes (its dialer, the write guard wrapped around client-go's transport), lets
// utilnet.CloseIdleConnectionsFor reach the transport under every wrapper, so the idle
// connection a stopped member leaves is closed at once (a wrapper that hid it kept the
// connection, its buffers and its transport for the transport's 90 s idle timeout).
func TestRemovedMemberClosesItsConnections(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") }))
	defer srv.Close()
	f, err := New(Options{Provider: &testProvider{}, Build: func(context.Context, Member) (Unit, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	kubeconfig := strings.Replace(strings.Replace(testKubeconfig, "https://127.0.0.1:6443", srv.URL, 1), "Y2E=", ca, 1)
	d := newDialer()
	cfg, err := f.config(&runningMember{name: "a", source: Source{Kubeconfig: []byte(kubeconfig)}, writable: func() error { return nil }}, d)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(srv.URL + "/version")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if n := d.open(); n != 1 {
		t.Fatalf("%d connections open after a request, want 1", n)
	}
	utilnet.CloseIdleConnectionsFor(hc.Transport)
	if n := d.open(); n != 0 {
		t.Errorf("%d connections open after closing the idle ones, want 0: a wrapper hides the transport", n)
	}
}

// runFleet runs f until the test ends.
func runFleet(t *testing.T, f *Fleet) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the fleet ended with %v", err)
		}
	})
}

// hungUnit is a member's unit whose run is stuck in a request made without the member's
// context (as client-go's Event sink writes), to an API server that never answers.
type hungUnit struct {
	testUnit
	hc  *http.Client
	url string
}

func (u *hungUnit) Run(ctx context.Context) error {
	u.j.add("run %s", u.name)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u.url+"/api/v1/namespaces/a/events", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	if resp, err := u.hc.Do(req); err == nil {
		_ = resp.Body.Close()
	}
	u.j.add("stop %s", u.name)
	return nil
}

// TestStopNeverWaitsOnAMember: a member whose unit is stuck writing to an API server that never
// answers, in a request without the member's context, stops as soon as it is removed (its
// connections closed), long before the request deadline (30 s), and another member is added
// meanwhile, without waiting for it.
func TestStopNeverWaitsOnAMember(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	kubeconfig := strings.Replace(strings.Replace(testKubeconfig, "https://127.0.0.1:6443", srv.URL, 1), "Y2E=", ca, 1)
	j := &journal{}
	p := &testProvider{sets: make(chan map[string]Source)}
	f, err := New(Options{
		Provider: p, Gate: &leader.Gate{}, // a standby: a removed member is only stopped
		Build: func(_ context.Context, m Member) (Unit, error) {
			hc, err := rest.HTTPClientFor(m.Config)
			if err != nil {
				return nil, err
			}
			return &hungUnit{testUnit: testUnit{name: m.Name, j: j}, hc: hc, url: srv.URL}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runFleet(t, f)
	src := Source{Kubeconfig: []byte(kubeconfig), Origin: "test"}
	p.sets <- map[string]Source{"a": src}
	j.waitFor(t, "a stuck in its write", func() bool { return j.has("run a") })
	time.Sleep(100 * time.Millisecond) // the write is under way
	start := time.Now()
	p.sets <- map[string]Source{"b": src}
	j.waitFor(t, "b runs", func() bool { return j.has("run b") })
	j.waitFor(t, "a stopped", func() bool { return j.has("stop a") })
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("removing a member stuck in a write took %s, want it at once (its connections closed)", d)
	}
	// A rotation of b, stuck in its write too: stopped (its context ended) and started again.
	time.Sleep(100 * time.Millisecond)
	start = time.Now()
	p.sets <- map[string]Source{"b": {Kubeconfig: []byte(kubeconfig + "# rotated\n"), Origin: "test"}}
	j.waitFor(t, "b restarted", func() bool { return j.count("run b") == 2 })
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("rotating a member stuck in a write took %s, want it at once", d)
	}
}

// TestSeriesGoWithTheirMember: a member's per-host series (rest_client_*) are forgotten once
// it stopped, unless another member has the same API server: they follow the members.
func TestSeriesGoWithTheirMember(t *testing.T) {
	var mu sync.Mutex
	var forgotten []string
	j := &journal{}
	p := &testProvider{sets: make(chan map[string]Source)}
	f, err := New(Options{
		Provider: p, Gate: &leader.Gate{},
		Build: func(_ context.Context, m Member) (Unit, error) { return &testUnit{name: m.Name, j: j}, nil },
		ForgetHost: func(host string) {
			mu.Lock()
			defer mu.Unlock()
			forgotten = append(forgotten, host)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runFleet(t, f)
	src := Source{Kubeconfig: []byte(testKubeconfig), Origin: "test"}
	p.sets <- map[string]Source{"a": src, "b": src}
	j.waitFor(t, "both run", func() bool { return j.has("run a") && j.has("run b") })
	p.sets <- map[string]Source{"b": src}
	j.waitFor(t, "a stopped", func() bool { return j.has("stop a") })
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	if len(forgotten) != 0 {
		t.Errorf("forgot %v while b still has that server", forgotten)
	}
	mu.Unlock()
	p.sets <- map[string]Source{}
	j.waitFor(t, "b's server forgotten", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Equal(forgotten, []string{"127.0.0.1:6443"})
	})
}

// TestStalledMemberRestartedAlone (issue 40.2): a member whose workers stalled (its own
// liveness check fails) is stopped and started again, alone: the other member runs on, the
// restart is counted, and the member is down meanwhile with the reason; the fleet's own check
// (the process's /healthz in fleet mode) does not fail for it.
func TestStalledMemberRestartedAlone(t *testing.T) {
	j := &journal{}
	p := &testProvider{sets: make(chan map[string]Source)}
	var stalled atomic.Bool
	f, err := New(Options{
		Provider: p, Gate: leader.Open(), LivenessPeriod: 20 * time.Millisecond,
		Build: func(_ context.Context, m Member) (Unit, error) {
			u := &testUnit{name: m.Name, j: j}
			if m.Name == "a" {
				u.stalled = &stalled
			}
			return u, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runFleet(t, f)
	src := Source{Kubeconfig: []byte(testKubeconfig), Origin: "test"}
	p.sets <- map[string]Source{"a": src, "b": src}
	j.waitFor(t, "both run", func() bool { return j.has("run a") && j.has("run b") })
	stalled.Store(true)
	j.waitFor(t, "a stopped", func() bool { return j.has("stop a") })
	stalled.Store(false)
	j.waitFor(t, "a down with the reason", func() bool {
		for _, s := range f.States() {
			if s.Name == "a" && strings.Contains(s.Reason, "stopped to be started again: workers stalled") {
				return true
			}
		}
		return false
	})
	j.waitFor(t, "a started again", func() bool { return j.count("run a") == 2 })
	if j.has("stop b") || j.count("run b") != 1 {
		t.Errorf("b was stopped or restarted with a: %s", j)
	}
	if n := testutil.ToFloat64(f.restarts); n < 1 {
		t.Errorf("restarts %v, want at least 1", n)
	}
	if err := f.Check(); err != nil {
		t.Errorf("the fleet's own check failed for one member: %v", err)
	}
}
