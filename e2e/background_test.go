//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

const collectTimeout = 60 * time.Second

// TestBackgroundCascade: one owner with 100 dependents, deleted in the background: every
// dependent goes; an unrelated ConfigMap stays.
func TestBackgroundCascade(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	startCascade(t)
	owner := createCM(t, cs, ns, "owner")
	bystander := createCM(t, cs, ns, "bystander")
	createCMs(t, cs, ns, "dep", 100, cmRef(owner))
	deleteCM(t, cs, ns, "owner", metav1.DeletePropagationBackground)
	waitCMCount(t, cs, ns, "dep-", 0, collectTimeout)
	mustExist(t, cs, ns, bystander.Name)
}

// TestThreeLevelCascade: A → 5 B → 5 C each; deleting A removes all 31 objects.
func TestThreeLevelCascade(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	startCascade(t)
	a := createCM(t, cs, ns, "a")
	for i := range 5 {
		b := createCM(t, cs, ns, fmt.Sprintf("b-%d", i), cmRef(a))
		createCMs(t, cs, ns, fmt.Sprintf("c-%d", i), 5, cmRef(b))
	}
	deleteCM(t, cs, ns, "a", metav1.DeletePropagationBackground)
	waitCMCount(t, cs, ns, "b-", 0, collectTimeout)
	waitCMCount(t, cs, ns, "c-", 0, collectTimeout)
}

// TestTwoOwnersOneDeleted: a dependent of two owners survives the deletion of one and loses
// only that reference.
func TestTwoOwnersOneDeleted(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	startCascade(t)
	gone := createCM(t, cs, ns, "gone")
	stays := createCM(t, cs, ns, "stays")
	createCM(t, cs, ns, "shared", cmRef(gone), cmRef(stays))
	createCM(t, cs, ns, "only-gone", cmRef(gone)) // proof that collection ran
	deleteCM(t, cs, ns, "gone", metav1.DeletePropagationBackground)
	waitCMGone(t, cs, ns, "only-gone", collectTimeout)
	eventually(t, collectTimeout, "shared loses the reference to the deleted owner", func() (bool, error) {
		cm := mustExist(t, cs, ns, "shared")
		return len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == stays.UID, nil
	})
}

// TestOwnerNeverExisted: a reference to a UID that never existed is verified with a live GET and
// its dependent collected; a dependent of a live owner is not.
func TestOwnerNeverExisted(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	live := createCM(t, cs, ns, "live")
	createCM(t, cs, ns, "orphan-of-ghost", refTo("v1", "ConfigMap", "ghost", types.UID("00000000-0000-0000-0000-00000000dead"), false))
	createCM(t, cs, ns, "child-of-live", cmRef(live))
	startCascade(t)
	waitCMGone(t, cs, ns, "orphan-of-ghost", collectTimeout)
	mustExist(t, cs, ns, "child-of-live")
}

// TestWrongCoordinatesExistingUID: references that name an existing UID with a wrong kind or a
// wrong name are verified at their own coordinates (404) and their dependents collected; the
// dependent with correct coordinates stays.
func TestWrongCoordinatesExistingUID(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	startCascade(t)
	owner := createCM(t, cs, ns, "owner")
	createCM(t, cs, ns, "wrong-kind", refTo("v1", "Secret", owner.Name, owner.UID, false))
	createCM(t, cs, ns, "wrong-name", refTo("v1", "ConfigMap", "not-the-owner", owner.UID, false))
	createCM(t, cs, ns, "right", cmRef(owner))
	waitCMGone(t, cs, ns, "wrong-kind", collectTimeout)
	waitCMGone(t, cs, ns, "wrong-name", collectTimeout)
	mustExist(t, cs, ns, "right")
	mustExist(t, cs, ns, "owner")
}

