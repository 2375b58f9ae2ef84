package gc

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc/gctest"
	"github.com/cascade-gc/cascade/policy"
)

// TestScenarioCompanion (--mode=companion): the same events in both modes. The collector queues
// the dependent of a deleted owner, decides by the policy's collect: Never rule, and reports a
// reference to an owner in another namespace; the companion queues nothing (no delete worker
// runs beside kube-controller-manager's collector), leaves that Event to the in-tree collector,
// and explains the decision the in-tree collector takes, which knows no collect rule, saying it
// is companion mode. Owner verification, a read, runs in both.
func TestScenarioCompanion(t *testing.T) {
	pol, _, errs := policy.Parse([]byte("apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: widgets.example.com\n  collect: Never\n"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		companion      bool
		queued         []types.UID
		mode, decision string
		events         []string
	}{
		{companion: false, queued: []types.UID{"u-dep", "u-misplaced"}, decision: "RemoveRefs", events: []string{
			`Warning OwnerRefInvalidNamespace ownerRef [example.com/v1/Widget, namespace: ns, name: other, uid: u-other] does not exist in namespace "ns"`}},
		{companion: true, mode: ModeCompanion, decision: "Delete"},
	} {
		t.Run(map[bool]string{false: "collector", true: "companion"}[tc.companion], func(t *testing.T) {
			owner := scObj(scWidgets, "owner", "u-owner", "1")
			dep := scObj(scWidgets, "dep", "u-dep", "2", gctest.RefTo(owner))
			other := scWith(scObj(scWidgets, "other", "u-other", "3"), func(o *metav1.PartialObjectMetadata) { o.Namespace = "elsewhere" })
			misplaced := scObj(scWidgets, "misplaced", "u-misplaced", "4", gctest.RefTo(other))
			s := newScenario(t, scenarioSetup{watched: []Resource{scWidgets}, objects: []runtime.Object{dep}, policy: pol, companion: tc.companion})
			s.observe(owner, dep, other, misplaced)
			s.observeDeleted(owner)
			s.AssertEvents(tc.events...)
			s.assertQueued(tc.queued, nil)
			e, ok := s.c.Explain(context.Background(), "u-dep")
			switch {
			case !ok || e.Decision == nil:
				t.Fatalf("no decision explained for u-dep: %+v", e)
			case e.Mode != tc.mode || e.Decision.Action != tc.decision:
				t.Errorf("explained mode %q, decision %s (%s); want mode %q, decision %s", e.Mode, e.Decision.Action, e.Decision.Reason, tc.mode, tc.decision)
			}
			s.AssertActions()
		})
	}
}
