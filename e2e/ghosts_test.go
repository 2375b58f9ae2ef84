//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
	"github.com/cascade-gc/cascade/gc"
)

// Ghosts (issue 10.4): objects of a resource cascade stopped watching must not stay in its
// graph as observed owners or blocking dependents.

// createCR creates the custom resource ns/name of kind at gvr's version, owned by owners.
func createCR(t *testing.T, cs framework.Clients, gvr schema.GroupVersionResource, kind, ns, name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind}}
	u.SetName(name)
	u.SetOwnerReferences(owners)
	got, err := cs.Dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s/%s: %v", kind, ns, name, err)
	}
	return got
}

func deleteCR(t *testing.T, cs framework.Clients, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if err := cs.Dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
}

// ownerRefTo is a plain ownerReference to u, at the apiVersion u was read at.
func ownerRefTo(u *unstructured.Unstructured) metav1.OwnerReference {
	return framework.RefTo(u.GetAPIVersion(), u.GetKind(), u.GetName(), u.GetUID(), false)
}

// observedObjects is cascade_graph_objects for one apiVersion and kind.
func observedObjects(t *testing.T, c *harness.Cascade, apiVersion, kind string) float64 {
	t.Helper()
	return framework.MetricValue(t, c, fmt.Sprintf(`cascade_graph_objects{api_version=%q,kind=%q}`, apiVersion, kind))
}

// waitWatchedOnly waits until cascade watches gvr and none of others.
func waitWatchedOnly(t *testing.T, c *harness.Cascade, gvr schema.GroupVersionResource, others ...schema.GroupVersionResource) {
	t.Helper()
	framework.Eventually(t, collectTimeout, fmt.Sprintf("cascade watching %s.%s/%s only", gvr.Resource, gvr.Group, gvr.Version), func() (bool, error) {
		m, err := framework.ReadMetrics(c)
		if err != nil {
			return false, err
		}
		if !watched(m, gvr) {
			return false, nil
		}
		for _, o := range others {
			if watched(m, o) {
				return false, nil
			}
		}
		return true, nil
	})
}

// updateCRD reads the CRD name, lets change edit it, and writes it back, retrying conflicts.
func updateCRD(t *testing.T, cs framework.Clients, name string, change func(crd *unstructured.Unstructured) error) {
	t.Helper()
	ctx := context.Background()
	framework.Eventually(t, 30*time.Second, "CRD "+name+" updated", func() (bool, error) {
		crd, err := cs.Dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if err := change(crd); err != nil {
			t.Fatal(err)
		}
		_, err = cs.Dyn.Resource(crdGVR).Update(ctx, crd, metav1.UpdateOptions{})
		return err == nil, err
	})
}

// crdVersion is one served version of a CRD with a schema that keeps any field.
func crdVersion(name string, storage bool) map[string]any {
	return map[string]any{
		"name": name, "served": true, "storage": storage,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "x-kubernetes-preserve-unknown-fields": true,
		}},
	}
}

// missingWebhookConversion is a CRD's spec.conversion through a webhook whose service does not
// exist: a version other than the storage one cannot be listed until the conversion is None.
func missingWebhookConversion() map[string]any {
	return map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig": map[string]any{"service": map[string]any{
				"namespace": "no-such-namespace", "name": "no-such-webhook", "path": "/convert", "port": int64(443),
			}},
		},
	}
}

// versionsBehindMissingWebhook is a change for updateCRD: the CRD serves versions (crdVersion),
// converted by missingWebhookConversion.
func versionsBehindMissingWebhook(versions ...any) func(crd *unstructured.Unstructured) error {
	return func(crd *unstructured.Unstructured) error {
		if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
			return err
		}
		return unstructured.SetNestedField(crd.Object, missingWebhookConversion(), "spec", "conversion")
	}
}

