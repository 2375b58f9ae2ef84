package stamp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/policy"
)

const withRuleDoc = "rules:\n- {resource: widgets.example.com, defaultPropagation: Orphan}\n"

var cascadeLabels = map[string]string{policy.ManagedByLabel: policy.ManagedByValue}

// present says which of cascade's admission objects exist at each version, by UID ("" none).
func present(t *testing.T, kube *fake.Clientset) (v1Policy, v1Binding, betaPolicy, betaBinding string) {
	t.Helper()
	ctx := context.Background()
	uid := func(o metav1.Object, err error) string {
		if err != nil {
			return ""
		}
		if o.GetUID() == "" {
			return "present"
		}
		return string(o.GetUID())
	}
	v1, beta := kube.AdmissionregistrationV1(), kube.AdmissionregistrationV1beta1()
	return uid(v1.MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{})),
		uid(v1.MutatingAdmissionPolicyBindings().Get(ctx, policy.AdmissionName, metav1.GetOptions{})),
		uid(beta.MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{})),
		uid(beta.MutatingAdmissionPolicyBindings().Get(ctx, policy.AdmissionName, metav1.GetOptions{}))
}

func betaObjects(uid string, labels map[string]string) (*admissionv1beta1.MutatingAdmissionPolicy, *admissionv1beta1.MutatingAdmissionPolicyBinding) {
	meta := metav1.ObjectMeta{Name: policy.AdmissionName, UID: types.UID("p-" + uid), Labels: labels}
	bmeta := metav1.ObjectMeta{Name: policy.AdmissionName, UID: types.UID("b-" + uid), Labels: labels}
	return &admissionv1beta1.MutatingAdmissionPolicy{ObjectMeta: meta}, &admissionv1beta1.MutatingAdmissionPolicyBinding{ObjectMeta: bmeta}
}

// TestSyncAdmissionLevels: the admission objects are written at the level the server offers:
// v1beta1 objects at v1beta1, nothing at none (the gauge says the objects are not there while a
// rule wants them), nothing at all while the level is unknown.
func TestSyncAdmissionLevels(t *testing.T) {
	ctx := context.Background()
	withRule := compile(t, withRuleDoc)
	for _, tt := range []struct {
		level    string
		c        *policy.Compiled
		v1, beta bool
		synced   float64
		calls    bool
	}{
		{level: features.LevelV1, c: withRule, v1: true, synced: 1, calls: true},
		{level: features.LevelV1beta1, c: withRule, beta: true, synced: 1, calls: true},
		{level: features.LevelNone, c: withRule, synced: 0},
		{level: features.LevelNone, c: policy.Builtin(), synced: 1},
		{level: "", c: withRule, synced: -1},
	} {
		t.Run(tt.level+"/"+map[bool]string{true: "rule", false: "builtin"}[tt.c == withRule], func(t *testing.T) {
			kube := fake.NewClientset()
			a := New(Options{Admission: client.NewEdge(nil, kube).Admission, Policy: policy.Builtin})
			a.opts.Metrics.AdmissionSynced.Set(-1)
			a.syncAdmission(ctx, tt.c, tt.level)
			p1, b1, pb, bb := present(t, kube)
			if (p1 != "" && b1 != "") != tt.v1 || (pb != "" && bb != "") != tt.beta || (p1 == "") != (b1 == "") || (pb == "") != (bb == "") {
				t.Errorf("objects at v1 %q/%q, at v1beta1 %q/%q; want v1 %t, v1beta1 %t", p1, b1, pb, bb, tt.v1, tt.beta)
			}
			if got := testutil.ToFloat64(a.opts.Metrics.AdmissionSynced); got != tt.synced {
				t.Errorf("admission synced = %v, want %v", got, tt.synced)
			}
			var writes int
			for _, act := range kube.Actions() {
				if act.GetVerb() != "get" {
					writes++
				}
			}
			if !tt.calls && writes > 0 {
				t.Errorf("%d writes at level %q: %v", writes, tt.level, kube.Actions())
			}
		})
	}
}

