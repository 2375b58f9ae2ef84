package policy

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// selector is a namespace selector compiled for the hot path: its requirements checked with
// direct lookups in the namespace's labels (no interface calls, no allocation). It means what
// metav1.LabelSelectorAsSelector means (TestSelectorMatchesLabelSelector): every requirement
// must hold; none selects everything.
type selector []requirement

type requirement struct {
	key    string
	op     metav1.LabelSelectorOperator
	values []string
}

// compileSelector compiles a selector Validate accepted.
func compileSelector(ls *metav1.LabelSelector) selector {
	s := selector{}
	for k, v := range ls.MatchLabels {
		s = append(s, requirement{key: k, op: metav1.LabelSelectorOpIn, values: []string{v}})
	}
	for _, e := range ls.MatchExpressions {
		s = append(s, requirement{key: e.Key, op: e.Operator, values: slices.Clone(e.Values)})
	}
	return s
}

// matches reports whether labels meets every requirement.
func (s selector) matches(labels map[string]string) bool {
	for _, r := range s {
		v, ok := labels[r.key]
		switch r.op {
		case metav1.LabelSelectorOpIn:
			if !ok || !slices.Contains(r.values, v) {
				return false
			}
		case metav1.LabelSelectorOpNotIn:
			if ok && slices.Contains(r.values, v) {
				return false
			}
		case metav1.LabelSelectorOpExists:
			if !ok {
				return false
			}
		case metav1.LabelSelectorOpDoesNotExist:
			if ok {
				return false
			}
		default: // Validate rejects other operators; never select on one
			return false
		}
	}
	return true
}

// String renders the selector as metav1.FormatLabelSelector does (for messages).
func formatSelector(ls *metav1.LabelSelector) string {
	return metav1.FormatLabelSelector(ls)
}
