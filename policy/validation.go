package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxRules and MaxIgnoredResources bound a policy, so that a mistake (a generated document run
// wild) is an error, not a slow collector.
const (
	MaxRules            = 1000
	MaxIgnoredResources = 1000
)

// supportedPropagations are the values of Rule.DefaultPropagation.
var supportedPropagations = []metav1.DeletionPropagation{
	metav1.DeletePropagationOrphan,
	metav1.DeletePropagationForeground,
	metav1.DeletePropagationBackground,
}

// versionFmt is an API version ("v1", "v1beta2"), which resource.group never holds (the schema
// refuses it too).
const versionFmt = `v[0-9]+((alpha|beta)[0-9]+)?`

var versionLike = regexp.MustCompile("^" + versionFmt + "$")

// Validate returns every problem in p, each with its field path under fld (nil: the document
// root, "rules[0].collect"). It never stops at the first error and never modifies p. Problems
// that depend on the cluster (a resource it does not serve) are Warnings, not errors.
func Validate(p *Policy, fld *field.Path) field.ErrorList {
	if p == nil {
		return field.ErrorList{field.Required(pathOr(fld), "a policy document is required")}
	}
	var errs field.ErrorList
	switch p.APIVersion {
	case APIVersion:
	case "":
		errs = append(errs, field.Required(fld.Child("apiVersion"), "must be "+APIVersion))
	default:
		errs = append(errs, field.NotSupported(fld.Child("apiVersion"), p.APIVersion, []string{APIVersion}))
	}
	switch p.Kind {
	case Kind:
	case "":
		errs = append(errs, field.Required(fld.Child("kind"), "must be "+Kind))
	default:
		errs = append(errs, field.NotSupported(fld.Child("kind"), p.Kind, []string{Kind}))
	}

	ignoredPath := fld.Child("ignoredResources")
	if len(p.IgnoredResources) > MaxIgnoredResources {
		errs = append(errs, field.TooMany(ignoredPath, len(p.IgnoredResources), MaxIgnoredResources))
	}
	ignoredAt := make(map[GroupResource]int, len(p.IgnoredResources))
	for i, s := range p.IgnoredResources {
		path := ignoredPath.Index(i)
		gr, gerrs := parseResource(s, path)
		errs = append(errs, gerrs...)
		if len(gerrs) > 0 {
			continue
		}
		if j, dup := ignoredAt[gr]; dup {
			errs = append(errs, field.Duplicate(path, s+" (also ignoredResources["+strconv.Itoa(j)+"])"))
			continue
		}
		ignoredAt[gr] = i
	}

	rulesPath := fld.Child("rules")
	if len(p.Rules) > MaxRules {
		errs = append(errs, field.TooMany(rulesPath, len(p.Rules), MaxRules))
	}
	// The first rule of each resource that selects every namespace, per kind of rule: a later
	// rule of that kind for the resource could never apply.
	allCollect := map[GroupResource]int{}
	allDefault := map[GroupResource]int{}
	for i, r := range p.Rules {
		path := rulesPath.Index(i)
		gr, gerrs := parseResource(r.Resource, path.Child("resource"))
		errs = append(errs, gerrs...)
		if r.Collect == "" && r.DefaultPropagation == "" {
			errs = append(errs, field.Required(path, "a rule sets collect, defaultPropagation or both"))
		}
		if r.NamespaceSelector != nil {
			serrs := metav1validation.ValidateLabelSelector(r.NamespaceSelector,
				metav1validation.LabelSelectorValidationOptions{}, path.Child("namespaceSelector"))
			if len(serrs) == 0 {
				if _, err := metav1.LabelSelectorAsSelector(r.NamespaceSelector); err != nil {
					serrs = append(serrs, field.Invalid(path.Child("namespaceSelector"), field.OmitValueType{}, err.Error()))
				}
			}
			errs = append(errs, serrs...)
		}
		if r.DefaultPropagation != "" {
			errs = append(errs, validatePropagation(gr, len(gerrs) == 0, r.DefaultPropagation, path.Child("defaultPropagation"))...)
		}
		if r.Collect != "" {
			if _, err := ParseCollect(r.Collect); err != nil {
				errs = append(errs, field.Invalid(path.Child("collect"), r.Collect, err.Error()))
			}
		}
		if len(gerrs) > 0 {
			continue
		}
		if j, ok := ignoredAt[gr]; ok {
			errs = append(errs, field.Invalid(path.Child("resource"), r.Resource,
				"listed in ignoredResources["+strconv.Itoa(j)+"]: its objects are never watched, so this rule would never apply"))
		}
		if r.Collect != "" {
			errs = append(errs, shadowed(allCollect, gr, i, r.NamespaceSelector, path.Child("collect"), r.Collect, "collect")...)
		}
		if r.DefaultPropagation != "" {
			errs = append(errs, shadowed(allDefault, gr, i, r.NamespaceSelector, path.Child("defaultPropagation"), r.DefaultPropagation, "defaultPropagation")...)
		}
	}
	return errs
}

// shadowed reports a rule of one kind that an earlier rule for every namespace of the same
// resource makes unreachable, and records the rule when it is itself such a rule.
func shadowed(first map[GroupResource]int, gr GroupResource, i int, sel *metav1.LabelSelector, path *field.Path, value any, kind string) field.ErrorList {
	if j, ok := first[gr]; ok {
		return field.ErrorList{field.Invalid(path, value,
			"never applies: rules["+strconv.Itoa(j)+"] already sets "+kind+" for "+gr.String()+" in every namespace (the first rule that selects an object decides)")}
	}
	if sel == nil {
		first[gr] = i
	}
	return nil
}

func validatePropagation(gr GroupResource, grOK bool, prop metav1.DeletionPropagation, path *field.Path) field.ErrorList {
	switch prop {
	case metav1.DeletePropagationOrphan, metav1.DeletePropagationForeground:
		return nil
	case metav1.DeletePropagationBackground:
		if grOK && BuiltinPropagation(gr) == metav1.DeletePropagationOrphan {
			return field.ErrorList{field.Invalid(path, prop,
				"kube-apiserver orphans the dependents of "+gr.String()+" when a delete names no propagation policy, and a default is applied "+
					"as a finalizer (orphan or foregroundDeletion) on the owner: no finalizer makes such a delete cascade in the background. "+
					"Clients that want that must send propagationPolicy: Background (kubectl does by default)")}
		}
		return nil
	default:
		return field.ErrorList{field.NotSupported(path, prop, supportedPropagations)}
	}
}

// ParseGroupResource reads resource.group ("replicasets.apps"; "configmaps" for the core
// group), the form policies and --ignored-resources name resources by.
func ParseGroupResource(s string) (GroupResource, error) {
	gr, errs := parseResource(s, nil)
	if len(errs) > 0 {
		return GroupResource{}, errs.ToAggregate()
	}
	return gr, nil
}

func parseResource(s string, path *field.Path) (GroupResource, field.ErrorList) {
	if s == "" {
		return GroupResource{}, field.ErrorList{field.Required(path, "a resource as resource.group, such as replicasets.apps or configmaps (core)")}
	}
	var gr GroupResource
	gr.Resource, gr.Group, _ = strings.Cut(s, ".")
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(gr.Resource) {
		errs = append(errs, field.Invalid(path, s,
			"the resource must be a lowercase plural resource name such as replicasets (not a kind such as ReplicaSet): "+msg))
	}
	if gr.Group != "" || strings.HasSuffix(s, ".") {
		for _, msg := range validation.IsDNS1123Subdomain(gr.Group) {
			errs = append(errs, field.Invalid(path, s, "the group must be a DNS subdomain such as apps or example.com: "+msg))
		}
		if first, rest, _ := strings.Cut(gr.Group, "."); versionLike.MatchString(first) {
			want := gr.Resource
			if rest != "" {
				want += "." + rest
			}
			errs = append(errs, field.Invalid(path, s, "name the resource as resource.group, without a version: "+want))
		}
	}
	return gr, errs
}

// ParseCollect reads a Rule.Collect: "Never", or "After <duration>" with a Go duration of at
// least MinCollectAfter ("After 30s", "After 10m", "After 1h30m").
func ParseCollect(s string) (Collect, error) {
	switch {
	case s == CollectNeverValue:
		return Collect{Mode: CollectNever}, nil
	case strings.HasPrefix(s, CollectAfterPrefix):
		d, err := time.ParseDuration(strings.TrimPrefix(s, CollectAfterPrefix))
		if err != nil {
			return Collect{}, fmt.Errorf(`"After" takes a duration such as 30s, 10m or 2h45m: %v`, err)
		}
		if d < MinCollectAfter {
			return Collect{}, fmt.Errorf("the delay must be at least %s", MinCollectAfter)
		}
		return Collect{Mode: CollectAfter, After: d}, nil
	default:
		return Collect{}, errors.New(`must be "Never" or "After <duration>" (for example "After 10m"); leave collect out to collect as built in`)
	}
}

func pathOr(p *field.Path) *field.Path {
	if p == nil {
		return documentPath
	}
	return p
}

// CheckUnwatched returns an error for each defaultPropagation rule of p whose resource cascade
// does not watch (unwatched: --ignored-resources, events by default, which the policy document
// cannot see): the admission policy would stamp a GC finalizer on its objects whose deletion
// nothing then finishes (in collector mode: for ever). The same for a rule whose resource the
// document's own ignoredResources lists is Validate's.
func CheckUnwatched(p *Policy, unwatched []GroupResource) field.ErrorList {
	if p == nil || len(unwatched) == 0 {
		return nil
	}
	var errs field.ErrorList
	for i, r := range p.Rules {
		if r.DefaultPropagation == "" {
			continue
		}
		gr, err := ParseGroupResource(r.Resource)
		if err != nil || !slices.Contains(unwatched, gr) {
			continue
		}
		errs = append(errs, field.Invalid(field.NewPath("rules").Index(i).Child("resource"), r.Resource,
			"cascade does not watch it (--ignored-resources): a defaultPropagation finalizer stamped on its objects would hold their deletion for ever"))
	}
	return errs
}
