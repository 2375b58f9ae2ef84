package policy

import "k8s.io/apimachinery/pkg/util/validation/field"

// CompanionUnenforced returns the rules of p that cascade cannot enforce in companion mode
// (--mode=companion, beside kube-controller-manager's garbage collector), one error each:
// collect rules (Never, After) change what the collector does with a dependent, and there the
// in-tree collector collects, as built in. defaultPropagation rules are enforced in both modes:
// kube-apiserver honours the finalizer cascade stamps whoever collects. A nil p has none.
func CompanionUnenforced(p *Policy) field.ErrorList {
	if p == nil {
		return nil
	}
	var out field.ErrorList
	for i, r := range p.Rules {
		if r.Collect == "" {
			continue
		}
		out = append(out, field.Invalid(field.NewPath("rules").Index(i).Child("collect"), r.Collect,
			"not enforced in companion mode: kube-controller-manager's garbage collector collects the dependents of "+r.Resource+" as built in (the rule needs --mode=collector)"))
	}
	return out
}
