package policy

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// errorsOf reduces a list to "type field" strings so tests do not depend on
// message wording.
func errorsOf(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Type.String()+" "+e.Field)
	}
	return out
}

// doc is a valid document header around rules.
func doc(rules ...Rule) *Policy {
	return &Policy{APIVersion: APIVersion, Kind: Kind, Rules: rules}
}

func labelSel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// TestValidate has one or more rows per validation rule; the rule is named first.
func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		p    *Policy
		want []string
	}{
		{name: "document: required", p: nil, want: []string{"Required value policy.yaml"}},
		{name: "valid: the empty document", p: doc()},
		{
			name: "valid: every kind of rule",
			p: &Policy{
				APIVersion: APIVersion, Kind: Kind,
				IgnoredResources: []string{"podtemplates", "widgets.example.com"},
				Rules: []Rule{
					{Resource: "configmaps", NamespaceSelector: labelSel("team", "a"), Collect: "Never"},
					{Resource: "configmaps", Collect: "After 10m"},
					{Resource: "replicasets.apps", DefaultPropagation: metav1.DeletePropagationForeground, Collect: "After 1h30m"},
					{Resource: "jobs.batch", DefaultPropagation: metav1.DeletePropagationForeground},
					{Resource: "gizmos.example.com", DefaultPropagation: metav1.DeletePropagationBackground},
					{Resource: "secrets", NamespaceSelector: &metav1.LabelSelector{}, DefaultPropagation: metav1.DeletePropagationOrphan},
					{Resource: "x1.example.com", Collect: "After 1s"},
				},
			},
		},
		{name: "apiVersion: required", p: &Policy{Kind: Kind}, want: []string{"Required value apiVersion"}},
		{name: "apiVersion: only v1alpha1", p: &Policy{APIVersion: "cascade.dev/v1", Kind: Kind}, want: []string{"Unsupported value apiVersion"}},
		{name: "kind: required", p: &Policy{APIVersion: APIVersion}, want: []string{"Required value kind"}},
		{name: "kind: only Policy", p: &Policy{APIVersion: APIVersion, Kind: "ConfigMap"}, want: []string{"Unsupported value kind"}},
		{
			name: "ignoredResources: at most MaxIgnoredResources",
			p:    &Policy{APIVersion: APIVersion, Kind: Kind, IgnoredResources: manyResources(MaxIgnoredResources + 1)},
			want: []string{"Too many ignoredResources"},
		},
		{
			name: "ignoredResources: each is resource.group, once",
			p: &Policy{APIVersion: APIVersion, Kind: Kind, IgnoredResources: []string{
				"", "Pods", "pods/status", "deployments.v1.apps", "widgets.Example_com", "secrets", "secrets", "pods.v1",
			}},
			want: []string{
				"Required value ignoredResources[0]",
				"Invalid value ignoredResources[1]",
				"Invalid value ignoredResources[2]",
				"Invalid value ignoredResources[3]",
				"Invalid value ignoredResources[4]",
				"Duplicate value ignoredResources[6]",
				"Invalid value ignoredResources[7]",
			},
		},
		{name: "rules: at most MaxRules", p: doc(manyRules(MaxRules + 1)...), want: []string{"Too many rules"}},
		{
			name: "rules[].resource: required, resource.group",
			p: doc(
				Rule{Collect: "Never"},
				Rule{Resource: "ReplicaSet.apps", Collect: "Never"},
				Rule{Resource: "replicasets.", Collect: "Never"},
				Rule{Resource: "replicasets.v1beta1.apps", Collect: "Never"},
			),
			want: []string{
				"Required value rules[0].resource",
				"Invalid value rules[1].resource",
				"Invalid value rules[2].resource",
				"Invalid value rules[3].resource",
			},
		},
		{name: "rules[]: sets collect or defaultPropagation", p: doc(Rule{Resource: "configmaps"}), want: []string{"Required value rules[0]"}},
		{
			name: "rules[].namespaceSelector: a valid label selector",
			p: doc(
				Rule{Resource: "configmaps", Collect: "Never", NamespaceSelector: labelSel("bad key!", "a")},
				Rule{Resource: "secrets", Collect: "Never", NamespaceSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near", Values: []string{"a"}}},
				}},
				Rule{Resource: "pods", Collect: "Never", NamespaceSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}},
				}},
			),
			want: []string{
				"Invalid value rules[0].namespaceSelector.matchLabels",
				"Invalid value rules[1].namespaceSelector.matchExpressions[0].operator",
				"Required value rules[2].namespaceSelector.matchExpressions[0].values",
			},
		},
		{
			name: "rules[].defaultPropagation: Orphan, Foreground or Background (case-sensitive)",
			p:    doc(Rule{Resource: "configmaps", DefaultPropagation: "orphan"}, Rule{Resource: "secrets", DefaultPropagation: "Cascade"}),
			want: []string{"Unsupported value rules[0].defaultPropagation", "Unsupported value rules[1].defaultPropagation"},
		},
		{
			name: "rules[].defaultPropagation: Background cannot override a built-in Orphan",
			p: doc(
				Rule{Resource: "replicationcontrollers", DefaultPropagation: metav1.DeletePropagationBackground},
				Rule{Resource: "jobs.batch", DefaultPropagation: metav1.DeletePropagationBackground},
				Rule{Resource: "jobs.example.com", DefaultPropagation: metav1.DeletePropagationBackground},
			),
			want: []string{"Invalid value rules[0].defaultPropagation", "Invalid value rules[1].defaultPropagation"},
		},
		{
			name: "rules[].collect: Never or After <duration of at least 1s>",
			p: doc(
				Rule{Resource: "a", Collect: "never"},
				Rule{Resource: "b", Collect: "Sometimes"},
				Rule{Resource: "c", Collect: "After"},
				Rule{Resource: "d", Collect: "After 10"},
				Rule{Resource: "e", Collect: "After 500ms"},
				Rule{Resource: "f", Collect: "After -1m"},
				Rule{Resource: "g", Collect: "After  10m"},
				Rule{Resource: "h", Collect: "After 10m"},
			),
			want: []string{
				"Invalid value rules[0].collect", "Invalid value rules[1].collect", "Invalid value rules[2].collect",
				"Invalid value rules[3].collect", "Invalid value rules[4].collect", "Invalid value rules[5].collect",
				"Invalid value rules[6].collect",
			},
		},
		{
			name: "rules[].resource: not an ignored resource",
			p: &Policy{APIVersion: APIVersion, Kind: Kind, IgnoredResources: []string{"podtemplates"},
				Rules: []Rule{{Resource: "podtemplates", Collect: "Never"}}},
			want: []string{"Invalid value rules[0].resource"},
		},
		{
			name: "rules[]: a rule after one for every namespace of the same resource and kind never applies",
			p: doc(
				Rule{Resource: "configmaps", NamespaceSelector: labelSel("team", "a"), Collect: "Never"}, // narrowed: shadows nothing
				Rule{Resource: "configmaps", Collect: "After 1m"},
				Rule{Resource: "configmaps", NamespaceSelector: labelSel("team", "b"), Collect: "Never"},           // shadowed by 1
				Rule{Resource: "configmaps", DefaultPropagation: metav1.DeletePropagationOrphan},                   // another kind: fine
				Rule{Resource: "configmaps", DefaultPropagation: metav1.DeletePropagationForeground},               // shadowed by 3
				Rule{Resource: "secrets", Collect: "Never"},                                                        // another resource: fine
				Rule{Resource: "configmaps", Collect: "Never", DefaultPropagation: metav1.DeletePropagationOrphan}, // both shadowed
			),
			want: []string{
				"Invalid value rules[2].collect",
				"Invalid value rules[4].defaultPropagation",
				"Invalid value rules[6].collect",
				"Invalid value rules[6].defaultPropagation",
			},
		},
		{
			name: "every error is reported, not only the first",
			p: &Policy{
				APIVersion: "v1", IgnoredResources: []string{"events", "events"},
				Rules: []Rule{{Resource: "Jobs.batch", DefaultPropagation: "orphan", Collect: "After"}, {}},
			},
			want: []string{
				"Unsupported value apiVersion",
				"Required value kind",
				"Duplicate value ignoredResources[1]",
				"Invalid value rules[0].resource",
				"Unsupported value rules[0].defaultPropagation",
				"Invalid value rules[0].collect",
				"Required value rules[1].resource",
				"Required value rules[1]",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *Policy
			if tt.p != nil {
				before = deepCopy(tt.p)
			}
			got := errorsOf(Validate(tt.p, nil))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Validate() =\n%q\nwant\n%q", got, tt.want)
			}
			if tt.p != nil && !reflect.DeepEqual(before, tt.p) {
				t.Errorf("Validate() modified the policy")
			}
			if c, errs := Compile(tt.p); (c != nil) != (len(tt.want) == 0) || len(errs) != len(tt.want) {
				t.Errorf("Compile() = %v, %d errors; want a policy only when valid", c, len(errs))
			}
		})
	}
}

