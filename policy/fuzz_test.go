package policy

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// FuzzParse decodes, validates and compiles arbitrary documents (go test -fuzz=FuzzParse
// ./policy/). Whatever the input: no panic; errors always name a field; a policy compiles
// exactly when there is no error; a compiled policy answers lookups, and its document, written
// back out, parses to the same policy.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		exampleDoc,
		"",
		"apiVersion: cascade.dev/v1alpha1\nkind: Policy\n",
		"apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: pods\n  colect: Never\n",
		"apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: jobs.batch\n  defaultPropagation: Background\n",
		"apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: a.b\n  collect: After 1s\n  namespaceSelector: {matchExpressions: [{key: k, operator: NotIn, values: [v]}]}\n",
		"apiVersion: cascade.dev/v1alpha1\nkind: Policy\nignoredResources: [x, x]\nrules: [{resource: x, collect: Never}]\n",
		`{"apiVersion":"cascade.dev/v1alpha1","kind":"Policy","rules":[{"resource":"pods","collect":5}]}`,
		"- a\n",
		"rules: [",
		"kind: Policy\nkind: Policy\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, p, errs := Parse(data)
		for _, e := range errs {
			if e.Field == "" {
				t.Fatalf("error without a field: %v", e)
			}
		}
		if (c != nil) != (len(errs) == 0) {
			t.Fatalf("compiled %v with errors %v", c != nil, errs)
		}
		if c == nil {
			return
		}
		if errs := Validate(p, nil); len(errs) > 0 {
			t.Fatalf("compiled a policy Validate rejects: %v", errs)
		}
		for _, r := range p.Rules {
			gr, err := ParseGroupResource(r.Resource)
			if err != nil {
				t.Fatalf("compiled a rule with resource %q: %v", r.Resource, err)
			}
			rr := c.CollectRules(gr)
			if (rr != nil) != (r.Collect != "" || rr != nil) {
				t.Fatalf("rules of %s", gr)
			}
			_ = rr.For("ns", labels.Set{"a": "b"})
			_ = rr.For("", nil)
		}
		out, err := yaml.Marshal(p)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		c2, p2, errs := Parse(out)
		if len(errs) > 0 || c2 == nil {
			t.Fatalf("the written policy does not parse: %v\n%s", errs, out)
		}
		if !reflect.DeepEqual(normalize(p), normalize(p2)) {
			t.Fatalf("round trip changed the policy:\n%+v\n%+v", p, p2)
		}
	})
}

// normalize drops the difference between a nil and an empty list, which YAML does not keep.
func normalize(p *Policy) *Policy {
	c := deepCopy(p)
	if len(c.IgnoredResources) == 0 {
		c.IgnoredResources = nil
	}
	if len(c.Rules) == 0 {
		c.Rules = nil
	}
	for i := range c.Rules {
		if s := c.Rules[i].NamespaceSelector; s != nil {
			if len(s.MatchLabels) == 0 {
				s.MatchLabels = nil
			}
			if len(s.MatchExpressions) == 0 {
				s.MatchExpressions = nil
			}
			for j := range s.MatchExpressions {
				if len(s.MatchExpressions[j].Values) == 0 {
					s.MatchExpressions[j].Values = nil
				}
			}
		}
	}
	return c
}
