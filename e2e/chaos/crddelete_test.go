//go:build e2e

package chaos

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestCRDDeletedOwnerHeldByFinalizer (traced from a chaos run, seed 1): a custom resource owns a
// ConfigMap and carries a foreign finalizer; its CRD is deleted. The apiserver deletes the
// custom resource, which stays Terminating until the finalizer goes, and the CRD with it. An
// owner being deleted without the foregroundDeletion finalizer still owns its dependents: the
// ConfigMap must stay until the owner is really gone. What must never happen: the ConfigMap
// collected while its owner is still there.
func TestCRDDeletedOwnerHeldByFinalizer(t *testing.T) {
	// On control planes of its own: runs beside the suite's other such tests once TestChaos, which
	// runs alone, is done (t.Parallel; go test's -parallel is GOMAXPROCS, 2 here), CI's time.
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "crd-held"
	cp, bin, kube := testPlane(ctx, t, ns)
	a, err := newAPI(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	var widget *kindDef
	for _, k := range kinds {
		if k.kind == "Widget" {
			widget = k
		}
	}
	if _, err := a.dyn.Resource(crdGVR).Create(ctx, crdObject(widget), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitCRDEstablished(ctx, a, widget.crd, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	framework.StartReady(t, cp, "cascade-crd-held", bin, "--discovery-period=1s", "--v=2")

	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": widget.apiVersion, "kind": widget.kind,
		"metadata": map[string]any{"name": "held", "namespace": ns, "finalizers": []any{holdFinalizer}}}}
	got, err := a.res(widget, ns).Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dep", Namespace: ns, OwnerReferences: []metav1.OwnerReference{
		{APIVersion: widget.apiVersion, Kind: widget.kind, Name: "held", UID: types.UID(got.GetUID())}}}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The same, created the moment before the CRD is deleted (cascade may not have observed
	// the owner yet when its kind starts going).
	w2 := w.DeepCopy()
	w2.SetName("held-late")
	got2, err := a.res(widget, ns).Create(ctx, w2, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep2 := dep.DeepCopy()
	dep2.Name = "dep-late"
	dep2.OwnerReferences[0].Name, dep2.OwnerReferences[0].UID = "held-late", types.UID(got2.GetUID())
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, dep2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.dyn.Resource(crdGVR).Delete(ctx, widget.crd, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the widget terminating", func() (bool, error) {
		u, err := a.res(widget, ns).Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return u.GetDeletionTimestamp() != nil, nil
	})
	canary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: ns, OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: "0b1d-never"}}}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, canary, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, "canary", time.Minute, func() error {
		_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "canary", metav1.GetOptions{})
		return err
	})
	// Several discovery periods with the widget Terminating: its dependent stays.
	framework.Consistently(t, 10*time.Second, "the dependent of a terminating owner", func() error {
		for _, n := range []string{"dep", "dep-late"} {
			if _, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	// The finalizer goes: the widget, then the CRD, go; the dependent is collected.
	for _, n := range []string{"held", "held-late"} {
		u, err := a.res(widget, ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.SetFinalizers(nil)
		if _, err := a.res(widget, ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"dep", "dep-late"} {
		framework.WaitGone(t, n, 2*time.Minute, func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
			return err
		})
	}
}
