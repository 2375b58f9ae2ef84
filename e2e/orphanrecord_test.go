//go:build e2e

package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestOrphanRecordAcrossRestart: the chaos suite's wrongful deletion. An owner is deleted with
// the orphan policy and cascade removes its finalizer before its graph received a dependent
// that had just gained a reference to it; then a new cascade process (a restart or a new
// leader) lists that dependent, whose owner is gone. Without the orphan record it collected the
// dependent (as the in-tree collector does). Here the first process records the owner, is
// killed, and the dependent is written with the reference while no cascade runs, so the second
// process sees exactly that state, deterministically.
//
// Must never be deleted: kept, the dependent of the recorded owner (only its reference goes).
// The control, a dependent of an owner deleted in the background while no cascade ran, is
// collected: the second process does act on dangling references.
func TestOrphanRecordAcrossRestart(t *testing.T) {
	cs := suite.Clients(t)
	ctx := context.Background()
	ns := cs.NewNamespace(t)
	record := "--orphan-record-configmap=" + ns + "/orphan-record"

	first := suite.StartCascade(t, record)
	// The record's writes from here are this test's: as it starts, cascade also records owners
	// earlier tests left waiting on the orphan finalizer, when it finishes them.
	const recorded = `cascade_orphan_record_writes_total{result="ok"}`
	base, _ := settled(t, first).Value(recorded)
	owner := cs.CreateCM(t, ns, "owner")
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationOrphan)
	cs.WaitCMGone(t, ns, "owner", collectTimeout)
	rec, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "orphan-record", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the orphan record: %v", err)
	}
	if _, ok := rec.Data[string(owner.UID)]; !ok {
		t.Fatalf("the orphan record does not hold the owner %s: %v", owner.UID, rec.Data)
	}
	framework.WaitForMetric(t, first, recorded, base+1, 10*time.Second)
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.Done()

	// While no cascade runs: the late dependent, and the control.
	cs.CreateCM(t, ns, "kept", framework.CMRef(owner))
	gone := cs.CreateCM(t, ns, "gone-owner")
	cs.DeleteCM(t, ns, "gone-owner", metav1.DeletePropagationBackground)
	cs.WaitCMGone(t, ns, "gone-owner", collectTimeout)
	cs.CreateCM(t, ns, "control", framework.CMRef(gone))

	suite.StartCascade(t, record)
	cs.WaitCMGone(t, ns, "control", collectTimeout)
	framework.Eventually(t, collectTimeout, "the reference to the recorded owner removed", func() (bool, error) {
		cm, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			t.Fatal("the dependent of the recorded owner was deleted")
		}
		if err != nil {
			return false, err
		}
		return len(cm.OwnerReferences) == 0, nil
	})
	framework.Consistently(t, 3*time.Second, "the dependent of the recorded owner kept", func() error {
		_, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "kept", metav1.GetOptions{})
		return err
	})
}
