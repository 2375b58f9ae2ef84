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
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

const collectTimeout = 60 * time.Second

// logRetries makes cascade log every failed attempt on a work item, not only the first:
// internal/work's queue.go logs the next ones at V(4).
const logRetries = "--vmodule=queue=4"

// waitFailedAttempts waits until cascade's log shows at least n failed attempts on work items
// that name uid (an owner cascade cannot verify, or whose dependent it cannot decide on, and
// retries with backoff): the first is logged at default verbosity, the next ones only with
// logRetries. The log names the test's own object where counters of failures count everyone's.
func waitFailedAttempts(t *testing.T, c *harness.Cascade, uid types.UID, n int) {
	t.Helper()
	framework.Eventually(t, collectTimeout, fmt.Sprintf("%d failed attempts on %s in cascade's log", n, uid), func() (bool, error) {
		return logLines(t, c, "Work item failed", string(uid)) >= n, nil
	})
}

// TestBackgroundCascade: one owner with 100 dependents, deleted in the background: every
// dependent goes; an unrelated ConfigMap stays.
func TestBackgroundCascade(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	suite.StartCascade(t)
	owner := cs.CreateCM(t, ns, "owner")
	bystander := cs.CreateCM(t, ns, "bystander")
	cs.CreateCMs(t, ns, "dep", 100, framework.CMRef(owner))
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationBackground)
	cs.WaitCMCount(t, ns, "dep-", 0, collectTimeout)
	cs.MustExistCM(t, ns, bystander.Name)
}

// TestThreeLevelCascade: A → 5 B → 5 C each; deleting A removes all 31 objects.
func TestThreeLevelCascade(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	suite.StartCascade(t)
	a := cs.CreateCM(t, ns, "a")
	for i := range 5 {
		b := cs.CreateCM(t, ns, fmt.Sprintf("b-%d", i), framework.CMRef(a))
		cs.CreateCMs(t, ns, fmt.Sprintf("c-%d", i), 5, framework.CMRef(b))
	}
	cs.DeleteCM(t, ns, "a", metav1.DeletePropagationBackground)
	cs.WaitCMCount(t, ns, "b-", 0, collectTimeout)
	cs.WaitCMCount(t, ns, "c-", 0, collectTimeout)
}

// TestTwoOwnersOneDeleted: a dependent of two owners survives the deletion of one and loses
// only that reference.
func TestTwoOwnersOneDeleted(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	suite.StartCascade(t)
	gone := cs.CreateCM(t, ns, "gone")
	stays := cs.CreateCM(t, ns, "stays")
	cs.CreateCM(t, ns, "shared", framework.CMRef(gone), framework.CMRef(stays))
	cs.CreateCM(t, ns, "only-gone", framework.CMRef(gone)) // proof that collection ran
	cs.DeleteCM(t, ns, "gone", metav1.DeletePropagationBackground)
	cs.WaitCMGone(t, ns, "only-gone", collectTimeout)
	framework.Eventually(t, collectTimeout, "shared loses the reference to the deleted owner", func() (bool, error) {
		cm := cs.MustExistCM(t, ns, "shared")
		return len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == stays.UID, nil
	})
}

// TestOwnerNeverExisted: a reference to a UID that never existed is verified with a live GET and
// its dependent collected; a dependent of a live owner is not.
func TestOwnerNeverExisted(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	live := cs.CreateCM(t, ns, "live")
	cs.CreateCM(t, ns, "orphan-of-ghost", framework.RefTo("v1", "ConfigMap", "ghost", types.UID("00000000-0000-0000-0000-00000000dead"), false))
	cs.CreateCM(t, ns, "child-of-live", framework.CMRef(live))
	suite.StartCascade(t)
	cs.WaitCMGone(t, ns, "orphan-of-ghost", collectTimeout)
	cs.MustExistCM(t, ns, "child-of-live")
}

