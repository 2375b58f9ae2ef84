package gc

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
)

// Dependents of owners deleted with the orphan policy.

// TestScenarioOrphanLateDependent (issue 9): the owner is deleted with the orphan policy while
// the graph knows none of its dependents, so its tombstone is released at once. A dependent
// created just before the delete reaches the graph afterwards: it loses its reference by a
// strategic merge patch (UID precondition) and is never deleted, nor is the owner verified.
// (e2e: TestFinalizersOrphanDependentsCreatedJustBefore.)
func TestScenarioOrphanLateDependent(t *testing.T) {
	owner := scObj(scWidgets, "owner", "u-owner", "1")
	late := scObj(scWidgets, "late", "u-late", "3", gctest.RefTo(owner))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{late}})
	s.observe(owner)
	s.observe(scDeleting(owner, "2", metav1.FinalizerOrphanDependents))
	s.assertHandedOver("u-owner")
	s.observe(scDeleting(owner, "3")) // the finalizers removed the orphan finalizer
	s.observeDeleted(owner)
	s.AssertNoNode("u-owner")
	s.assertStats(func(st graph.Stats) error {
		if st.RetainedOrphans != 1 {
			return fmt.Errorf("retained orphans %d, want 1", st.RetainedOrphans)
		}
		return nil
	})

	s.observe(late)
	s.AssertOwnerStates("u-late", graph.OwnerOrphaned)
	s.assertQueued([]types.UID{"u-late"}, nil) // no claim to verify
	s.settle()
	s.AssertOutcomes("delete u-late: Done")
	s.AssertActions(`PATCH widgets.v1.example.com ns/late strategic {"metadata":{"uid":"u-late","ownerReferences":[{"$patch":"delete","uid":"u-owner"}]}}`)
	s.AssertMetric("cascade_collected_total", 1, "action", "remove_refs")
	s.AssertMetric("cascade_collected_total", 0, "action", "delete")
	s.deliver(late)
	s.assertQueued(nil, nil)
	s.AssertLiveOwners(late)

	// Handed over again (a resync), it has nothing left to decide.
	s.enqueueDelete("u-late")
	s.processDeletes()
	s.AssertOutcomes("delete u-late: Done")
	s.AssertActions()
}
