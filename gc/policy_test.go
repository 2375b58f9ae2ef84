package gc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/internal/work/worktest"
	"github.com/cascade-gc/cascade/policy"
)

// policyT0 is a whole second, so the recorded time is exactly the clock's.
var policyT0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// compiledPolicy parses a policy document for a test.
func compiledPolicy(t *testing.T, rules string) *policy.Compiled {
	t.Helper()
	c, _, errs := policy.Parse([]byte("apiVersion: cascade.dev/v1alpha1\nkind: Policy\n" + rules))
	if len(errs) > 0 {
		t.Fatalf("policy: %v", errs)
	}
	return c
}

// policyController is newControllerOver with a policy, a fake clock and an event recorder.
func policyController(t *testing.T, fake *metadatafake.FakeMetadataClient, pol *policy.Compiled) (*Controller, *clocktesting.FakeClock, *record.FakeRecorder) {
	t.Helper()
	clk := clocktesting.NewFakeClock(policyT0)
	rec := record.NewFakeRecorder(10)
	c := newControllerOver(t, fake)
	c.opts.Policy = func() *policy.Compiled { return pol }
	c.opts.Clock = clk
	c.opts.Events = rec
	c.nsLabels = client.NewNamespaceLabels(clk)
	c.deleteQueue.ShutDown() // New's, replaced by one on the fake clock (newControllerOver's cleanup shuts that one)
	c.deleteQueue = work.NewQueue("attempt_to_delete", work.Options[types.UID]{Clock: clk})
	return c, clk, rec
}

func namespaceObj(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}
}

// inNamespace moves a widget (graph form) to namespace ns.
func inNamespace(o graph.Object, ns string) graph.Object {
	o.Namespace = ns
	return o
}

// waitQueued takes what the delete queue holds once its goroutines have handled the clock's
// last step (a delayed add came due), failing when nothing is queued. Call it in a synctest
// bubble: synctest.Wait returns when they wait on the clock again.
func waitQueued(t *testing.T, q *work.Queue[types.UID]) []types.UID {
	t.Helper()
	synctest.Wait()
	if q.Len() == 0 {
		t.Fatal("nothing queued")
	}
	return worktest.Drain(q)
}