// TestCRDDeletedDependentsCollected: custom resources own ConfigMaps; their CRD is deleted (the
// apiserver deletes the custom resources, discovery drops the resource, cascade stops its
// monitor): the ConfigMaps are collected, and no object of the kind stays in the graph.
func TestCRDDeletedDependentsCollected(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "haunts.e2e.cascade.dev", "Haunt", "Namespaced")
	c := suite.StartCascade(t, "--discovery-period=2s")
	waitWatchedOnly(t, c, gvr)
	for i := range 3 {
		o := createCR(t, cs, gvr, "Haunt", ns, fmt.Sprintf("owner-%d", i))
		cs.CreateCM(t, ns, fmt.Sprintf("dep-%d", i), ownerRefTo(o))
	}
	framework.Eventually(t, collectTimeout, "the Haunts observed", func() (bool, error) {
		return observedObjects(t, c, gvr.GroupVersion().String(), "Haunt") == 3, nil
	})

	deleteCRD(t, cs, gvr.Resource+"."+gvr.Group)
	cs.WaitCMCount(t, ns, "dep-", 0, collectTimeout)
	framework.Eventually(t, collectTimeout, "the Haunts' resource no longer watched", func() (bool, error) {
		return !watched(framework.Scrape(t, c), gvr), nil
	})
	if n := observedObjects(t, c, gvr.GroupVersion().String(), "Haunt"); n != 0 {
		t.Errorf("%v Haunts still observed after their CRD was deleted", n)
	}
}

// TestPreferredVersionSwitch: a CRD's preferred version moves twice while its objects own
// ConfigMaps that claim the first version (v1, the storage version throughout).
//
//  1. v2 is added (conversion None): cascade switches its monitor from v1 to v2; an owner
//     deleted while it does so has its ConfigMap collected.
//  2. v3 is added behind a conversion webhook that is not deployed yet, so v3 cannot be listed
//     for a while (as when an operator upgrade applies the CRD before its webhook runs):
//     cascade switches to v3 and watches no version it can list. An owner deleted then (through
//     v1) is seen by no watch. Once the webhook is "fixed" (conversion None) v3 lists; that list
//     lacks the deleted owner, which must not stay a ghost: its ConfigMap is collected.
//
// The owner that is kept keeps its ConfigMap throughout: after a canary (an owner deleted once
// cascade watches v3 again) has its ConfigMap collected, the kept ConfigMap is still there.
// Before issue 10.4, step 2's owner stayed observed at v2 in cascade's graph for good and its
// ConfigMap was never collected.
func TestPreferredVersionSwitch(t *testing.T) {
	const group, kind = "spectres.e2e.cascade.dev", "Spectre"
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	v1 := createCRD(t, cs, group, kind, "Namespaced")
	v2, v3 := v1, v1
	v2.Version, v3.Version = "v2", "v3"
	crdName := v1.Resource + "." + group
	c := suite.StartCascade(t, "--discovery-period=2s")
	waitWatchedOnly(t, c, v1)

	kept := createCR(t, cs, v1, kind, ns, "kept")
	cs.CreateCM(t, ns, "of-kept", ownerRefTo(kept))
	doomed := map[int]*unstructured.Unstructured{}
	for _, i := range []int{1, 2} {
		doomed[i] = createCR(t, cs, v1, kind, ns, fmt.Sprintf("doomed-%d", i))
		cs.CreateCM(t, ns, fmt.Sprintf("of-doomed-%d", i), ownerRefTo(doomed[i]))
	}
	framework.Eventually(t, collectTimeout, "the Spectres observed at v1", func() (bool, error) {
		return observedObjects(t, c, group+"/v1", kind) == 3, nil
	})

	// 1. v2, conversion None; an owner deleted while cascade switches.
	updateCRD(t, cs, crdName, func(crd *unstructured.Unstructured) error {
		return unstructured.SetNestedSlice(crd.Object, []any{crdVersion("v1", true), crdVersion("v2", false)}, "spec", "versions")
	})
	deleteCR(t, cs, v1, ns, "doomed-1")
	waitWatchedOnly(t, c, v2, v1)
	cs.WaitCMGone(t, ns, "of-doomed-1", collectTimeout)
	framework.Eventually(t, collectTimeout, "the Spectres observed at v2", func() (bool, error) {
		return observedObjects(t, c, group+"/v2", kind) == 2, nil
	})

	// 2. v3 behind a conversion webhook that does not exist: v3 cannot be listed.
	updateCRD(t, cs, crdName, versionsBehindMissingWebhook(crdVersion("v1", true), crdVersion("v2", false), crdVersion("v3", false)))
	waitWatchedOnly(t, c, v3, v1, v2)
	unsyncedV3 := fmt.Sprintf(`cascade_resource_unsynced{group=%q,resource=%q,version=%q}`, v3.Group, v3.Resource, v3.Version)
	framework.WaitForMetric(t, c, unsyncedV3, 1, collectTimeout)
	deleteCR(t, cs, v1, ns, "doomed-2") // stored at v1: no conversion needed
	// The webhook is "deployed": conversion None again, v3 lists.
	updateCRD(t, cs, crdName, func(crd *unstructured.Unstructured) error {
		return unstructured.SetNestedField(crd.Object, map[string]any{"strategy": "None"}, "spec", "conversion")
	})
	framework.Eventually(t, collectTimeout, "v3 synced", func() (bool, error) {
		return framework.MetricValue(t, c, unsyncedV3) == 0, nil
	})
	cs.WaitCMGone(t, ns, "of-doomed-2", collectTimeout)

	// Canary: cascade collects at v3; the kept owner's ConfigMap is still there.
	canary := createCR(t, cs, v3, kind, ns, "canary")
	cs.CreateCM(t, ns, "of-canary", ownerRefTo(canary))
	deleteCR(t, cs, v3, ns, "canary")
	cs.WaitCMGone(t, ns, "of-canary", collectTimeout)
	framework.Consistently(t, 3*time.Second, "the kept owner's ConfigMap stays", func() error {
		_, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "of-kept", metav1.GetOptions{})
		return err
	})
	if n := observedObjects(t, c, group+"/v2", kind); n != 0 {
		t.Errorf("%v Spectres still observed at v2, which cascade no longer watches", n)
	}
}

