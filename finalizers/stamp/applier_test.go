package stamp

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/policy"
)

// TestNeedsWork: the pass spends a GET only on objects policy.PlanStamp could change.
func TestNeedsWork(t *testing.T) {
	const (
		orphan = metav1.DeletePropagationOrphan
		fg     = metav1.DeletePropagationForeground
	)
	for _, tt := range []struct {
		name string
		o    graph.StampView
		want metav1.DeletionPropagation
		work bool
	}{
		{name: "no rule, not stamped", o: graph.StampView{}},
		{name: "to stamp", o: graph.StampView{}, want: orphan, work: true},
		{name: "has a GC finalizer of its own", o: graph.StampView{Finalizers: graph.FinalizerForeground}, want: orphan},
		{name: "stamped as wanted", o: graph.StampView{Stamp: graph.FinalizerOrphan, Finalizers: graph.FinalizerOrphan}, want: orphan},
		{name: "stamped as wanted, finalizer removed by hand (opted out)", o: graph.StampView{Stamp: graph.FinalizerOrphan}, want: orphan},
		{name: "rule gone", o: graph.StampView{Stamp: graph.FinalizerOrphan, Finalizers: graph.FinalizerOrphan}, work: true},
		{name: "rule changed", o: graph.StampView{Stamp: graph.FinalizerOrphan, Finalizers: graph.FinalizerOrphan}, want: fg, work: true},
		{name: "unknown record", o: graph.StampView{Stamp: graph.FinalizerOrphan | graph.FinalizerForeground}, want: orphan, work: true},
		{name: "Background wanted, not stamped", o: graph.StampView{}, want: metav1.DeletePropagationBackground},
	} {
		if got := needsWork(tt.o, tt.want); got != tt.work {
			t.Errorf("%s: needsWork = %t, want %t", tt.name, got, tt.work)
		}
	}
}

func compile(t *testing.T, doc string) *policy.Compiled {
	t.Helper()
	c, _, errs := policy.Parse([]byte("apiVersion: cascade.dev/v1alpha1\nkind: Policy\n" + doc))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return c
}

// TestSyncAdmission: the admission objects follow the policy (created, then deleted when no rule
// stamps anything), and an object of that name that is not cascade's is never touched.
func TestSyncAdmission(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	a := New(Options{Admission: client.NewEdge(nil, kube).Admission, Policy: policy.Builtin})
	maps, bindings := kube.AdmissionregistrationV1().MutatingAdmissionPolicies(), kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	apply := func(c *policy.Compiled) error {
		p, b := c.Admission()
		return a.applyAdmission(ctx, features.LevelV1, p, b)
	}

	withRule := compile(t, "rules:\n- {resource: widgets.example.com, defaultPropagation: Orphan}\n")
	if err := apply(withRule); err != nil {
		t.Fatal(err)
	}
	p, err := maps.Get(ctx, policy.AdmissionName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Labels[policy.ManagedByLabel] != policy.ManagedByValue || len(p.Spec.MatchConstraints.ResourceRules) != 1 {
		t.Errorf("admission policy: %+v", p)
	}
	if _, err := bindings.Get(ctx, policy.AdmissionName, metav1.GetOptions{}); err != nil {
		t.Errorf("binding: %v", err)
	}

	if err := apply(policy.Builtin()); err != nil {
		t.Fatal(err)
	}
	if _, err := maps.Get(ctx, policy.AdmissionName, metav1.GetOptions{}); err == nil {
		t.Error("admission policy left after the rules went")
	}
	if _, err := bindings.Get(ctx, policy.AdmissionName, metav1.GetOptions{}); err == nil {
		t.Error("binding left after the rules went")
	}

	// Someone else's object of that name: reported, never updated nor deleted.
	foreign := &admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy.AdmissionName}}
	if _, err := maps.Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*policy.Compiled{withRule, policy.Builtin()} {
		err := apply(c)
		if err == nil || !strings.Contains(err.Error(), "not cascade's") {
			t.Errorf("applyAdmission over a foreign object: %v", err)
		}
	}
	if got, err := maps.Get(ctx, policy.AdmissionName, metav1.GetOptions{}); err != nil || got.Spec.MatchConstraints != nil {
		t.Errorf("the foreign object was changed: %+v, %v", got, err)
	}
}

// TestSyncAdmissionForeignBinding (issue 32.1): a MutatingAdmissionPolicyBinding of cascade's
// name that is not labelled as cascade's (beside cascade's own policy, or alone) is read and
// left alone: never applied over when a rule wants the objects, never deleted when none does;
// it is reported (the error, and cascade_default_propagation_foreign_admission_objects). On
// main the binding was deleted by name without being read, and force-applied over.
func TestSyncAdmissionForeignBinding(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	reg := prometheus.NewRegistry()
	rec := record.NewFakeRecorder(10)
	a := New(Options{Admission: client.NewEdge(nil, kube).Admission, Policy: policy.Builtin, Metrics: NewMetrics(reg), Events: rec})
	bindings := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	withRule := compile(t, "rules:\n- {resource: widgets.example.com, defaultPropagation: Orphan}\n")
	// cascade's own objects first, then someone replaces the binding with one of their own.
	a.syncAdmission(ctx, withRule, features.LevelV1)
	if err := bindings.Delete(ctx, policy.AdmissionName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	theirs := &admissionv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.AdmissionName, UID: "theirs", Labels: map[string]string{"team": "platform"}},
		Spec:       admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "their-policy"},
	}
	if _, err := bindings.Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube.ClearActions()
	for _, c := range []*policy.Compiled{withRule, policy.Builtin()} {
		p, b := c.Admission()
		err := a.applyAdmission(ctx, features.LevelV1, p, b)
		var foreign *ForeignAdmissionError
		if !errors.As(err, &foreign) || !slices.Equal(foreign.Kinds, []string{"MutatingAdmissionPolicyBinding"}) {
			t.Errorf("applyAdmission with a foreign binding: %v, want a ForeignAdmissionError naming the binding", err)
		}
		a.syncAdmission(ctx, c, features.LevelV1)
		if v := testutil.ToFloat64(a.opts.Metrics.ForeignAdmission); v != 1 {
			t.Errorf("cascade_default_propagation_foreign_admission_objects = %v, want 1", v)
		}
	}
	for _, act := range kube.Actions() {
		if act.GetResource().Resource == "mutatingadmissionpolicybindings" && act.GetVerb() != "get" {
			t.Errorf("cascade sent %s %s to a binding that is not its own", act.GetVerb(), act.GetResource().Resource)
		}
	}
	if got, err := bindings.Get(ctx, policy.AdmissionName, metav1.GetOptions{}); err != nil || got.Spec.PolicyName != "their-policy" {
		t.Errorf("their binding was changed: %+v, %v", got, err)
	}
	// Reported with one Warning Event on their binding, not one per pass.
	close(rec.Events)
	var events []string
	for e := range rec.Events {
		events = append(events, e)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+EventReasonForeignAdmission+" MutatingAdmissionPolicyBinding "+policy.AdmissionName) {
		t.Errorf("events %q, want one Warning %s on the binding", events, EventReasonForeignAdmission)
	}
}