// TestCollectNever: a dependent whose owners are all gone, of a resource the policy says
// collect: Never for in a namespace its selector matches, loses the references to them and is
// kept, with a Normal Event on it saying why. In a namespace the selector does not match, it is
// deleted as built in. One GET per namespace reads the labels.
func TestCollectNever(t *testing.T) {
	fake := clienttest.NewFake(
		namespaceObj("keep", map[string]string{"team": "a"}), namespaceObj("other", nil),
		clienttest.Widget("keep", "dep", "u-dep", "3", clienttest.OwnerRef("u-o1", nil), clienttest.OwnerRef("u-o2", nil)),
		clienttest.Widget("keep", "dep2", "u-dep2", "3", clienttest.OwnerRef("u-o1", nil)),
		clienttest.Widget("other", "dep", "u-other", "3", clienttest.OwnerRef("u-o3", nil)),
	)
	c, _, rec := policyController(t, fake, compiledPolicy(t, `
rules:
- resource: widgets.example.com
  namespaceSelector: {matchLabels: {team: a}}
  collect: Never
`))
	observe(c, inNamespace(widgetObj("w-u-o1", "u-o1"), "keep"), inNamespace(widgetObj("w-u-o2", "u-o2"), "keep"), inNamespace(widgetObj("w-u-o3", "u-o3"), "other"),
		inNamespace(widgetObj("dep", "u-dep", "u-o1", "u-o2"), "keep"), inNamespace(widgetObj("dep2", "u-dep2", "u-o1"), "keep"),
		inNamespace(widgetObj("dep", "u-other", "u-o3"), "other"))
	c.apply(graph.Event{Type: graph.EventDeleted, Object: graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "keep", Name: "w-u-o1", UID: "u-o1"}}})
	c.apply(graph.Event{Type: graph.EventDeleted, Object: graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "keep", Name: "w-u-o2", UID: "u-o2"}}})
	c.apply(graph.Event{Type: graph.EventDeleted, Object: graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "other", Name: "w-u-o3", UID: "u-o3"}}})

	ctx := context.Background()
	for _, uid := range []types.UID{"u-dep", "u-dep2", "u-other"} {
		if out, err := c.attemptToDelete(ctx, uid); out != work.Done || err != nil {
			t.Errorf("%s: %v, %v; want Done", uid, out, err)
		}
	}
	want := []string{
		"GET namespaces.v1 /keep",
		`PATCH widgets.v1.example.com keep/dep strategic {"metadata":{"uid":"u-dep","ownerReferences":[{"$patch":"delete","uid":"u-o1"},{"$patch":"delete","uid":"u-o2"}]}}`,
		`PATCH widgets.v1.example.com keep/dep2 strategic {"metadata":{"uid":"u-dep2","ownerReferences":[{"$patch":"delete","uid":"u-o1"}]}}`,
		"GET namespaces.v1 /other",
		"DELETE widgets.v1.example.com other/dep uid=u-other rv=3 propagation=Background",
	}
	if got := clienttest.Actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
	if refs, err := clienttest.LiveOwners(fake, widgets, "keep", "dep"); err != nil || len(refs) != 0 {
		t.Errorf("dep's references: %v, %v; want none, and dep kept", refs, err)
	}
	evs := clienttest.Events(rec)
	if len(evs) != 2 || !strings.HasPrefix(evs[0], "Normal "+EventReasonCollectNever+" ") ||
		!strings.Contains(evs[0], "rules[0] (collect: Never for widgets.example.com)") || !strings.Contains(evs[0], "Widget w-u-o1 (uid u-o1), Widget w-u-o2 (uid u-o2)") {
		t.Errorf("events = %q, want one PolicyCollectNever per kept dependent naming the rule and the owners", evs)
	}
}

// TestCollectNeverNamespaceLabelsUnreadable: without the namespace's labels the rule cannot be
// matched: nothing is done, and the item is retried.
func TestCollectNeverNamespaceLabelsUnreadable(t *testing.T) {
	fake := clienttest.NewFake(clienttest.Widget("ns", "dep", "u-dep", "3", clienttest.OwnerRef("u-o1", nil)))
	fake.PrependReactor("get", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd is down"))
	})
	c, _, _ := policyController(t, fake, compiledPolicy(t, "rules:\n- resource: widgets.example.com\n  namespaceSelector: {}\n  collect: Never\n"))
	observe(c, widgetObj("w-u-o1", "u-o1"), widgetObj("dep", "u-dep", "u-o1"))
	observeDeleted(c, "u-o1")
	if out, err := c.attemptToDelete(context.Background(), "u-dep"); out != work.Retry || err == nil {
		t.Errorf("outcome %v, %v; want Retry with the error", out, err)
	}
	if got := clienttest.Actions(fake); !slices.Equal(got, []string{"GET namespaces.v1 /ns"}) {
		t.Errorf("actions %q, want the failed read only", got)
	}
}

