//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// explain runs `cascade explain` against c and returns its output.
func explain(t *testing.T, c *harness.Cascade, ns, what string) string {
	t.Helper()
	cmd := exec.Command(suite.CascadeBin, "explain", what, "-n", ns, "--url", strings.TrimSuffix(c.MetricsURL, "/metrics"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cascade explain %s: %v\n%s", what, err, out)
	}
	return string(out)
}

// eventuallyExplains waits until the explanation of what holds every want.
func eventuallyExplains(t *testing.T, c *harness.Cascade, ns, what string, want ...string) string {
	t.Helper()
	var out string
	framework.Eventually(t, collectTimeout, "cascade explain "+what+" shows "+strings.Join(want, ", "), func() (bool, error) {
		out = explain(t, c, ns, what)
		for _, w := range want {
			if !strings.Contains(out, w) {
				return false, nil
			}
		}
		return true, nil
	})
	return out
}

// TestExplain (issue 12.4): `cascade explain` on a collectable dependent (cascade in --dry-run,
// so it stays), a dependent kept by a solid owner, a dependent waiting for an owner of an
// unknown kind, and a foreground owner blocked by a dependent held by a foreign finalizer.
func TestExplain(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	ctx := context.Background()
	shadow := suite.StartCascade(t, "--dry-run")

	gone := cs.CreateCM(t, ns, "gone")
	cs.CreateCM(t, ns, "collectable", framework.CMRef(gone))
	cs.DeleteCM(t, ns, "gone", metav1.DeletePropagationBackground)
	out := eventuallyExplains(t, shadow, ns, "configmaps/collectable", "Absent", "Decision now: Delete (OwnersGone), propagation Background")
	t.Logf("collectable:\n%s", out)
	// Issue 31.5: with a kubeconfig, --url takes kubectl's names (short, singular), resolved with
	// the cluster's discovery as through the API server.
	for _, what := range []string{"cm/collectable", "configmap/collectable"} {
		cmd := exec.Command(suite.CascadeBin, "explain", what, "-n", ns, "--url", strings.TrimSuffix(shadow.MetricsURL, "/metrics"), "--kubeconfig", suite.CP.KubeconfigPath)
		if got, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(got), "Decision now: Delete (OwnersGone)") {
			t.Errorf("cascade explain %s --url --kubeconfig: %v\n%s", what, err, got)
		}
	}

	live := cs.CreateCM(t, ns, "live")
	cs.CreateCM(t, ns, "kept", framework.CMRef(live))
	out = eventuallyExplains(t, shadow, ns, "configmaps/kept", "Present", "Decision now: Keep (SolidOwner)")
	t.Logf("kept:\n%s", out)

	cs.CreateCM(t, ns, "waiting", framework.RefTo("nope.e2e.cascade.dev/v1", "Nope", "n", "11111111-2222-3333-4444-555555555555", false))
	out = eventuallyExplains(t, shadow, ns, "configmaps/waiting", "Unknown", "no REST mapping", "Decision now: Wait (UnverifiedOwner)")
	t.Logf("waiting:\n%s", out)

	// A real collector for the foreground case: it deletes the dependent, whose own finalizer
	// holds it, so the owner waits.
	c := suite.StartCascade(t)
	fg := cs.CreateCM(t, ns, "fg-owner")
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{holdFinalizer},
		OwnerReferences: []metav1.OwnerReference{framework.RefTo("v1", "ConfigMap", fg.Name, fg.UID, true)}}}
	if _, err := cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // let the namespace go
		_, _ = cs.Kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), "held", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	cs.DeleteCM(t, ns, "fg-owner", metav1.DeletePropagationForeground)
	out = eventuallyExplains(t, c, ns, "configmaps/fg-owner", "being deleted, GC finalizers [foregroundDeletion]",
		"1 blocking its foreground deletion", "blocking, being deleted, held by finalizers ["+holdFinalizer+"]")
	t.Logf("blocked foreground owner:\n%s", out)
}