// TestCRDDeletedBlockerReleasesForegroundOwner: a custom resource blocks a ConfigMap deleted in
// the foreground, and cascade sees neither its deletion nor the ConfigMap's finish on its own:
// the CRD's preferred version moved to v2, which cannot be listed (its conversion webhook is
// missing), so no version of the kind is watched that could report the blocker's deletion.
// The CRD is then deleted (the apiserver deletes the blocker with it, discovery drops the
// kind): the blocker must not stay a ghost blocking the owner, which finishes. Before issue
// 10.4 the blocker stayed observed at v1 in cascade's graph for good and the owner stayed
// Terminating.
func TestCRDDeletedBlockerReleasesForegroundOwner(t *testing.T) {
	const group, kind = "wraiths.e2e.cascade.dev", "Wraith"
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	v1 := createCRD(t, cs, group, kind, "Namespaced")
	v2 := v1
	v2.Version = "v2"
	crdName := v1.Resource + "." + group
	c := suite.StartCascade(t, "--discovery-period=2s")
	waitWatchedOnly(t, c, v1)

	owner := cs.CreateCM(t, ns, "fg-owner")
	createCR(t, cs, v1, kind, ns, "blocker", framework.RefTo("v1", "ConfigMap", owner.Name, owner.UID, true))
	framework.Eventually(t, collectTimeout, "the blocker observed", func() (bool, error) {
		return observedObjects(t, c, group+"/v1", kind) == 1, nil
	})

	// v2, which cannot be listed, becomes the preferred version.
	updateCRD(t, cs, crdName, versionsBehindMissingWebhook(crdVersion("v1", true), crdVersion("v2", false)))
	waitWatchedOnly(t, c, v2, v1)
	framework.WaitForMetric(t, c, fmt.Sprintf(`cascade_resource_unsynced{group=%q,resource=%q,version=%q}`, v2.Group, v2.Resource, v2.Version), 1, collectTimeout)

	// The owner waits for the blocker, whose resource cascade cannot list (the count of this
	// test's resource: earlier tests may have left owners blocked elsewhere).
	cs.DeleteCM(t, ns, "fg-owner", metav1.DeletePropagationForeground)
	framework.WaitForMetric(t, c, fmt.Sprintf(`cascade_foreground_blocked_by_unsynced_total{resource=%q}`, gc.GVRString(v2)), 1, collectTimeout)
	if cm := cs.MustExistCM(t, ns, "fg-owner"); cm.DeletionTimestamp == nil {
		t.Fatalf("fg-owner is not being deleted")
	}

	deleteCRD(t, cs, crdName)
	cs.WaitCMGone(t, ns, "fg-owner", collectTimeout)
}
