package policy

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const exampleDoc = `# The example of the README.
apiVersion: cascade.dev/v1alpha1
kind: Policy
ignoredResources:
  - podtemplates
rules:
  - resource: configmaps
    namespaceSelector:
      matchLabels:
        cascade.dev/keep-orphans: "true"
    collect: Never
  - resource: replicasets.apps
    collect: After 10m
  - resource: widgets.example.com
    defaultPropagation: Foreground
`

func TestDecodeExample(t *testing.T) {
	c, p, errs := Parse([]byte(exampleDoc))
	if len(errs) > 0 {
		t.Fatalf("Parse() errors: %v", errs)
	}
	want := &Policy{
		APIVersion: APIVersion, Kind: Kind, IgnoredResources: []string{"podtemplates"},
		Rules: []Rule{
			{Resource: "configmaps", NamespaceSelector: labelSel("cascade.dev/keep-orphans", "true"), Collect: "Never"},
			{Resource: "replicasets.apps", Collect: "After 10m"},
			{Resource: "widgets.example.com", DefaultPropagation: metav1.DeletePropagationForeground},
		},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Parse() policy = %+v, want %+v", p, want)
	}
	if got := c.Ignored(); !reflect.DeepEqual(got, []GroupResource{{Resource: "podtemplates"}}) {
		t.Errorf("Ignored() = %v", got)
	}
	if c.Rules() != 3 {
		t.Errorf("Rules() = %d", c.Rules())
	}
	if got := c.DefaultPropagations(); len(got) != 1 || got[0].Rule != "rules[2]" || got[0].Propagation != metav1.DeletePropagationForeground ||
		got[0].Resource != (GroupResource{Group: "example.com", Resource: "widgets"}) {
		t.Errorf("DefaultPropagations() = %+v", got)
	}
	cms := c.CollectRules(GroupResource{Resource: "configmaps"})
	if !cms.NeedNamespaceLabels() {
		t.Error("configmaps: the namespace selector needs labels")
	}
	if got := cms.For("ns", labels.Set{"cascade.dev/keep-orphans": "true"}); got.Mode != CollectNever || got.Rule != "rules[0] (collect: Never for configmaps)" {
		t.Errorf("configmaps in a selected namespace: %+v", got)
	}
	if got := cms.For("ns", labels.Set{"other": "x"}); got != (Collect{}) {
		t.Errorf("configmaps in another namespace: %+v, want as built in", got)
	}
	rs := c.CollectRules(GroupResource{Group: "apps", Resource: "replicasets"})
	if rs.NeedNamespaceLabels() {
		t.Error("replicasets: no selector, no labels needed")
	}
	if got := rs.For("", nil); got.Mode != CollectAfter || got.After != 10*time.Minute {
		t.Errorf("replicasets: %+v", got)
	}
	if got := c.CollectRules(GroupResource{Resource: "secrets"}); got != nil {
		t.Errorf("secrets: %+v, want no rules", got)
	}
}

