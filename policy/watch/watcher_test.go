package watch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/leader"
	"github.com/cascade-gc/cascade/policy"
)

const (
	goodDoc = "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: configmaps\n  collect: Never\n"
	badDoc  = "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: configmaps\n  colect: Never\n  defaultPropagation: Sideways\n"
	// withDefault sets a default propagation for a resource the cluster does not serve (a warning).
	withDefault = "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nignoredResources: [podtemplates]\nrules:\n- resource: widgets.example.com\n  defaultPropagation: Orphan\n"
)

// logLines captures log lines at default verbosity.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) ctx(parent context.Context) context.Context {
	return klog.NewContext(parent, funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 0}))
}

func (l *logLines) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

func policyCM(doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cascade-system", Name: "cascade-policy"}, Data: map[string]string{policy.ConfigMapKey: doc}}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func drainEvents(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

type harness struct {
	w    *Watcher
	cs   *fake.Clientset
	rec  *record.FakeRecorder
	m    *Metrics
	logs *logLines
	ctx  context.Context
}

func start(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	h := &harness{cs: fake.NewClientset(objs...), rec: record.NewFakeRecorder(20), m: NewMetrics(prometheus.NewRegistry()), logs: &logLines{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.ctx = h.logs.ctx(ctx)
	h.w = New(Options{Client: h.cs, Namespace: "cascade-system", Name: "cascade-policy", Events: h.rec, Metrics: h.m})
	if err := h.w.Start(h.ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) update(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	if _, err := h.cs.CoreV1().ConfigMaps(cm.Namespace).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) generation() float64 { return testutil.ToFloat64(h.m.Generation) }

// TestLifecycle: missing (said once) → created → bad edit (kept, said once per version) →
// fixed → deleted (built in again, said once).
func TestLifecycle(t *testing.T) {
	h := start(t)
	if h.w.Policy().Rules() != 0 || h.generation() != 0 || testutil.ToFloat64(h.m.LastLoadSuccess) != 1 {
		t.Fatalf("without the ConfigMap: %d rules, generation %v", h.w.Policy().Rules(), h.generation())
	}
	if n := h.logs.count("Policy ConfigMap not found"); n != 1 {
		t.Errorf("missing ConfigMap said %d times, want once", n)
	}

	if _, err := h.cs.CoreV1().ConfigMaps("cascade-system").Create(context.Background(), policyCM(goodDoc), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "generation 1", func() bool { return h.generation() == 1 })
	good := h.w.Policy()
	if good.CollectRules(policy.GroupResource{Resource: "configmaps"}) == nil {
		t.Fatal("the loaded policy has no rule for configmaps")
	}
	if evs := drainEvents(h.rec); len(evs) != 1 || !strings.HasPrefix(evs[0], "Normal PolicyLoaded generation 1 in force: 1 rules") {
		t.Errorf("events %q, want PolicyLoaded", evs)
	}
	if v := testutil.ToFloat64(h.m.RulesUnenforced); v != 0 { // collector mode enforces collect rules
		t.Errorf("cascade_policy_rules_unenforced = %v in collector mode, want 0", v)
	}

	h.update(t, policyCM(badDoc))
	eventually(t, "a load error", func() bool { return testutil.ToFloat64(h.m.LoadErrors) == 1 })
	if h.w.Policy() != good || h.generation() != 1 || testutil.ToFloat64(h.m.LastLoadSuccess) != 0 {
		t.Errorf("after a bad edit: generation %v, success %v; want the last good policy in force", h.generation(), testutil.ToFloat64(h.m.LastLoadSuccess))
	}
	evs := drainEvents(h.rec)
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning PolicyRejected policy.yaml rejected (2 errors), keeping generation 1") ||
		!strings.Contains(evs[0], "rules[0].colect: Forbidden: unknown field") || !strings.Contains(evs[0], "rules[0].defaultPropagation: Unsupported value") {
		t.Errorf("events %q, want one PolicyRejected naming both errors", evs)
	}
	if n := h.logs.count("Policy rejected"); n != 1 {
		t.Errorf("rejection logged %d times, want once", n)
	}

	// The same document again (a label changed): nothing new is said.
	cm := policyCM(badDoc)
	cm.Labels = map[string]string{"touched": "yes"}
	h.update(t, cm)
	h.update(t, policyCM(goodDoc))
	eventually(t, "generation 2", func() bool { return h.generation() == 2 })
	if testutil.ToFloat64(h.m.LoadErrors) != 1 || testutil.ToFloat64(h.m.LastLoadSuccess) != 1 {
		t.Errorf("load errors %v, success %v after the fix", testutil.ToFloat64(h.m.LoadErrors), testutil.ToFloat64(h.m.LastLoadSuccess))
	}

	if err := h.cs.CoreV1().ConfigMaps("cascade-system").Delete(context.Background(), "cascade-policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "generation 3", func() bool { return h.generation() == 3 })
	if h.w.Policy().Rules() != 0 {
		t.Error("the built-in policy is not in force after the ConfigMap went")
	}
	if n := h.logs.count("Policy ConfigMap deleted"); n != 1 {
		t.Errorf("deletion said %d times, want once", n)
	}
}

// TestMissingKeyIsRejected: a ConfigMap without policy.yaml is a bad edit, not an empty policy.
func TestMissingKeyIsRejected(t *testing.T) {
	cm := policyCM(goodDoc)
	cm.Data = map[string]string{"policy.yml": goodDoc}
	h := start(t, cm)
	if testutil.ToFloat64(h.m.LoadErrors) != 1 || h.generation() != 0 {
		t.Errorf("load errors %v, generation %v", testutil.ToFloat64(h.m.LoadErrors), h.generation())
	}
	if evs := drainEvents(h.rec); len(evs) != 1 || !strings.Contains(evs[0], "data[policy.yaml]: Required value") || !strings.Contains(evs[0], "keeping the built-in policy") {
		t.Errorf("events %q", evs)
	}
}

// TestNotesAndWarnings: an accepted policy says what it will not do: a resource the cluster does
// not serve (a warning). Its defaultPropagation rule is no longer reported as not applied.
func TestNotesAndWarnings(t *testing.T) {
	cs := fake.NewClientset(policyCM(withDefault))
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "podtemplates"}, {Name: "pods/status"}}},
	}
	rec := record.NewFakeRecorder(5)
	w := New(Options{Client: cs, Namespace: "cascade-system", Name: "cascade-policy", Events: rec, Served: ServedBy(cs.Discovery())})
	if err := w.Start(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	evs := drainEvents(rec)
	if len(evs) != 1 || !strings.Contains(evs[0], "warning: rules[0].resource: Invalid value: \"widgets.example.com\": the cluster does not serve widgets.example.com (yet)") ||
		strings.Contains(evs[0], "not applied") || strings.Contains(evs[0], "podtemplates") {
		t.Errorf("events %q", evs)
	}
	if got := w.Policy().Ignored(); len(got) != 1 || got[0].Resource != "podtemplates" {
		t.Errorf("ignored %v", got)
	}
}

// TestStartFailsWhenUnreadable: a ConfigMap that cannot be read (RBAC) stops the start with
// the reason, rather than running without the configured policy.
func TestStartFailsWhenUnreadable(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", nil)
	})
	w := New(Options{Client: cs, Namespace: "cascade-system", Name: "cascade-policy"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := w.Start(ctx, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "cannot read the policy ConfigMap cascade-system/cascade-policy") || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("Start() = %v, want the reason", err)
	}
}

// TestEventsWaitForElection: wired to cascade's HeldRecorder, a standby reports nothing (the
// metrics still count); once elected, it sends what it held back, so a policy rejected before
// the election is reported.
func TestEventsWaitForElection(t *testing.T) {
	rec := record.NewFakeRecorder(5)
	m := NewMetrics(prometheus.NewRegistry())
	gate := &leader.Gate{}
	held := client.NewHeldRecorder(rec, gate)
	w := New(Options{Client: fake.NewClientset(policyCM(badDoc)), Namespace: "cascade-system", Name: "cascade-policy", Events: held, Metrics: m})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = held.Run(ctx) }()
	if err := w.Start(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if evs := drainEvents(rec); len(evs) != 0 || testutil.ToFloat64(m.LoadErrors) != 1 || held.Held() != 1 {
		t.Errorf("standby: events %q, load errors %v, held %d", evs, testutil.ToFloat64(m.LoadErrors), held.Held())
	}
	gate.Open()
	var evs []string
	eventually(t, "the held event", func() bool { evs = append(evs, drainEvents(rec)...); return len(evs) > 0 })
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning PolicyRejected") {
		t.Errorf("events once elected: %q, want the rejection", evs)
	}
}