// TestWrongCoordinatesExistingUID: references that name an existing UID with a wrong kind or a
// wrong name are verified at their own coordinates (404) and their dependents collected; the
// dependent with correct coordinates stays.
func TestWrongCoordinatesExistingUID(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	suite.StartCascade(t)
	owner := cs.CreateCM(t, ns, "owner")
	cs.CreateCM(t, ns, "wrong-kind", framework.RefTo("v1", "Secret", owner.Name, owner.UID, false))
	cs.CreateCM(t, ns, "wrong-name", framework.RefTo("v1", "ConfigMap", "not-the-owner", owner.UID, false))
	cs.CreateCM(t, ns, "right", framework.CMRef(owner))
	cs.WaitCMGone(t, ns, "wrong-kind", collectTimeout)
	cs.WaitCMGone(t, ns, "wrong-name", collectTimeout)
	cs.MustExistCM(t, ns, "right")
	cs.MustExistCM(t, ns, "owner")
}

// TestCrossNamespaceReference: a reference to a namespaced owner in another namespace is
// invalid: an OwnerRefInvalidNamespace Warning is emitted on the dependent (in-tree message
// format) and the dependent is collected. The owner and its same-namespace dependent stay.
func TestCrossNamespaceReference(t *testing.T) {
	cs := suite.Clients(t)
	nsA := cs.NewNamespace(t)
	nsB := cs.NewNamespace(t)
	suite.StartCascade(t)
	owner := cs.CreateCM(t, nsA, "owner")
	cs.CreateCM(t, nsA, "good-child", framework.CMRef(owner))
	bad := cs.CreateCM(t, nsB, "bad-child", framework.CMRef(owner))
	cs.WaitCMGone(t, nsB, "bad-child", collectTimeout)
	cs.MustExistCM(t, nsA, "owner")
	cs.MustExistCM(t, nsA, "good-child")
	want := fmt.Sprintf("ownerRef [v1/ConfigMap, namespace: %s, name: owner, uid: %s] does not exist in namespace %q", nsB, owner.UID, nsB)
	framework.Eventually(t, 30*time.Second, "OwnerRefInvalidNamespace event", func() (bool, error) {
		evs, err := cs.Kube.CoreV1().Events(nsB).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=OwnerRefInvalidNamespace"})
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
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	suite.StartCascade(t)
	mk := func(name string) *rbacv1.ClusterRole {
		cr, err := cs.Kube.RbacV1().ClusterRoles().Create(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.Kube.RbacV1().ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
		})
		return cr
	}
	doomed, kept := mk("doomed"), mk("kept")
	cs.CreateCM(t, ns, "of-doomed", framework.RefTo("rbac.authorization.k8s.io/v1", "ClusterRole", doomed.Name, doomed.UID, false))
	cs.CreateCM(t, ns, "of-kept", framework.RefTo("rbac.authorization.k8s.io/v1", "ClusterRole", kept.Name, kept.UID, false))
	if err := cs.Kube.RbacV1().ClusterRoles().Delete(context.Background(), doomed.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.WaitCMGone(t, ns, "of-doomed", collectTimeout)
	cs.MustExistCM(t, ns, "of-kept")
}

// TestNeverCollected: a cluster-scoped dependent naming a namespaced owner kind, and a
// dependent naming a kind the server does not know, must never be collected. Before the checks,
// canaries created after them, of missing owners, are collected (a ConfigMap and a
// cluster-scoped ClusterRole, which comes through the same watch as the cluster-scoped
// dependent, after it), and cascade's log shows three failed attempts on the unknown owner
// (its kind has no REST mapping), the first and two retries: cascade has decided on both, and
// decided again. The log, not cascade_rest_mapping_errors_total: that counter also counts the
// retries of what earlier tests left with unknown owner kinds. The unknown owner's UID is
// fresh, so that the lines name this run's alone (-count shares the log file).
func TestNeverCollected(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	c := suite.StartCascade(t, logRetries)
	clusterRoles := cs.Kube.RbacV1().ClusterRoles()
	clusterRole := func(name string, owner metav1.OwnerReference) {
		_, err := clusterRoles.Create(context.Background(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
			Name: name, OwnerReferences: []metav1.OwnerReference{owner},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = clusterRoles.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	crName := ns + "-cluster-dependent"
	clusterRole(crName, framework.RefTo("v1", "ConfigMap", "missing", types.UID("00000000-0000-0000-0000-0000000000c1"), false))
	unknownOwner := uuid.NewUUID()
	cs.CreateCM(t, ns, "unknown-kind", framework.RefTo("unknown.example.com/v1", "Widget", "w", unknownOwner, false))
	cs.CreateCM(t, ns, "canary", framework.RefTo("v1", "ConfigMap", "missing", types.UID("00000000-0000-0000-0000-0000000000c3"), false))
	clusterCanary := ns + "-cluster-canary"
	clusterRole(clusterCanary, framework.RefTo("rbac.authorization.k8s.io/v1", "ClusterRole", ns+"-missing", types.UID("00000000-0000-0000-0000-0000000000c4"), false))

	cs.WaitCMGone(t, ns, "canary", collectTimeout)
	framework.WaitGone(t, "cluster-scoped canary", collectTimeout, func() error {
		_, err := clusterRoles.Get(context.Background(), clusterCanary, metav1.GetOptions{})
		return err
	})
	waitFailedAttempts(t, c, unknownOwner, 3)
	cs.MustExistCM(t, ns, "unknown-kind")
	if _, err := clusterRoles.Get(context.Background(), crName, metav1.GetOptions{}); err != nil {
		t.Fatalf("cluster-scoped dependent of a namespaced kind must never be collected: %v", err)
	}
}

// TestCustomResources: custom resources as owners and as dependents, mixed with ConfigMaps.
func TestCustomResources(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "bg.e2e.cascade.dev", "Gadget", "Namespaced")
	suite.StartCascade(t, "--discovery-period=2s")
	cr := func(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "bg.e2e.cascade.dev/v1", "kind": "Gadget"}}
		u.SetName(name)
		u.SetOwnerReferences(owners)
		got, err := cs.Dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	crRef := func(u *unstructured.Unstructured) metav1.OwnerReference {
		return framework.RefTo("bg.e2e.cascade.dev/v1", "Gadget", u.GetName(), u.GetUID(), false)
	}
	ownerCR := cr("owner")
	cr("cr-of-cr", crRef(ownerCR))
	cs.CreateCM(t, ns, "cm-of-cr", crRef(ownerCR))
	ownerCM := cs.CreateCM(t, ns, "owner-cm")
	cr("cr-of-cm", framework.CMRef(ownerCM))

	if err := cs.Dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.DeleteCM(t, ns, "owner-cm", metav1.DeletePropagationBackground)
	cs.WaitCMGone(t, ns, "cm-of-cr", collectTimeout)
	for _, name := range []string{"cr-of-cr", "cr-of-cm"} {
		framework.Eventually(t, collectTimeout, "custom resource "+name+" collected", func() (bool, error) {
			list, err := cs.Dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
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
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	doomed := cs.CreateCM(t, ns, "doomed")
	live := cs.CreateCM(t, ns, "live")
	cs.CreateCMs(t, ns, "dep", 2000, framework.CMRef(doomed))
	cs.CreateCMs(t, ns, "shared", 100, framework.CMRef(doomed), framework.CMRef(live))
	cs.CreateCMs(t, ns, "kept", 100, framework.CMRef(live))

	// A tight client budget so the kill lands mid-cascade.
	c := suite.StartCascade(t, "--kube-api-qps=100", "--kube-api-burst=10")
	cs.DeleteCM(t, ns, "doomed", metav1.DeletePropagationBackground)
	framework.Eventually(t, collectTimeout, "cascade under way", func() (bool, error) {
		n, err := cs.CountCMs(ns, "dep-")
		return n < 1800, err
	})
	if err := c.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	left, err := cs.CountCMs(ns, "dep-")
	if err != nil {
		t.Fatal(err)
	}
	if left == 0 {
		t.Fatalf("the cascade finished before the kill; the test proves nothing")
	}
	t.Logf("killed with %d of 2000 dependents left", left)

	suite.StartCascade(t, "--kube-api-qps=0")
	cs.WaitCMCount(t, ns, "dep-", 0, 2*collectTimeout)
	framework.Eventually(t, collectTimeout, "shared dependents lose the reference to the deleted owner", func() (bool, error) {
		list, err := cs.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
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
