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

// TestIgnoredOwnerReverified (issue 10.2): the test's own custom resource kind is in
// --ignored-resources, so cascade never observes its objects. A Secret owned by one is kept
// while the owner exists (a live GET found it), and collected after the owner is deleted: the
// present answer is checked again while the Secret references it. Before re-verification the
// Secret leaked forever. The owner's kind is the test's own so that only its verifications
// count: with a built-in kind ignored (ConfigMaps, say), every object earlier tests left with
// an owner of that kind would be verified, and verified again, too.
func TestIgnoredOwnerReverified(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	ctx := context.Background()
	gvr := createCRD(t, cs, "reverify.e2e.cascade.dev", "Relic", "Namespaced")
	c := suite.StartCascade(t, "--ignored-resources="+gvr.Resource+"."+gvr.Group+",events,events.events.k8s.io", "--owner-reverify-period=1s")
	const present = `cascade_owner_verifications_total{result="present"}`
	base, _ := settled(t, c, present).Value(present)
	owner := createCR(t, cs, gvr, "Relic", ns, "ignored-owner")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dep", OwnerReferences: []metav1.OwnerReference{ownerRefTo(owner)}}}
	if _, err := cs.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The owner was verified present (a GET, since its kind is not watched), and then checked
	// again at least once: the Secret must still be there.
	framework.WaitForMetric(t, c, present, base+2, collectTimeout)
	if _, err := cs.Kube.CoreV1().Secrets(ns).Get(ctx, "dep", metav1.GetOptions{}); err != nil {
		t.Fatalf("a dependent of an existing owner must never be collected: %v", err)
	}

	deleteCR(t, cs, gvr, ns, owner.GetName())
	start := time.Now()
	framework.WaitGone(t, "secret "+ns+"/dep", collectTimeout, func() error {
		_, err := cs.Kube.CoreV1().Secrets(ns).Get(ctx, "dep", metav1.GetOptions{})
		return err
	})
	t.Logf("dependent collected %v after its unobserved owner was deleted", time.Since(start).Round(100*time.Millisecond))
}