// TestDecode covers every decoding rule: strict (unknown and duplicate fields, with their
// paths, all of them), types, syntax and size.
func TestDecode(t *testing.T) {
	head := "apiVersion: cascade.dev/v1alpha1\nkind: Policy\n"
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{name: "JSON is YAML", doc: `{"apiVersion":"cascade.dev/v1alpha1","kind":"Policy","rules":[{"resource":"pods","collect":"Never"}]}`},
		{name: "empty document", doc: ""},
		{name: "unknown top-level field", doc: head + "rule: []\n", want: []string{"Forbidden rule"}},
		{
			name: "every unknown field, with its path",
			doc:  head + "rules:\n- resource: pods\n  colect: Never\n- resource: secrets\n  collect: Never\n  namespaceSelector:\n    matchLabel: {a: b}\n",
			want: []string{"Forbidden rules[0].colect", "Forbidden rules[1].namespaceSelector.matchLabel"},
		},
		{name: "field names are case-sensitive", doc: head + "Rules: []\n", want: []string{"Forbidden Rules"}},
		{name: "duplicate key", doc: head + "kind: Policy\n", want: []string{"Invalid value policy.yaml"}},
		{name: "wrong type", doc: head + "rules:\n- resource: pods\n  collect: 5\n", want: []string{"Invalid value rules.collect"}},
		{name: "wrong type of object", doc: head + "rules:\n- resource: pods\n  namespaceSelector: [a]\n", want: []string{"Invalid value rules.namespaceSelector"}},
		{name: "not an object", doc: "- a\n- b\n", want: []string{"Invalid value policy.yaml"}},
		{name: "YAML syntax", doc: head + "rules: [\n", want: []string{"Invalid value policy.yaml"}},
		{name: "too large", doc: head + "# " + strings.Repeat("x", MaxDocumentSize), want: []string{"Too long policy.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := Decode([]byte(tt.doc))
			if got := errorsOf(errs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decode() = %q\nwant %q\n(%v)", got, tt.want, errs)
			}
		})
	}
}

// TestParseReportsDecodingAndValidation: a document with an unknown field and a bad value
// reports both, and compiles to nothing.
func TestParseReportsDecodingAndValidation(t *testing.T) {
	c, p, errs := Parse([]byte("apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: pods\n  collect: Sometimes\n  extra: 1\n"))
	if c != nil || p == nil {
		t.Fatalf("Parse() = %v, %v; want the decoded policy and no compiled one", c, p)
	}
	want := []string{"Forbidden rules[0].extra", "Invalid value rules[0].collect"}
	if got := errorsOf(errs); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse() errors = %q, want %q", got, want)
	}
	if _, _, errs := Parse([]byte("rules: [")); len(errs) != 1 {
		t.Errorf("syntax error: %v", errs)
	}
}

func TestNilCompiledIsBuiltin(t *testing.T) {
	var c *Compiled
	if c.Ignored() != nil || c.Rules() != 0 || c.DefaultPropagations() != nil || c.CollectRules(GroupResource{Resource: "pods"}) != nil {
		t.Error("a nil policy must behave as the built-in one")
	}
	var rr *ResourceRules
	if rr.NeedNamespaceLabels() || rr.For("ns", nil) != (Collect{}) {
		t.Error("nil rules must collect as built in")
	}
	if b := Builtin(); b.Rules() != 0 || b.CollectRules(GroupResource{Resource: "pods"}) != nil {
		t.Error("Builtin() has rules")
	}
}

// TestCollectFor: the first rule that selects the object decides; a selector never selects a
// cluster-scoped object; an empty selector selects every namespace.
func TestCollectFor(t *testing.T) {
	c, errs := Compile(doc(
		Rule{Resource: "widgets.example.com", NamespaceSelector: labelSel("team", "a"), Collect: "Never"},
		Rule{Resource: "widgets.example.com", NamespaceSelector: &metav1.LabelSelector{}, Collect: "After 1m"},
		Rule{Resource: "widgets.example.com", Collect: "After 2m"},
	))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	rr := c.CollectRules(GroupResource{Group: "example.com", Resource: "widgets"})
	for _, tt := range []struct {
		ns     string
		labels labels.Set
		want   CollectMode
		after  time.Duration
	}{
		{"ns", labels.Set{"team": "a"}, CollectNever, 0},
		{"ns", labels.Set{"team": "b"}, CollectAfter, time.Minute},
		{"ns", nil, CollectAfter, time.Minute},
		{"", nil, CollectAfter, 2 * time.Minute},
		{"", labels.Set{"team": "a"}, CollectAfter, 2 * time.Minute},
	} {
		got := rr.For(tt.ns, tt.labels)
		if got.Mode != tt.want || got.After != tt.after {
			t.Errorf("For(%q, %v) = %+v, want %v %v", tt.ns, tt.labels, got, tt.want, tt.after)
		}
	}
}