// TestCrossNamespaceReference: a reference to a namespaced owner in another namespace is
// invalid: an OwnerRefInvalidNamespace Warning is emitted on the dependent (in-tree message
// format) and the dependent is collected. The owner and its same-namespace dependent stay.
func TestCrossNamespaceReference(t *testing.T) {
	cs := newClients(t)
	nsA := newNamespace(t, cs)
	nsB := newNamespace(t, cs)
	startCascade(t)
	owner := createCM(t, cs, nsA, "owner")
	createCM(t, cs, nsA, "good-child", cmRef(owner))
	bad := createCM(t, cs, nsB, "bad-child", cmRef(owner))
	waitCMGone(t, cs, nsB, "bad-child", collectTimeout)
	mustExist(t, cs, nsA, "owner")
	mustExist(t, cs, nsA, "good-child")
	want := fmt.Sprintf("ownerRef [v1/ConfigMap, namespace: %s, name: owner, uid: %s] does not exist in namespace %q", nsB, owner.UID, nsB)
	eventually(t, 30*time.Second, "OwnerRefInvalidNamespace event", func() (bool, error) {
		evs, err := cs.kube.CoreV1().Events(nsB).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=OwnerRefInvalidNamespace"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.InvolvedObject.UID == bad.UID && e.Message == want && e.Source.Component == "cascade" {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestClusterScopedOwner: namespaced dependents of a cluster-scoped owner are collected when it
// is deleted, and kept while it lives.
func TestClusterScopedOwner(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	startCascade(t)
	mk := func(name string) *rbacv1.ClusterRole {
		cr, err := cs.kube.RbacV1().ClusterRoles().Create(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.kube.RbacV1().ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
		})
		return cr
	}
	doomed, kept := mk("doomed"), mk("kept")
	createCM(t, cs, ns, "of-doomed", refTo("rbac.authorization.k8s.io/v1", "ClusterRole", doomed.Name, doomed.UID, false))
	createCM(t, cs, ns, "of-kept", refTo("rbac.authorization.k8s.io/v1", "ClusterRole", kept.Name, kept.UID, false))
	if err := cs.kube.RbacV1().ClusterRoles().Delete(context.Background(), doomed.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCMGone(t, cs, ns, "of-doomed", collectTimeout)
	mustExist(t, cs, ns, "of-kept")
}

// TestNeverCollected: a cluster-scoped dependent naming a namespaced owner kind, and a
// dependent naming a kind the server does not know, must never be collected. A dependent of a
// missing owner in the same run is collected, which proves the collector was working.
func TestNeverCollected(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	c := startCascade(t)
	crName := ns + "-cluster-dependent"
	_, err := cs.kube.RbacV1().ClusterRoles().Create(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
		Name:            crName,
		OwnerReferences: []metav1.OwnerReference{refTo("v1", "ConfigMap", "missing", types.UID("00000000-0000-0000-0000-0000000000c1"), false)},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.kube.RbacV1().ClusterRoles().Delete(context.Background(), crName, metav1.DeleteOptions{})
	})
	createCM(t, cs, ns, "unknown-kind", refTo("unknown.example.com/v1", "Widget", "w", types.UID("00000000-0000-0000-0000-0000000000c2"), false))
	createCM(t, cs, ns, "canary", refTo("v1", "ConfigMap", "missing", types.UID("00000000-0000-0000-0000-0000000000c3"), false))
	waitCMGone(t, cs, ns, "canary", collectTimeout)
	eventually(t, 30*time.Second, "a REST mapping error counted", func() (bool, error) {
		m, err := c.Metrics()
		return err == nil && strings.Contains(m, "cascade_rest_mapping_errors_total") && !strings.Contains(m, "cascade_rest_mapping_errors_total 0\n"), err
	})
	time.Sleep(3 * time.Second) // several more rounds of retries
	mustExist(t, cs, ns, "unknown-kind")
	if _, err := cs.kube.RbacV1().ClusterRoles().Get(context.Background(), crName, metav1.GetOptions{}); err != nil {
		t.Fatalf("cluster-scoped dependent of a namespaced kind must never be collected: %v", err)
	}
}

// TestCustomResources: custom resources as owners and as dependents, mixed with ConfigMaps.
func TestCustomResources(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	gvr := createCRD(t, cs, "bg.e2e.cascade.dev", "Gadget", "Namespaced")
	startCascade(t, "--discovery-period=2s")
	cr := func(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "bg.e2e.cascade.dev/v1", "kind": "Gadget"}}
		u.SetName(name)
		u.SetOwnerReferences(owners)
		got, err := cs.dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	crRef := func(u *unstructured.Unstructured) metav1.OwnerReference {
		return refTo("bg.e2e.cascade.dev/v1", "Gadget", u.GetName(), u.GetUID(), false)
	}
	ownerCR := cr("owner")
	cr("cr-of-cr", crRef(ownerCR))
	createCM(t, cs, ns, "cm-of-cr", crRef(ownerCR))
	ownerCM := createCM(t, cs, ns, "owner-cm")
	cr("cr-of-cm", cmRef(ownerCM))

	if err := cs.dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteCM(t, cs, ns, "owner-cm", metav1.DeletePropagationBackground)
	waitCMGone(t, cs, ns, "cm-of-cr", collectTimeout)
	for _, name := range []string{"cr-of-cr", "cr-of-cm"} {
		eventually(t, collectTimeout, "custom resource "+name+" collected", func() (bool, error) {
			list, err := cs.dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, it := range list.Items {
				if it.GetName() == name {
					return false, nil
				}
			}
			return true, nil
		})
	}
}

// TestKilledMidCascade: cascade is killed with SIGKILL in the middle of a 2,000-object cascade
// and restarted; it finishes, and nothing that still had a live owner was deleted.
func TestKilledMidCascade(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	doomed := createCM(t, cs, ns, "doomed")
	live := createCM(t, cs, ns, "live")
	createCMs(t, cs, ns, "dep", 2000, cmRef(doomed))
	createCMs(t, cs, ns, "shared", 100, cmRef(doomed), cmRef(live))
	createCMs(t, cs, ns, "kept", 100, cmRef(live))

	// A tight client budget so the kill lands mid-cascade.
	c := startCascade(t, "--kube-api-qps=100", "--kube-api-burst=10")
	deleteCM(t, cs, ns, "doomed", metav1.DeletePropagationBackground)
	eventually(t, collectTimeout, "cascade under way", func() (bool, error) {
		n, err := countCMs(t, cs, ns, "dep-")
		return n < 1800, err
	})
	if err := c.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	left, err := countCMs(t, cs, ns, "dep-")
	if err != nil {
		t.Fatal(err)
	}
	if left == 0 {
		t.Fatalf("the cascade finished before the kill; the test proves nothing")
	}
	t.Logf("killed with %d of 2000 dependents left", left)

	startCascade(t, "--kube-api-qps=0")
	waitCMCount(t, cs, ns, "dep-", 0, 2*collectTimeout)
	eventually(t, collectTimeout, "shared dependents lose the reference to the deleted owner", func() (bool, error) {
		list, err := cs.kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		shared, kept := 0, 0
		for _, cm := range list.Items {
			switch {
			case strings.HasPrefix(cm.Name, "shared-"):
				shared++
				if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != live.UID {
					return false, nil
				}
			case strings.HasPrefix(cm.Name, "kept-"):
				kept++
			}
		}
		if shared != 100 || kept != 100 {
			t.Fatalf("objects with a live owner were deleted: %d/100 shared and %d/100 kept remain", shared, kept)
		}
		return true, nil
	})
}