// TestValidateExplains: the messages users act on say what to do.
func TestValidateExplains(t *testing.T) {
	errs := Validate(doc(
		Rule{Resource: "jobs.batch", DefaultPropagation: metav1.DeletePropagationBackground},
		Rule{Resource: "Deployment", Collect: "Never"},
		Rule{Resource: "deployments.v1.apps", Collect: "Never"},
		Rule{Resource: "pods", Collect: "Later"},
	), nil)
	for i, want := range []string{
		"kube-apiserver orphans the dependents of jobs.batch when a delete names no propagation policy",
		"not a kind such as ReplicaSet",
		"without a version: deployments.apps",
		`must be "Never" or "After <duration>"`,
	} {
		if i >= len(errs) || !strings.Contains(errs[i].Error(), want) {
			t.Errorf("error %d = %v, want it to say %q", i, errs, want)
		}
	}
}

func TestWarnings(t *testing.T) {
	p := &Policy{APIVersion: APIVersion, Kind: Kind, IgnoredResources: []string{"podtemplates", "gadgets.example.com", "Bad"},
		Rules: []Rule{{Resource: "configmaps", Collect: "Never"}, {Resource: "widgets.example.com", Collect: "Never"}}}
	served := Served{Resource: func(gr GroupResource) bool { return gr.Group == "" }}
	got := errorsOf(Warnings(p, served))
	want := []string{"Invalid value ignoredResources[1]", "Invalid value rules[1].resource"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Warnings() = %q, want %q", got, want)
	}
	if w := Warnings(p, Served{}); len(w) != 0 {
		t.Errorf("Warnings() without a served check = %v, want none", w)
	}
	if w := Warnings(nil, served); len(w) != 0 {
		t.Errorf("Warnings(nil) = %v", w)
	}
}

