//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestStuckDeletionDiagnosed (issue 12.5): a foreground owner blocked by a dependent that a
// foreign finalizer holds gets a DeletionStuck Warning Event naming the dependent and the
// finalizer once it has waited longer than --stuck-deletion-threshold, and
// cascade_oldest_waiting_owner_seconds{finalizer="foregroundDeletion"} shows the wait. Owners
// earlier tests left waiting in the foreground count in cascade's gauges too: this test's
// owner is one more in cascade_owners_waiting while it waits, and the oldest wait is at least
// its own.
func TestStuckDeletionDiagnosed(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	ctx := context.Background()
	c := suite.StartCascade(t, "--stuck-deletion-threshold=2s", "--finalizer-resync-period=1s")
	const waiting = `cascade_owners_waiting{finalizer="foregroundDeletion"}`
	base, _ := settled(t, c, waiting).Value(waiting)
	owner := cs.CreateCM(t, ns, "stuck-owner")
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{holdFinalizer},
		OwnerReferences: []metav1.OwnerReference{framework.RefTo("v1", "ConfigMap", owner.Name, owner.UID, true)}}}
	if _, err := cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_, _ = cs.Kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), "held", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	t.Cleanup(release)
	cs.DeleteCM(t, ns, "stuck-owner", metav1.DeletePropagationForeground)

	var msg string
	framework.Eventually(t, collectTimeout, "a DeletionStuck Event on the owner", func() (bool, error) {
		evs, err := cs.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=DeletionStuck,involvedObject.name=stuck-owner"})
		if err != nil || len(evs.Items) == 0 {
			return false, err
		}
		msg = evs.Items[0].Message
		return evs.Items[0].Type == corev1.EventTypeWarning, nil
	})
	for _, want := range []string{"on finalizer foregroundDeletion for 1 dependent(s)", "ConfigMap " + ns + "/held (being deleted, held by finalizers [" + holdFinalizer + "])"} {
		if !strings.Contains(msg, want) {
			t.Errorf("event message %q lacks %q", msg, want)
		}
	}
	framework.WaitForMetric(t, c, `cascade_oldest_waiting_owner_seconds{finalizer="foregroundDeletion"}`, 2, collectTimeout)
	if v := framework.MetricValue(t, c, waiting) - base; v != 1 {
		t.Errorf("%s is %g above its value before the test, want 1 (stuck-owner)", waiting, v)
	}

	// Released, the deletion finishes.
	release()
	cs.WaitCMGone(t, ns, "stuck-owner", collectTimeout)
	framework.Eventually(t, collectTimeout, "stuck-owner no longer counted as waiting", func() (bool, error) {
		return framework.MetricValue(t, c, waiting) == base, nil
	})
}
