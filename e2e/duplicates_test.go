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

// TestDuplicateReferencesBlock (issue 10.6): a dependent names its owner twice with identical
// references, only the second with blockOwnerDeletion. Deleted in the foreground, the owner
// waits for that dependent (which a foreign finalizer holds) and goes only once it is gone.
// Before identical references kept the strongest flag, the first (non-blocking) one won and
// the owner went at once.
func TestDuplicateReferencesBlock(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	ctx := context.Background()
	suite.StartCascade(t)
	owner := cs.CreateCM(t, ns, "owner")
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dep", Finalizers: []string{holdFinalizer}, OwnerReferences: []metav1.OwnerReference{
		framework.RefTo("v1", "ConfigMap", owner.Name, owner.UID, false),
		framework.RefTo("v1", "ConfigMap", owner.Name, owner.UID, true),
	}}}
	if _, err := cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_, _ = cs.Kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), "dep", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	t.Cleanup(release)
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationForeground)

	// cascade deletes the dependent (its finalizer holds it), then must wait for it.
	framework.Eventually(t, collectTimeout, "the dependent being deleted", func() (bool, error) {
		d, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "dep", metav1.GetOptions{})
		return err == nil && d.DeletionTimestamp != nil, err
	})
	canary(t, cs, ns) // cascade processed everything up to here
	framework.Consistently(t, 3*time.Second, "the owner waits for its blocking dependent", func() error {
		o, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the owner went while its blocking dependent exists: %v", err)
		}
		if o.DeletionTimestamp == nil {
			t.Fatal("the owner is not being deleted")
		}
		return nil
	})
	release()
	cs.WaitCMGone(t, ns, "owner", collectTimeout)
}
