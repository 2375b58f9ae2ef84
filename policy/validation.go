package policy

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// supportedPolicies are the values a ResourcePolicy may name.
var supportedPolicies = []string{
	string(metav1.DeletePropagationOrphan),
	string(metav1.DeletePropagationForeground),
	string(metav1.DeletePropagationBackground),
}

// builtinOrphanDefaults are the resources kube-apiserver orphans by default
// when a delete names no policy, for every version it still serves
// (reference §2.8). A Background default cannot be expressed as a finalizer,
// so it cannot override them.
var builtinOrphanDefaults = map[GroupResource]bool{
	{Group: "", Resource: "replicationcontrollers"}: true,
	{Group: "batch", Resource: "jobs"}:              true,
}

// Validate returns every problem in cfg, each with its field path under fld.
// It does not stop at the first error and does not modify cfg.
func Validate(cfg *Config, fld *field.Path) field.ErrorList {
	if cfg == nil {
		return field.ErrorList{field.Required(fld, "policy configuration is required")}
	}
	var errs field.ErrorList
	ignored := make(map[GroupResource]bool, len(cfg.IgnoredResources))
	ignoredPath := fld.Child("ignoredResources")
	for i, gr := range cfg.IgnoredResources {
		p := ignoredPath.Index(i)
		errs = append(errs, validateGroupResource(gr, p)...)
		if ignored[gr] {
			errs = append(errs, field.Duplicate(p, gr.String()))
		}
		ignored[gr] = true
	}

	seen := make(map[GroupResource]bool, len(cfg.Defaults))
	defaultsPath := fld.Child("defaults")
	for i, rp := range cfg.Defaults {
		p := defaultsPath.Index(i)
		gr := GroupResource{Group: rp.Group, Resource: rp.Resource}
		errs = append(errs, validateGroupResource(gr, p)...)
		errs = append(errs, validatePolicy(gr, rp.Policy, p.Child("policy"))...)
		if seen[gr] {
			errs = append(errs, field.Duplicate(p, gr.String()))
		}
		seen[gr] = true
		if ignored[gr] && gr.Resource != "" {
			errs = append(errs, field.Invalid(p.Child("resource"), rp.Resource,
				"resource "+gr.String()+" is listed in ignoredResources, so a default policy would never apply"))
		}
	}
	return errs
}

func validateGroupResource(gr GroupResource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if gr.Resource == "" {
		errs = append(errs, field.Required(p.Child("resource"), "resource name is required"))
	} else {
		for _, msg := range validation.IsDNS1035Label(gr.Resource) {
			errs = append(errs, field.Invalid(p.Child("resource"), gr.Resource,
				"must be a lowercase plural resource name such as \"deployments\": "+msg))
		}
	}
	if gr.Group != "" {
		for _, msg := range validation.IsDNS1123Subdomain(gr.Group) {
			errs = append(errs, field.Invalid(p.Child("group"), gr.Group, msg))
		}
	}
	return errs
}

func validatePolicy(gr GroupResource, policy metav1.DeletionPropagation, p *field.Path) field.ErrorList {
	switch policy {
	case "":
		return field.ErrorList{field.Required(p, "one of "+strings.Join(supportedPolicies, ", ")+" is required")}
	case metav1.DeletePropagationOrphan, metav1.DeletePropagationForeground:
		return nil
	case metav1.DeletePropagationBackground:
		if builtinOrphanDefaults[gr] {
			return field.ErrorList{field.Invalid(p, policy,
				"kube-apiserver orphans "+gr.String()+" by default and a Background default cannot override that; send an explicit propagationPolicy instead")}
		}
		return nil
	default:
		return field.ErrorList{field.NotSupported(p, policy, supportedPolicies)}
	}
}
