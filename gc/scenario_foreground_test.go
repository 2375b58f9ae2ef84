package gc

import (
	"errors"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
)

// Dependents of owners deleted in the foreground: blocking references, and the cycles whose
// references are unblocked before the dependent is deleted.

// TestScenarioDuplicateOwnerRefs (issue 10, item 6): a dependent names its owner twice with
// identical references, and only the second blocks. The graph keeps one reference that blocks:
// a foreground owner waits for the dependent (BlockingDependents 1), which is deleted (a failed
// DELETE is retried, and the foreground resync hands the dependent over again), and the owner
// is handed back to the finalizers when it goes.
func TestScenarioDuplicateOwnerRefs(t *testing.T) {
	owner := scObj(scWidgets, "owner", "u-owner", "1")
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(owner), gctest.Blocking(gctest.RefTo(owner)))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{owner, dep}})
	s.observe(owner, dep)
	s.AssertOwnerStates("u-dep", graph.OwnerPresent)
	s.AssertBlocking("u-owner", 1)
	s.assertQueued(nil, nil)

	fg := scDeleting(owner, "2", metav1.FinalizerDeleteDependents)
	s.setLive(fg)
	s.observe(fg)
	s.assertHandedOver("u-owner")
	s.AssertOwnerStates("u-dep", graph.OwnerDeletingDependents)
	s.AssertBlocking("u-owner", 1) // the owner waits: its finalizer stays
	s.assertQueued([]types.UID{"u-dep"}, nil)
	s.failNext("delete", apierrors.NewInternalError(errors.New("etcd is down")))
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Retry error")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background")
	s.AssertLiveOwners(dep, "u-owner", "u-owner")
	s.resyncForeground() // level-driven: the waiting owner's dependents are handed over again
	s.assertQueued([]types.UID{"u-dep"}, nil)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background")
	s.observeDeleted(dep)
	s.AssertBlocking("u-owner", 0)
	s.assertHandedOver("u-owner") // RecheckOwner: the finalizer may go now
}

// TestScenarioCycleUnblockThenDelete (found by the chaos suite: after the unblock the DELETE's
// 409 came back on every retry while the watch lagged, each retry patching again). Owner "fg" is
// deleted in the foreground; dep names it with blockOwnerDeletion, and fg names dep the same way
// (a cycle). dep is deleted in the foreground after its references are unblocked; the DELETE at
// the view's resourceVersion answers 409 (the unblock moved it on), the live object shows
// exactly the unblocked references, so the DELETE goes again at the live resourceVersion at
// once. Had anything else changed (a new owner), it would wait for the watch instead.
func TestScenarioCycleUnblockThenDelete(t *testing.T) {
	for _, tc := range []struct {
		name    string
		adopted bool // another owner was added between the view and the DELETE
	}{{"only the unblock changed", false}, {"a new owner meanwhile", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s, dep, other := cycleScenario(t)
			if tc.adopted {
				s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) {
					o.OwnerReferences = append(o.OwnerReferences, gctest.RefTo(other))
				}))
			}
			s.failNext("delete", apierrors.NewConflict(scWidgets.GVR.GroupResource(), "dep", errors.New("the object has been modified")))
			s.processDeletes()
			if tc.adopted {
				s.AssertOutcomes("delete u-dep: Retry")
				s.AssertActions(`PATCH widgets.v1.example.com ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"fg","uid":"u-fg","blockOwnerDeletion":false}]}}`,
					"DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Foreground", "GET widgets.v1.example.com ns/dep")
				s.AssertLiveOwners(dep, "u-fg", "u-other")
				return
			}
			s.AssertOutcomes("delete u-dep: Done")
			s.AssertActions(`PATCH widgets.v1.example.com ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"fg","uid":"u-fg","blockOwnerDeletion":false}]}}`,
				"DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Foreground", "GET widgets.v1.example.com ns/dep",
				"DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Foreground")
		})
	}
}

// cycleScenario: widget fg is deleted in the foreground; dep names it with blockOwnerDeletion,
// and fg names dep the same way (a cycle); other is a live widget. dep is queued.
func cycleScenario(t *testing.T) (s *scenario, dep, other *metav1.PartialObjectMetadata) {
	t.Helper()
	fgObj := scObj(scWidgets, "fg", "u-fg", "1")
	dep = scObj(scWidgets, "dep", "u-dep", "3", gctest.Blocking(gctest.RefTo(fgObj)))
	fgObj.OwnerReferences = []metav1.OwnerReference{gctest.Blocking(gctest.RefTo(dep))}
	fg := scDeleting(fgObj, "2", metav1.FinalizerDeleteDependents)
	other = scObj(scWidgets, "other", "u-other", "1")
	s = newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{fg, dep, other}})
	s.observe(other, dep, fg)
	s.AssertOwnerStates("u-dep", graph.OwnerDeletingDependents)
	return s, dep, other
}

// TestScenarioCycleUnblockCustomResource (issue 22, item 2): breaking a foreground cycle on a
// custom resource, whose server answers the strategic merge patch with 415. The JSON merge
// fallback replaces the whole list at the live resourceVersion, so it is sent only when the live
// references are the ones the decision saw. When a blocking reference to another owner was added
// after the decision, nothing is sent and dep is decided again: that owner's foreground deletion
// must keep waiting for dep. Otherwise only the references the decision saw are unblocked, and
// dep is deleted in the foreground.
// Never written: blockOwnerDeletion=false on the reference added after the decision.
func TestScenarioCycleUnblockCustomResource(t *testing.T) {
	for _, tc := range []struct {
		name  string
		added bool // a blocking reference to another owner was added after the decision
	}{{"references unchanged", false}, {"a blocking reference added meanwhile", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s, dep, other := cycleScenario(t)
			if tc.added {
				s.setLive(scWith(dep, func(o *metav1.PartialObjectMetadata) {
					o.ResourceVersion = "4"
					o.OwnerReferences = append(o.OwnerReferences, gctest.Blocking(gctest.RefTo(other)))
				}))
			}
			s.failNext("patch", apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", scWidgets.GVR.GroupResource(), "dep", "the strategic merge patch is not supported for custom resources", 0, false))
			s.processDeletes()
			smp := `PATCH widgets.v1.example.com ns/dep strategic {"metadata":{"uid":"u-dep","resourceVersion":"3","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"fg","uid":"u-fg","blockOwnerDeletion":false}]}}`
			if tc.added {
				s.AssertOutcomes("delete u-dep: Retry")
				s.AssertActions(smp, "GET widgets.v1.example.com ns/dep")
				for _, r := range s.Live(dep).OwnerReferences {
					if r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion {
						t.Errorf("the reference to %s was unblocked", r.UID)
					}
				}
				return
			}
			s.AssertOutcomes("delete u-dep: Done")
			s.AssertActions(smp, "GET widgets.v1.example.com ns/dep",
				`PATCH widgets.v1.example.com ns/dep merge {"metadata":{"resourceVersion":"3","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"fg","uid":"u-fg","blockOwnerDeletion":false}]}}`,
				"DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Foreground")
		})
	}
}
