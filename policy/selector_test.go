package policy

import (
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestSelectorMatchesLabelSelector: the compiled selector selects exactly what
// metav1.LabelSelectorAsSelector selects, over random valid selectors (matchLabels and every
// operator, on two keys) and every label set of those keys.
func TestSelectorMatchesLabelSelector(t *testing.T) {
	keys := []string{"team", "env"}
	vals := []string{"a", "b", "c"}
	var sets []map[string]string
	for _, t1 := range append([]string{""}, vals...) {
		for _, t2 := range append([]string{""}, vals...) {
			m := map[string]string{"other": "x"}
			if t1 != "" {
				m["team"] = t1
			}
			if t2 != "" {
				m["env"] = t2
			}
			sets = append(sets, m)
		}
	}
	sets = append(sets, nil)
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		ls := &metav1.LabelSelector{}
		if rng.IntN(2) == 0 {
			ls.MatchLabels = map[string]string{keys[rng.IntN(2)]: vals[rng.IntN(3)]}
		}
		for range rng.IntN(3) {
			r := metav1.LabelSelectorRequirement{Key: keys[rng.IntN(2)], Operator: ops[rng.IntN(4)]}
			if r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpNotIn {
				for range 1 + rng.IntN(2) {
					r.Values = append(r.Values, vals[rng.IntN(3)])
				}
			}
			ls.MatchExpressions = append(ls.MatchExpressions, r)
		}
		want, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			t.Fatal(err)
		}
		got := compileSelector(ls)
		for _, set := range sets {
			if g, w := got.matches(set), want.Matches(labels.Set(set)); g != w {
				t.Fatalf("selector %v on %v: %t, want %t", metav1.FormatLabelSelector(ls), set, g, w)
			}
		}
	}
	if (selector{{key: "a", op: "Near"}}).matches(map[string]string{"a": "b"}) {
		t.Error("an unknown operator selects")
	}
}
