//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestIgnoredOwnerReverified (issue 10.2): ConfigMaps are in --ignored-resources, so cascade
// never observes them. A Secret owned by a ConfigMap is kept while the ConfigMap exists (a live
// GET found it), and collected after the ConfigMap is deleted: the present answer is checked
// again while the Secret references it. Before re-verification the Secret leaked forever.
func TestIgnoredOwnerReverified(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	ctx := context.Background()
	c := suite.StartCascade(t, "--ignored-resources=configmaps,events,events.events.k8s.io", "--owner-reverify-period=1s")
	owner := cs.CreateCM(t, ns, "ignored-owner")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dep", OwnerReferences: []metav1.OwnerReference{framework.CMRef(owner)}}}
	if _, err := cs.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The owner was verified present (a GET, since its kind is not watched), and then checked
	// again at least once: the Secret must still be there.
	framework.WaitForMetric(t, c, `cascade_owner_verifications_total{result="present"}`, 2, collectTimeout)
	if _, err := cs.Kube.CoreV1().Secrets(ns).Get(ctx, "dep", metav1.GetOptions{}); err != nil {
		t.Fatalf("a dependent of an existing owner must never be collected: %v", err)
	}

	if err := cs.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	framework.WaitGone(t, "secret "+ns+"/dep", collectTimeout, func() error {
		_, err := cs.Kube.CoreV1().Secrets(ns).Get(ctx, "dep", metav1.GetOptions{})
		return err
	})
	t.Logf("dependent collected %v after its unobserved owner was deleted", time.Since(start).Round(100*time.Millisecond))
}