func TestParseName(t *testing.T) {
	for _, tt := range []struct {
		in       string
		ns, name string
		ok       bool
	}{
		{"cascade-system/cascade-policy", "cascade-system", "cascade-policy", true},
		{"cascade-policy", "", "", false},
		{"/x", "", "", false},
		{"a/b/c", "", "", false},
		{"Bad_NS/x", "", "", false},
		{"ns/Bad_Name", "", "", false},
	} {
		ns, name, err := ParseName(tt.in)
		if ns != tt.ns || name != tt.name || (err == nil) != tt.ok {
			t.Errorf("ParseName(%q) = %q, %q, %v", tt.in, ns, name, err)
		}
	}
}

// TestCompanionUnenforcedRules (--mode=companion): a policy put in force with collect rules
// says, once per version, that they are not enforced: a log line, a Warning Event on the
// ConfigMap naming each rule, and cascade_policy_rules_unenforced; a version without such rules,
// and the built-in policy after the ConfigMap goes, bring the gauge back to 0 and say nothing.
// In collector mode (TestLifecycle) the same documents say nothing of the kind.
func TestCompanionUnenforcedRules(t *testing.T) {
	two := "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: configmaps\n  collect: Never\n- resource: secrets\n  defaultPropagation: Orphan\n- resource: replicasets.apps\n  collect: After 10m\n"
	cs := fake.NewClientset(policyCM(two))
	rec := record.NewFakeRecorder(20)
	m := NewMetrics(prometheus.NewRegistry())
	logs := &logLines{}
	w := New(Options{Client: cs, Namespace: "cascade-system", Name: "cascade-policy", Events: rec, Metrics: m, Companion: true})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := w.Start(logs.ctx(ctx), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(m.RulesUnenforced); v != 2 {
		t.Errorf("cascade_policy_rules_unenforced = %v, want 2", v)
	}
	evs := drainEvents(rec)
	if len(evs) != 2 || !strings.HasPrefix(evs[1], "Warning PolicyRulesUnenforced generation 1: 2 rules not enforced in companion mode") ||
		!strings.Contains(evs[1], "rules[0].collect") || !strings.Contains(evs[1], "rules[2].collect") || strings.Contains(evs[1], "rules[1]") {
		t.Errorf("events %q, want PolicyLoaded then PolicyRulesUnenforced naming rules 0 and 2", evs)
	}
	if n := logs.count("Policy rules not enforced in companion mode"); n != 1 {
		t.Errorf("said %d times in the log, want once", n)
	}

	h := &harness{cs: cs}
	h.update(t, policyCM(withDefault))
	eventually(t, "generation 2", func() bool { return testutil.ToFloat64(m.Generation) == 2 })
	if v := testutil.ToFloat64(m.RulesUnenforced); v != 0 {
		t.Errorf("cascade_policy_rules_unenforced = %v without collect rules, want 0", v)
	}
	for _, e := range drainEvents(rec) {
		if strings.Contains(e, EventReasonUnenforced) {
			t.Errorf("event %q for a policy without collect rules", e)
		}
	}

	h.update(t, policyCM(goodDoc))
	eventually(t, "generation 3", func() bool { return testutil.ToFloat64(m.Generation) == 3 })
	if v := testutil.ToFloat64(m.RulesUnenforced); v != 1 {
		t.Errorf("cascade_policy_rules_unenforced = %v, want 1", v)
	}
	if err := cs.CoreV1().ConfigMaps("cascade-system").Delete(context.Background(), "cascade-policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "generation 4", func() bool { return testutil.ToFloat64(m.Generation) == 4 })
	if v := testutil.ToFloat64(m.RulesUnenforced); v != 0 {
		t.Errorf("cascade_policy_rules_unenforced = %v with the built-in policy, want 0", v)
	}
}

// TestUnwatchedDefaultPropagationRejected (issue 32.2): a policy whose defaultPropagation rule
// names a resource cascade never watches (--ignored-resources, which the document cannot see)
// is rejected like an invalid one: nothing is put in force (the built-in policy stays), so no
// admission policy is rendered for it and no object of it is stamped.
func TestUnwatchedDefaultPropagationRejected(t *testing.T) {
	doc := "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: events\n  defaultPropagation: Orphan\n"
	h := &harness{cs: fake.NewClientset(policyCM(doc)), rec: record.NewFakeRecorder(20), m: NewMetrics(prometheus.NewRegistry()), logs: &logLines{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.w = New(Options{Client: h.cs, Namespace: "cascade-system", Name: "cascade-policy", Events: h.rec, Metrics: h.m,
		Unwatched: []policy.GroupResource{{Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}}})
	if err := h.w.Start(h.logs.ctx(ctx), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if testutil.ToFloat64(h.m.LoadErrors) != 1 || h.generation() != 0 || h.w.Policy().Rules() != 0 {
		t.Errorf("load errors %v, generation %v, %d rules in force; want the document rejected", testutil.ToFloat64(h.m.LoadErrors), h.generation(), h.w.Policy().Rules())
	}
	if p, _ := h.w.Policy().Admission(); p != nil {
		t.Errorf("an admission policy is rendered for an unwatched resource: %+v", p.Spec.MatchConstraints)
	}
	if evs := drainEvents(h.rec); len(evs) != 1 || !strings.Contains(evs[0], `rules[0].resource: Invalid value: "events": cascade does not watch it`) {
		t.Errorf("events %q, want one PolicyRejected naming the rule", evs)
	}
}

// TestSource: Source names where the policy in force comes from through a lifecycle: the
// built-in one while the ConfigMap is missing or every version was rejected, the ConfigMap's
// version once one is accepted (and that a later one was rejected), built-in again once it
// is deleted; the generation is cascade_policy_generation's.
func TestSource(t *testing.T) {
	h := start(t)
	check := func(what string, wantGen int, wantSource string) {
		t.Helper()
		eventually(t, what, func() bool {
			gen, src := h.w.Source()
			return gen == wantGen && strings.HasPrefix(src, wantSource)
		})
		if gen, _ := h.w.Source(); float64(gen) != h.generation() {
			t.Errorf("%s: Source's generation %d, cascade_policy_generation %v", what, gen, h.generation())
		}
	}
	check("missing", 0, "built-in: ConfigMap cascade-system/cascade-policy not found")
	cm, err := h.cs.CoreV1().ConfigMaps("cascade-system").Create(context.Background(), policyCM(badDoc), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("rejected at once", 0, "built-in: every version of ConfigMap cascade-system/cascade-policy seen was rejected")
	cm.Data[policy.ConfigMapKey] = goodDoc
	cm.ResourceVersion = "7"
	h.update(t, cm)
	check("accepted", 1, "ConfigMap cascade-system/cascade-policy, resourceVersion 7")
	if _, src := h.w.Source(); strings.Contains(src, "rejected") {
		t.Errorf("accepted: source %q", src)
	}
	cm.Data[policy.ConfigMapKey] = badDoc
	cm.ResourceVersion = "8"
	h.update(t, cm)
	check("a later version rejected", 1, "ConfigMap cascade-system/cascade-policy, resourceVersion 7 (a later version was rejected")
	if err := h.cs.CoreV1().ConfigMaps("cascade-system").Delete(context.Background(), "cascade-policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("deleted", 2, "built-in: ConfigMap cascade-system/cascade-policy not found")
}

// TestDeletedWhileUnwatched: a relist that no longer holds the ConfigMap (deleted while the
// watch was down) puts the built-in policy back in force, as a watched deletion does; a first
// list without it is Start's to report, and a relist that holds it changes nothing.
func TestDeletedWhileUnwatched(t *testing.T) {
	w := New(Options{Client: fake.NewClientset(), Namespace: "cascade-system", Name: "cascade-policy", Events: record.NewFakeRecorder(20)})
	s := &cmStore{ctx: context.Background(), w: w}
	cm := policyCM(goodDoc)
	cm.ResourceVersion = "3"
	if err := s.Replace([]any{cm}, "3"); err != nil {
		t.Fatal(err)
	}
	if !w.Present() || w.Policy().Rules() != 1 {
		t.Fatalf("after the first list: present %t, %d rules; want the ConfigMap's rule in force", w.Present(), w.Policy().Rules())
	}
	if err := s.Replace([]any{cm}, "5"); err != nil {
		t.Fatal(err)
	}
	if gen, _ := w.Source(); gen != 1 || !w.Present() {
		t.Fatalf("a relist holding the same ConfigMap: generation %d, present %t; want 1, present", gen, w.Present())
	}
	if err := s.Replace(nil, "9"); err != nil {
		t.Fatal(err)
	}
	if gen, src := w.Source(); w.Present() || w.Policy().Rules() != 0 || gen != 2 || !strings.HasPrefix(src, "built-in") || !w.Authoritative() {
		t.Errorf("after a relist without it: present %t, %d rules, generation %d, source %q, authoritative %t; want the built-in policy, authoritatively", w.Present(), w.Policy().Rules(), gen, src, w.Authoritative())
	}
}
