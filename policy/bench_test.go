package policy

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// BenchmarkCollectionDecision is one collection decision as the collector takes it on the hot
// path (gc attemptToDelete): look up the dependent's resource in the policy, pick the collect
// rule (with the namespace's labels, from gc's cache, when a rule has a selector), and decide,
// for a dependent whose only owner is gone. Compare rules=0 with the others:
//
//	go test -run '^$' -bench CollectionDecision -count 10 ./policy/ | benchstat -col /rules -
func BenchmarkCollectionDecision(b *testing.B) {
	gr := GroupResource{Resource: "configmaps"}
	nsLabels := labels.Set{"kubernetes.io/metadata.name": "team-b", "team": "b"}
	many := func(extra ...Rule) *Compiled {
		p := doc()
		for i := range 100 - len(extra) {
			p.Rules = append(p.Rules, Rule{Resource: fmt.Sprintf("r%d.example.com", i), Collect: "After 10m",
				NamespaceSelector: labelSel("team", fmt.Sprint(i))})
		}
		p.Rules = append(p.Rules, extra...)
		c, errs := Compile(p)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		return c
	}
	for _, bc := range []struct {
		name string
		pol  *Compiled
	}{
		{"rules=0", Builtin()},
		{"rules=100", many()},
		// The dependent's resource has a rule whose selector does not match its namespace:
		// the same delete, after a selector match.
		{"rules=100,selector-miss", many(Rule{Resource: "configmaps", Collect: "Never",
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "c"}},
			}}})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			owners := owners(dangling("o1"))
			for b.Loop() {
				in := Input{Owners: owners}
				if rr := bc.pol.CollectRules(gr); rr != nil {
					var l labels.Set
					if rr.NeedNamespaceLabels() {
						l = nsLabels
					}
					in.Collect = rr.For("team-b", l)
				}
				if d := Decide(in); d.Action != Delete {
					b.Fatal(d)
				}
			}
		})
	}
}