// TestCollectAfter: the first time every owner is found gone, the time is recorded on the
// dependent and it is kept; it is queued again for when the delay ends, then deleted with the
// live resourceVersion. Looking earlier keeps it without writing anything. (In a synctest bubble,
// as every test of the delay: waitQueued.)
func TestCollectAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clienttest.NewFake(clienttest.Widget("ns", "dep", "u-dep", "3", clienttest.OwnerRef("u-o1", nil)))
		c, clk, rec := policyController(t, fake, compiledPolicy(t, "rules:\n- resource: widgets.example.com\n  collect: After 1m\n"))
		observe(c, widgetObj("w-u-o1", "u-o1"), widgetObj("dep", "u-dep", "u-o1"))
		observeDeleted(c, "u-o1")
		worktest.Drain(c.deleteQueue)
		ctx := context.Background()
		const get = "GET widgets.v1.example.com ns/dep"

		if out, err := c.attemptToDelete(ctx, "u-dep"); out != work.Done || err != nil {
			t.Fatalf("first look: %v, %v", out, err)
		}
		want := []string{get, `PATCH widgets.v1.example.com ns/dep strategic {"metadata":{"uid":"u-dep","annotations":{"cascade.dev/orphaned-at":"2026-05-01T10:00:00Z owners=u-o1"}}}`}
		if got := clienttest.Actions(fake); !slices.Equal(got, want) {
			t.Fatalf("first look: actions\n%q\nwant\n%q", got, want)
		}
		if evs := clienttest.Events(rec); len(evs) != 1 || !strings.Contains(evs[0], EventReasonCollectAfter+" Every owner is gone; kept until 2026-05-01T10:01:00Z") {
			t.Errorf("events %q, want one PolicyCollectAfter with the time", evs)
		}

		fake.ClearActions()
		clk.Step(30 * time.Second)
		if out, err := c.attemptToDelete(ctx, "u-dep"); out != work.Done || err != nil {
			t.Fatalf("look after 30s: %v, %v", out, err)
		}
		if got := clienttest.Actions(fake); !slices.Equal(got, []string{get}) {
			t.Errorf("look after 30s: actions %q, want the read only", got)
		}

		clk.Step(30 * time.Second)
		if got := waitQueued(t, c.deleteQueue); !slices.Equal(got, []types.UID{"u-dep"}) {
			t.Fatalf("queued %v when the delay ended", got)
		}
		fake.ClearActions()
		if out, err := c.attemptToDelete(ctx, "u-dep"); out != work.Done || err != nil {
			t.Fatalf("look after 1m: %v, %v", out, err)
		}
		if got := clienttest.Actions(fake); !slices.Equal(got, []string{get, "DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background"}) {
			t.Errorf("look after 1m: actions %q, want the read and the DELETE", got)
		}
		if _, err := clienttest.Live(fake, widgets, "ns", "dep"); !apierrors.IsNotFound(err) {
			t.Errorf("dep after the delay: %v, want deleted", err)
		}
		if len(clienttest.Events(rec)) != 0 {
			t.Error("events after the first look")
		}
	})
}

// TestCollectAfterSurvivesRestart: a new controller (an empty graph, as after a restart) finds
// the time recorded by the previous one and waits only for what is left; a time recorded for
// other owners (the dependent was adopted and orphaned again) starts the delay anew.
func TestCollectAfterSurvivesRestart(t *testing.T) {
	for _, tt := range []struct {
		name      string
		recorded  string
		wantPatch bool
		wantAfter time.Duration
	}{
		{"recorded 40s ago for these owners", "2026-05-01T09:59:20Z owners=u-o1", false, 20 * time.Second},
		{"recorded for other owners", "2026-05-01T09:00:00Z owners=u-old", true, time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dep := clienttest.Widget("ns", "dep", "u-dep", "3", clienttest.OwnerRef("u-o1", nil))
				dep.Annotations = map[string]string{policy.OrphanedAtAnnotation: tt.recorded}
				fake := clienttest.NewFake(dep)
				c, clk, _ := policyController(t, fake, compiledPolicy(t, "rules:\n- resource: widgets.example.com\n  collect: After 1m\n"))
				observe(c, widgetObj("dep", "u-dep", "u-o1")) // the owner is never observed: verified absent
				c.apply(graph.Event{Type: graph.EventOwnerVerified, Owner: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: "w-u-o1", UID: "u-o1"}})
				worktest.Drain(c.deleteQueue)
				if out, err := c.attemptToDelete(context.Background(), "u-dep"); out != work.Done || err != nil {
					t.Fatalf("%v, %v", out, err)
				}
				patched := slices.ContainsFunc(clienttest.Actions(fake), func(a string) bool { return strings.HasPrefix(a, "PATCH ") })
				if patched != tt.wantPatch {
					t.Errorf("patched %t, want %t: %q", patched, tt.wantPatch, clienttest.Actions(fake))
				}
				clk.Step(tt.wantAfter - time.Second)
				synctest.Wait() // the queue has handled the step
				if n := c.deleteQueue.Len(); n != 0 {
					t.Errorf("queued a second before the delay ends")
				}
				clk.Step(time.Second)
				waitQueued(t, c.deleteQueue)
			})
		})
	}
}

