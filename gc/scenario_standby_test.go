package gc

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/graph"
)

// A replica that does not lead.

// TestScenarioStandbySilence (issue 10, item 5): a standby's graph finds a reference to an
// owner in another namespace. Until it leads, it sends no Event and makes no API call (its
// workers do not run; the metric counts at once). Leading, it emits exactly one Event, then
// collects the dependent as in-tree does. (e2e: TestStandbyStaysSilent.)
func TestScenarioStandbySilence(t *testing.T) {
	owner := scWith(scObj(scWidgets, "owner", "u-owner", "1"), func(o *metav1.PartialObjectMetadata) { o.Namespace = "other" })
	dep := scObj(scWidgets, "dep", "u-dep", "3", gctest.RefTo(owner))
	s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{owner, dep}, standby: true})
	s.observe(owner, dep)
	s.AssertOwnerStates("u-dep", graph.OwnerInvalidNamespace)
	s.assertQueued([]types.UID{"u-dep"}, nil) // queued, but a standby runs no worker
	s.AssertEvents()
	s.AssertActions()
	s.AssertMetric("cascade_invalid_namespace_refs_total", 1)

	s.lead()
	s.AssertEvents(`Warning OwnerRefInvalidNamespace ownerRef [example.com/v1/Widget, namespace: ns, name: owner, uid: u-owner] does not exist in namespace "ns"`)
	s.processDeletes()
	s.AssertOutcomes("delete u-dep: Done")
	s.AssertActions("DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background")
	s.AssertEvents() // exactly one
}