func TestParseGroupResource(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    GroupResource
		wantErr bool
	}{
		{in: "configmaps", want: GroupResource{Resource: "configmaps"}},
		{in: "replicasets.apps", want: GroupResource{Group: "apps", Resource: "replicasets"}},
		{in: "widgets.example.com", want: GroupResource{Group: "example.com", Resource: "widgets"}},
		{in: "", wantErr: true},
		{in: "pods.", wantErr: true},
		{in: "pods.v1", wantErr: true},
		{in: " pods", wantErr: true},
	} {
		got, err := ParseGroupResource(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseGroupResource(%q) = %v, %v; want %v, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func manyResources(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "r" + itoa(i) + ".example.com"
	}
	return out
}

func manyRules(n int) []Rule {
	out := make([]Rule, n)
	for i := range out {
		out[i] = Rule{Resource: "r" + itoa(i) + ".example.com", Collect: "Never"}
	}
	return out
}

func deepCopy(p *Policy) *Policy {
	c := *p
	c.IgnoredResources = append([]string(nil), p.IgnoredResources...)
	c.Rules = nil
	for _, r := range p.Rules {
		if r.NamespaceSelector != nil {
			r.NamespaceSelector = r.NamespaceSelector.DeepCopy()
		}
		c.Rules = append(c.Rules, r)
	}
	return &c
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestCheckUnwatched: only defaultPropagation rules for an unwatched resource are errors.
func TestCheckUnwatched(t *testing.T) {
	p := &Policy{Rules: []Rule{
		{Resource: "events", DefaultPropagation: "Orphan"},
		{Resource: "events", Collect: "Never"},
		{Resource: "widgets.example.com", DefaultPropagation: "Foreground"},
		{Resource: "events.events.k8s.io", DefaultPropagation: "Foreground"},
	}}
	errs := CheckUnwatched(p, []GroupResource{{Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}})
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if want := []string{"rules[0].resource", "rules[3].resource"}; !slices.Equal(got, want) {
		t.Errorf("errors at %v, want %v", got, want)
	}
	if errs := CheckUnwatched(p, nil); len(errs) != 0 {
		t.Errorf("nothing unwatched: %v", errs)
	}
}
