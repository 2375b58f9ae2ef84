package policy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPlanStamp(t *testing.T) {
	const (
		orphan = metav1.DeletePropagationOrphan
		fg     = metav1.DeletePropagationForeground
		bg     = metav1.DeletePropagationBackground
	)
	for _, tt := range []struct {
		name    string
		in      StampState
		want    metav1.DeletionPropagation
		change  bool
		fins    []string
		anno    string
		added   string
		removed string
	}{
		{name: "no rule, not stamped", in: StampState{Finalizers: []string{"a/x"}}},
		{name: "Background: nothing to stamp", in: StampState{}, want: bg},
		{name: "stamp Orphan, foreign finalizers kept in place", in: StampState{Finalizers: []string{"a/x", "b/y"}}, want: orphan,
			change: true, fins: []string{"a/x", "b/y", "orphan"}, anno: "Orphan", added: "orphan"},
		{name: "stamp Foreground", in: StampState{}, want: fg, change: true, fins: []string{"foregroundDeletion"}, anno: "Foreground", added: "foregroundDeletion"},
		{name: "never next to a GC finalizer the object has", in: StampState{Finalizers: []string{"foregroundDeletion"}}, want: orphan},
		{name: "never on an object being deleted", in: StampState{Deleting: true}, want: orphan},
		{name: "never unstamped while being deleted", in: StampState{Deleting: true, Finalizers: []string{"orphan"}, Stamped: "Orphan"}},
		{name: "already stamped as wanted", in: StampState{Finalizers: []string{"orphan"}, Stamped: "Orphan"}, want: orphan},
		{name: "opted out: finalizer removed by hand, stamp kept", in: StampState{Stamped: "Orphan"}, want: orphan},
		{name: "rule gone: the stamped finalizer and the record go, nothing else",
			in:     StampState{Finalizers: []string{"a/x", "orphan", "b/y"}, Stamped: "Orphan"},
			change: true, fins: []string{"a/x", "b/y"}, removed: "orphan"},
		{name: "rule now Background: unstamped", in: StampState{Finalizers: []string{"foregroundDeletion"}, Stamped: "Foreground"}, want: bg,
			change: true, fins: []string{}, removed: "foregroundDeletion"},
		{name: "rule changed: replaced", in: StampState{Finalizers: []string{"orphan"}, Stamped: "Orphan"}, want: fg,
			change: true, fins: []string{"foregroundDeletion"}, anno: "Foreground", added: "foregroundDeletion", removed: "orphan"},
		{name: "stamped finalizer already gone: only the record goes", in: StampState{Finalizers: []string{"a/x"}, Stamped: "Foreground"},
			change: true, fins: []string{"a/x"}},
		{name: "someone else's GC finalizer is never removed", in: StampState{Finalizers: []string{"foregroundDeletion"}, Stamped: "Orphan"},
			change: true, fins: []string{"foregroundDeletion"}},
		{name: "unknown record: dropped, finalizers untouched, then stamped",
			in: StampState{Finalizers: []string{"a/x"}, Stamped: "Sideways"}, want: orphan,
			change: true, fins: []string{"a/x", "orphan"}, anno: "Orphan", added: "orphan"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in.Finalizers)
			got := PlanStamp(tt.in, tt.want)
			if got.Change != tt.change || !slices.Equal(got.Finalizers, tt.fins) || got.Annotation != tt.anno || got.Added != tt.added || got.Removed != tt.removed {
				t.Errorf("PlanStamp = %+v; want change %t finalizers %q annotation %q added %q removed %q", got, tt.change, tt.fins, tt.anno, tt.added, tt.removed)
			}
			if !slices.Equal(in, tt.in.Finalizers) {
				t.Errorf("input finalizers modified")
			}
		})
	}
}

const defaultsDoc = `apiVersion: cascade.dev/v1alpha1
kind: Policy
rules:
  - resource: widgets.example.com
    namespaceSelector: {matchLabels: {team: a}, matchExpressions: [{key: tier, operator: NotIn, values: [dev, qa]}]}
    defaultPropagation: Background
  - resource: widgets.example.com
    defaultPropagation: Orphan
  - resource: configmaps
    collect: Never
  - resource: gadgets.example.com
    namespaceSelector: {}
    defaultPropagation: Foreground
`

