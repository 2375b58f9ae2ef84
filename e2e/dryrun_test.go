//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

var dryRunLine = regexp.MustCompile(`"Dry run: not sent" action="([^"]+)" resource="[^"]*" namespace="([^"]*)" name="([^"]+)"`)

// wouldBe returns, by action, the names in ns that cascade's log says it would have written.
func wouldBe(t *testing.T, c *harness.Cascade, ns string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(c.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range dryRunLine.FindAllStringSubmatch(string(data), -1) {
		if m[2] == ns {
			out[m[1]] = append(out[m[1]], m[3])
		}
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out
}

func names(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	sort.Strings(out)
	return out
}

// TestDryRunBesideInTree (issue 13.3): cascade in --dry-run, first alone (kube-apiserver's
// request metrics show no write but the test's own), then beside kube-controller-manager's
// collector on the same control plane, through background, foreground and orphan deletions.
// The in-tree collector does the work; cascade sends no write at all (its own request counter)
// and would have acted on exactly the objects the in-tree collector deleted or orphaned, and
// on nothing else in the namespace (besides the owners' GC finalizers). The in-tree collector
// is throttled (4 QPS, burst 1) so that cascade, which decides without API calls, sees every
// dependent before it goes.
//
// On a control plane of its own: both collectors act on the whole cluster. On the suite's,
// the throttled in-tree collector would first work through what earlier tests left (owners
// waiting on a GC finalizer, dependents of owners it never saw), at 4 requests a second, and
// this test's objects would wait behind them past the 15 s after which cascade checks what it
// did; and cascade's dry-run counters (actions, checks, divergences) would count its decisions
// on those leftovers too.
func TestDryRunBesideInTree(t *testing.T) {
	// On a control plane of its own: runs beside the other such tests, once the tests on the
	// suite's control plane are done (t.Parallel), so that their waits overlap (CI's time).
	t.Parallel()
	ctx := context.Background()
	cp := framework.StartControlPlane(t, harness.Options{})
	cs := framework.ClientsFor(t, cp.RestConfig())
	ns := cs.NewNamespace(t)
	c := framework.StartReady(t, cp, "cascade-dryrun", suite.CascadeBin, "--dry-run", "--dry-run-divergence-after=15s")

	// Alone first: kube-apiserver's own request counts show that nothing but this test wrote,
	// while cascade decided on a background and an orphan deletion.
	ns0 := cs.NewNamespace(t)
	before := framework.APIServerRequests(t, cs)
	solo := cs.CreateCM(t, ns0, "solo")
	cs.CreateCMs(t, ns0, "solo-dep", 3, framework.CMRef(solo))
	or0 := cs.CreateCM(t, ns0, "solo-orphan")
	cs.CreateCMs(t, ns0, "solo-orphaned", 2, framework.CMRef(or0))
	cs.DeleteCM(t, ns0, "solo", metav1.DeletePropagationBackground)
	cs.DeleteCM(t, ns0, "solo-orphan", metav1.DeletePropagationOrphan)
	framework.Eventually(t, collectTimeout, "cascade's dry-run decisions in "+ns0, func() (bool, error) {
		w := wouldBe(t, c, ns0)
		return len(w["delete"]) == 3 && len(w["remove_owner_refs"]) == 2 && len(w["remove_finalizer"]) == 1, nil
	})
	after := framework.APIServerRequests(t, cs)
	for key, want := range map[string]float64{
		"POST configmaps": 7, "DELETE configmaps": 2, // this test's own
		"PATCH configmaps": 0, "PUT configmaps": 0, "POST events": 0, "PATCH events": 0,
	} {
		if got := after[key] - before[key]; got != want {
			t.Errorf("kube-apiserver counted %.0f %s while cascade ran in --dry-run alone, want %.0f (the test's own)", got, key, want)
		}
	}

	k, err := cp.StartKubeControllerManager("kcm", harness.KCMOptions{QPS: 2, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	framework.StopAtCleanup(t, k.Process)
	kctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := framework.WaitInTreeGCSynced(kctx, k, 2); err != nil {
		t.Fatal(err)
	}

	bg := cs.CreateCM(t, ns, "bg")
	cs.CreateCMs(t, ns, "bg-dep", 6, framework.CMRef(bg))
	fg := cs.CreateCM(t, ns, "fg")
	cs.CreateCMs(t, ns, "fg-dep", 4, framework.RefTo("v1", "ConfigMap", fg.Name, fg.UID, true))
	or := cs.CreateCM(t, ns, "orphan")
	cs.CreateCMs(t, ns, "orphaned", 4, framework.CMRef(or))
	bystander := cs.CreateCM(t, ns, "bystander")
	cs.CreateCM(t, ns, "kept", framework.CMRef(bystander))

	cs.DeleteCM(t, ns, "bg", metav1.DeletePropagationBackground)
	cs.DeleteCM(t, ns, "fg", metav1.DeletePropagationForeground)
	cs.DeleteCM(t, ns, "orphan", metav1.DeletePropagationOrphan)

	// The in-tree collector finishes all three.
	cs.WaitCMCount(t, ns, "bg-dep-", 0, collectTimeout)
	cs.WaitCMCount(t, ns, "fg-dep-", 0, collectTimeout)
	cs.WaitCMGone(t, ns, "fg", collectTimeout)
	cs.WaitCMGone(t, ns, "orphan", collectTimeout)
	framework.Eventually(t, collectTimeout, "orphaned ConfigMaps released by the in-tree collector", func() (bool, error) {
		for _, n := range names("orphaned", 4) {
			cm, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil || len(cm.OwnerReferences) > 0 {
				return false, err
			}
		}
		return true, nil
	})
	// cascade has processed everything up to here once its graph saw the canary's owner go
	// (in dry run, its dependent is deleted by the in-tree collector; cascade logs the decision).
	canaryOwner := cs.CreateCM(t, ns, "canary")
	cs.CreateCM(t, ns, "canary-dep", framework.CMRef(canaryOwner))
	cs.DeleteCM(t, ns, "canary", metav1.DeletePropagationBackground)
	framework.Eventually(t, collectTimeout, "cascade's dry-run decision on the canary", func() (bool, error) {
		return slices.Contains(wouldBe(t, c, ns)["delete"], "canary-dep"), nil
	})

	got := wouldBe(t, c, ns)
	wantDeletes := append(append(names("bg-dep", 6), names("fg-dep", 4)...), "canary-dep")
	sort.Strings(wantDeletes)
	var divergence []string
	if !slices.Equal(got["delete"], wantDeletes) {
		divergence = append(divergence, fmt.Sprintf("deletes: cascade would have deleted %v, the in-tree collector deleted %v", got["delete"], wantDeletes))
	}
	if want := names("orphaned", 4); !slices.Equal(got["remove_owner_refs"], want) {
		divergence = append(divergence, fmt.Sprintf("orphaning: cascade would have released %v, the in-tree collector released %v", got["remove_owner_refs"], want))
	}
	for _, n := range got["remove_finalizer"] {
		if n != "fg" && n != "orphan" {
			divergence = append(divergence, "cascade would have removed a GC finalizer from "+n)
		}
	}
	for action, objs := range got {
		if action != "delete" && action != "remove_owner_refs" && action != "remove_finalizer" {
			divergence = append(divergence, fmt.Sprintf("cascade would have sent %s on %v", action, objs))
		}
	}
	t.Logf("divergence report (%d lines)", len(divergence))
	for _, d := range divergence {
		t.Errorf("divergence: %s", d)
	}
	if _, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("a dependent of a live owner must never be deleted: %v", err)
	}
	m := framework.Scrape(t, c)
	var writes float64
	for _, s := range m.Samples("cascade_api_requests_total") {
		if s.Labels["verb"] != "GET" {
			writes += s.Value
		}
	}
	if writes != 0 {
		t.Errorf("cascade in --dry-run sent %.0f requests that are not GETs, want 0", writes)
	}
	// The control plane is the test's own: every would-be delete is one of its namespaces'
	// (3 in the first, alone), each counted once.
	if v, _ := m.Value(`cascade_dry_run_actions_total{action="delete"}`); v != float64(3+len(wantDeletes)) {
		t.Errorf("cascade_dry_run_actions_total{action=\"delete\"} = %v, want %d", v, 3+len(wantDeletes))
	}
	// Cascade's own divergence check agrees: every would-be delete and release read again 15 s
	// later (the throttled in-tree collector needs about 6 s) matched what it did; those of the
	// first namespace (3 deletes, 2 releases) are read first.
	framework.WaitForMetric(t, c, "cascade_dry_run_checked_total", float64(3+2+len(wantDeletes)+4), collectTimeout)
	if v := framework.MetricValue(t, c, "cascade_dry_run_divergence_total"); v != 0 {
		t.Errorf("cascade_dry_run_divergence_total = %v, want 0\n%s", v, c.Tail(30))
	}
}