// TestSyncAdmissionLevelChange: when the server starts serving v1 (an upgrade from 1.35 with
// the beta on), the objects follow: written at v1, and cascade's own objects at v1beta1
// deleted; an object served at both versions (one object: the same UID) is kept, and an object
// at v1beta1 that is not cascade's is never touched. Back at v1beta1, the same the other way.
func TestSyncAdmissionLevelChange(t *testing.T) {
	ctx := context.Background()
	withRule := compile(t, withRuleDoc)

	t.Run("cascade's v1beta1 objects retired", func(t *testing.T) {
		kube := fake.NewClientset()
		a := New(Options{Admission: client.NewEdge(nil, kube).Admission, Policy: policy.Builtin})
		a.syncAdmission(ctx, withRule, features.LevelV1beta1)
		// The fake keeps each version apart and gives no UIDs: give the beta objects theirs.
		beta := kube.AdmissionregistrationV1beta1()
		bp, bb := betaObjects("old", cascadeLabels)
		if _, err := beta.MutatingAdmissionPolicies().Update(ctx, bp, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := beta.MutatingAdmissionPolicyBindings().Update(ctx, bb, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		a.syncAdmission(ctx, withRule, features.LevelV1)
		p1, b1, pb, bbUID := present(t, kube)
		if p1 == "" || b1 == "" || pb != "" || bbUID != "" {
			t.Errorf("after the upgrade: v1 %q/%q, v1beta1 %q/%q; want v1 only", p1, b1, pb, bbUID)
		}
		if testutil.ToFloat64(a.opts.Metrics.AdmissionSynced) != 1 {
			t.Error("not synced after the upgrade")
		}
		// The delete of the retired policy names its UID.
		var precondition string
		for _, act := range kube.Actions() {
			if d, ok := act.(interface {
				GetDeleteOptions() metav1.DeleteOptions
			}); ok && act.GetResource().Version == "v1beta1" && act.GetResource().Resource == "mutatingadmissionpolicies" {
				if pre := d.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil {
					precondition = string(*pre.UID)
				}
			}
		}
		if precondition != "p-old" {
			t.Errorf("the retired policy's delete carried UID %q, want p-old", precondition)
		}
	})

	t.Run("one object at both versions kept", func(t *testing.T) {
		p, b := withRule.Admission()
		p, b = p.DeepCopy(), b.DeepCopy()
		p.UID, b.UID = "p-same", "b-same"
		bp, bb := betaObjects("same", cascadeLabels)
		kube := fake.NewClientset(p, b, bp, bb)
		a := New(Options{Admission: client.NewEdge(nil, kube).Admission, Policy: policy.Builtin})
		a.syncAdmission(ctx, withRule, features.LevelV1)
		p1, b1, pb, bbUID := present(t, kube)
		if p1 != "p-same" || b1 != "b-same" || pb != "p-same" || bbUID != "b-same" {
			t.Errorf("v1 %q/%q, v1beta1 %q/%q: the one object was deleted through its other version", p1, b1, pb, bbUID)
		}
	})

	t.Run("foreign v1beta1 objects untouched", func(t *testing.T) {
		bp, bb := betaObjects("foreign", nil)
		kube := fake.NewClientset(bp, bb)
		a := New(Options{Admission: client.NewEdge(nil, kube).Admission, Policy: policy.Builtin})
		a.syncAdmission(ctx, withRule, features.LevelV1)
		_, _, pb, bbUID := present(t, kube)
		if pb != "p-foreign" || bbUID != "b-foreign" {
			t.Errorf("objects not cascade's were deleted: v1beta1 %q/%q", pb, bbUID)
		}
	})

	t.Run("back to v1beta1", func(t *testing.T) {
		p, b := withRule.Admission()
		p, b = p.DeepCopy(), b.DeepCopy()
		p.UID, b.UID = "p-v1", "b-v1"
		kube := fake.NewClientset(p, b)
		a := New(Options{Admission: client.NewEdge(nil, kube).Admission, Policy: policy.Builtin})
		a.syncAdmission(ctx, withRule, features.LevelV1beta1)
		p1, b1, pb, bbUID := present(t, kube)
		if p1 != "" || b1 != "" || pb == "" || bbUID == "" {
			t.Errorf("v1 %q/%q, v1beta1 %q/%q; want v1beta1 only", p1, b1, pb, bbUID)
		}
	})
}

// staticView is a synced graph with nothing to stamp.
type staticView struct{}

func (staticView) Synced() bool { return true }
func (staticView) Stampable(func(schema.GroupResource) bool) []gc.Stampable {
	return nil
}

// TestRunFollowsTheLevel: the Applier re-syncs the admission objects as soon as the level
// changes, without waiting for a policy change or its period: none at start (nothing written),
// then v1 once the server serves it.
func TestRunFollowsTheLevel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Now())
	withRule := compile(t, withRuleDoc)
	var level atomic.Value
	level.Store(features.LevelNone)
	a := New(Options{
		Admission: client.NewEdge(nil, kube).Admission, View: staticView{},
		Policy:         func() *policy.Compiled { return withRule },
		AdmissionLevel: func() string { return level.Load().(string) },
		Period:         time.Hour, Clock: clk,
	})
	// Before Run starts: set after, it could hide the first sync, which may already be done.
	a.opts.Metrics.AdmissionSynced.Set(-1)
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			if cond() {
				return true, nil
			}
			clk.Step(policyPoll) // the loop's next look
			return false, nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	synced := func() float64 { return testutil.ToFloat64(a.opts.Metrics.AdmissionSynced) }
	waitFor("the first sync at level none", func() bool { return synced() == 0 })
	if p1, b1, pb, bb := present(t, kube); p1+b1+pb+bb != "" {
		t.Fatalf("objects written at level none: %q %q %q %q", p1, b1, pb, bb)
	}
	level.Store(features.LevelV1)
	waitFor("the objects at v1", func() bool {
		p1, b1, _, _ := present(t, kube)
		return p1 != "" && b1 != "" && synced() == 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