// TestCollectAfterStaleView: a live object whose references differ from the graph's view is
// not decided on: nothing is written, and the item is retried.
func TestCollectAfterStaleView(t *testing.T) {
	fake := clienttest.NewFake(clienttest.Widget("ns", "dep", "u-dep", "4", clienttest.OwnerRef("u-o1", nil), clienttest.OwnerRef("u-new", nil)))
	c, _, _ := policyController(t, fake, compiledPolicy(t, "rules:\n- resource: widgets.example.com\n  collect: After 1m\n"))
	observe(c, widgetObj("w-u-o1", "u-o1"), widgetObj("dep", "u-dep", "u-o1"))
	observeDeleted(c, "u-o1")
	if out, err := c.attemptToDelete(context.Background(), "u-dep"); out != work.Retry || err != nil {
		t.Errorf("%v, %v; want Retry", out, err)
	}
	if got := clienttest.Actions(fake); !slices.Equal(got, []string{"GET widgets.v1.example.com ns/dep"}) {
		t.Errorf("actions %q, want the read only", got)
	}
}

// TestPolicyIgnoredResources: the policy's ignoredResources add to --ignored-resources.
func TestPolicyIgnoredResources(t *testing.T) {
	c := New(Options{Ignored: map[schema.GroupResource]struct{}{{Resource: "events"}: {}}})
	if got := c.ignored(); len(got) != 1 {
		t.Errorf("without a policy: %v", got)
	}
	pol := compiledPolicy(t, "ignoredResources: [podtemplates, widgets.example.com]\n")
	c.opts.Policy = func() *policy.Compiled { return pol }
	got := c.ignored()
	for _, gr := range []schema.GroupResource{{Resource: "events"}, {Resource: "podtemplates"}, {Group: "example.com", Resource: "widgets"}} {
		if _, ok := got[gr]; !ok {
			t.Errorf("%s not ignored: %v", gr, got)
		}
	}
	if len(c.opts.Ignored) != 1 {
		t.Errorf("the flag's set was modified: %v", c.opts.Ignored)
	}
}

// TestNamespaceLabelsCache: one GET per namespace per TTL; a missing namespace has no labels.
func TestNamespaceLabelsCache(t *testing.T) {
	fake := clienttest.NewFake(namespaceObj("a", map[string]string{"team": "a"}))
	clk := clocktesting.NewFakeClock(policyT0)
	l := client.NewNamespaceLabels(clk)
	ctx := context.Background()
	c := newControllerOver(t, fake).opts.Client
	for range 2 {
		if got, err := l.Get(ctx, c, "a"); err != nil || got["team"] != "a" {
			t.Fatalf("labels of a: %v, %v", got, err)
		}
	}
	if got, err := l.Get(ctx, c, "gone"); err != nil || len(got) != 0 {
		t.Errorf("labels of a missing namespace: %v, %v", got, err)
	}
	clk.Step(client.NamespaceLabelsTTL)
	if _, err := l.Get(ctx, c, "a"); err != nil {
		t.Fatal(err)
	}
	want := []string{"GET namespaces.v1 /a", "GET namespaces.v1 /gone", "GET namespaces.v1 /a"}
	if got := clienttest.Actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
}