func TestDefaultFor(t *testing.T) {
	c, _, errs := Parse([]byte(defaultsDoc))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	widgets, gadgets := GroupResource{Group: "example.com", Resource: "widgets"}, GroupResource{Group: "example.com", Resource: "gadgets"}
	for _, tt := range []struct {
		gr     GroupResource
		ns     string
		labels map[string]string
		want   metav1.DeletionPropagation
		rule   string
	}{
		{gr: widgets, ns: "n", labels: map[string]string{"team": "a"}, want: "Background", rule: "rules[0]"},
		{gr: widgets, ns: "n", labels: map[string]string{"team": "a", "tier": "dev"}, want: "Orphan", rule: "rules[1]"},
		{gr: widgets, ns: "n", want: "Orphan", rule: "rules[1]"},
		{gr: widgets, want: "Orphan", rule: "rules[1]"}, // cluster-scoped: selectors never match
		{gr: gadgets, ns: "n", want: "Foreground", rule: "rules[3]"},
		{gr: gadgets}, // cluster-scoped: {} selects every namespace, not the cluster scope
		{gr: GroupResource{Resource: "configmaps"}, ns: "n"},
	} {
		r, ok := c.DefaultFor(tt.gr, tt.ns, tt.labels)
		if r.Propagation != tt.want || r.Rule != tt.rule || ok != (tt.want != "") {
			t.Errorf("DefaultFor(%s, %q, %v) = %+v, %t; want %s from %s", tt.gr, tt.ns, tt.labels, r, ok, tt.want, tt.rule)
		}
	}
	if !c.HasDefaults(widgets) || c.HasDefaults(GroupResource{Resource: "configmaps"}) {
		t.Error("HasDefaults is wrong")
	}
	if !c.NeedDefaultNamespaceLabels(widgets) || c.NeedDefaultNamespaceLabels(GroupResource{Group: "x", Resource: "y"}) {
		t.Error("NeedDefaultNamespaceLabels is wrong")
	}
	var none *Compiled
	if _, ok := none.DefaultFor(widgets, "n", nil); ok || none.HasDefaults(widgets) {
		t.Error("the built-in policy has a default")
	}
}

// TestAdmission: the rendered policy matches creates of the stamped resources only, keeps the
// rules' order, quotes what it embeds, and is labelled as cascade's; no stamping rule renders
// nothing. (That kube-apiserver accepts it and what it does: e2e TestPolicyDefault*.)
func TestAdmission(t *testing.T) {
	c, _, errs := Parse([]byte(defaultsDoc))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p, b := c.Admission()
	if p == nil || b == nil {
		t.Fatal("no admission objects for a policy with stamping rules")
	}
	if p.Name != AdmissionName || b.Name != AdmissionName || b.Spec.PolicyName != AdmissionName ||
		p.Labels[ManagedByLabel] != ManagedByValue || b.Labels[ManagedByLabel] != ManagedByValue {
		t.Errorf("names or labels: %+v %+v", p.ObjectMeta, b.ObjectMeta)
	}
	var resources []string
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		if !slices.Equal(r.Operations, []admissionv1.OperationType{admissionv1.Create}) || len(r.Resources) != 1 {
			t.Errorf("rule %+v: want CREATE of one resource", r)
		}
		resources = append(resources, r.Resources[0]+"."+r.APIGroups[0])
	}
	if !slices.Equal(resources, []string{"widgets.example.com", "gadgets.example.com"}) {
		t.Errorf("matched resources %q", resources)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Ignore || p.Spec.ReinvocationPolicy != admissionv1.NeverReinvocationPolicy {
		t.Error("failure policy must be Ignore, reinvocation Never")
	}
	chain := p.Spec.Variables[0].Expression
	for _, want := range []string{`['dev', 'qa']`, `'Background'`, `'Orphan'`, `'Foreground'`, `namespaceObject != null`} {
		if !strings.Contains(chain, want) {
			t.Errorf("the chain lacks %s:\n%s", want, chain)
		}
	}
	if strings.Index(chain, "'Background'") > strings.Index(chain, "'Orphan'") {
		t.Errorf("rules out of order:\n%s", chain)
	}

	onlyCollect, _, errs := Parse([]byte("apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- {resource: configmaps, collect: Never}\n- {resource: pods, defaultPropagation: Background}\n"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if p, b := onlyCollect.Admission(); p != nil || b != nil {
		t.Error("admission objects rendered for a policy that stamps nothing")
	}
}

// TestAdmissionV1beta1: the objects at v1beta1 say exactly what the v1 ones say (their JSON is
// the same but for apiVersion), and a policy that stamps nothing renders nothing at either.
func TestAdmissionV1beta1(t *testing.T) {
	c, _, errs := Parse([]byte(defaultsDoc))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p, b := c.Admission()
	pb, bb, err := AdmissionV1beta1(p, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]any{{p, pb}, {b, bb}} {
		v1, err := json.Marshal(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		beta, err := json.Marshal(pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(beta), `"apiVersion":"admissionregistration.k8s.io/v1beta1"`) {
			t.Errorf("not at v1beta1: %s", beta)
		}
		if got := strings.Replace(string(beta), "/v1beta1", "/v1", 1); got != string(v1) {
			t.Errorf("v1beta1 differs from v1:\n%s\n%s", got, v1)
		}
	}
	if pb, bb, err := AdmissionV1beta1(nil, nil); pb != nil || bb != nil || err != nil {
		t.Errorf("nothing to render: %v %v %v", pb, bb, err)
	}
}

func TestCELString(t *testing.T) {
	for in, want := range map[string]string{"a.b/c": `'a.b/c'`, `it's`: `'it\'s'`, `a\b`: `'a\\b'`, "a\nb": `'a\nb'`} {
		if got := celString(in); got != want {
			t.Errorf("celString(%q) = %s, want %s", in, got, want)
		}
	}
}
