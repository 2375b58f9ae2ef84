package policy

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Compiled is a validated Policy, indexed for decisions: what the collector looks up on every
// dependent it is about to delete. It is immutable once built, so one value is shared by every
// worker without locks; a new policy is a new Compiled, swapped in whole. A nil *Compiled is
// the built-in behaviour, like Builtin().
type Compiled struct {
	ignored []GroupResource
	collect map[GroupResource]*ResourceRules
	// defaultRules are the defaultPropagation rules in document order; defaultsOf indexes them
	// by resource.
	defaultRules []defaultRule
	defaultsOf   map[GroupResource][]int
	rules        int
}

// ResourceRules are the collect rules of one resource, in document order.
type ResourceRules struct {
	rules []collectRule
	// selectors is true when a rule has a namespace selector (the namespace's labels are
	// needed to decide).
	selectors bool
}

type collectRule struct {
	selector selector // nil: every object, cluster-scoped ones included
	collect  Collect
}

// Builtin is the policy in force without a policy document: nothing ignored beyond
// --ignored-resources, no rule.
func Builtin() *Compiled { return &Compiled{} }

// Compile validates p and indexes it. It returns every validation error and no policy when
// there is one.
func Compile(p *Policy) (*Compiled, field.ErrorList) {
	if errs := Validate(p, nil); len(errs) > 0 {
		return nil, errs
	}
	return compile(p), nil
}

// compile indexes a policy that Validate accepted.
func compile(p *Policy) *Compiled {
	c := &Compiled{rules: len(p.Rules)}
	for _, s := range p.IgnoredResources {
		gr, _ := ParseGroupResource(s)
		c.ignored = append(c.ignored, gr)
	}
	for i, r := range p.Rules {
		gr, _ := ParseGroupResource(r.Resource)
		var sel selector
		if r.NamespaceSelector != nil {
			sel = compileSelector(r.NamespaceSelector)
		}
		if r.DefaultPropagation != "" {
			d := defaultRule{
				DefaultRule: DefaultRule{Rule: "rules[" + strconv.Itoa(i) + "]", Resource: gr, Propagation: r.DefaultPropagation},
				selector:    sel,
				ls:          r.NamespaceSelector,
			}
			if r.NamespaceSelector != nil {
				d.NamespaceSelector = formatSelector(r.NamespaceSelector)
			}
			if c.defaultsOf == nil {
				c.defaultsOf = map[GroupResource][]int{}
			}
			c.defaultsOf[gr] = append(c.defaultsOf[gr], len(c.defaultRules))
			c.defaultRules = append(c.defaultRules, d)
		}
		if r.Collect == "" {
			continue
		}
		col, _ := ParseCollect(r.Collect)
		col.Rule = fmt.Sprintf("rules[%d] (collect: %s for %s)", i, r.Collect, gr)
		if c.collect == nil {
			c.collect = map[GroupResource]*ResourceRules{}
		}
		rr := c.collect[gr]
		if rr == nil {
			rr = &ResourceRules{}
			c.collect[gr] = rr
		}
		rr.rules = append(rr.rules, collectRule{selector: sel, collect: col})
		rr.selectors = rr.selectors || sel != nil
	}
	return c
}

// Ignored returns the resources the policy ignores (on top of --ignored-resources).
func (c *Compiled) Ignored() []GroupResource {
	if c == nil {
		return nil
	}
	return c.ignored
}

// Rules is the number of rules.
func (c *Compiled) Rules() int {
	if c == nil {
		return 0
	}
	return c.rules
}

// DefaultPropagations returns the defaultPropagation rules in document order.
func (c *Compiled) DefaultPropagations() []DefaultRule {
	if c == nil {
		return nil
	}
	out := make([]DefaultRule, len(c.defaultRules))
	for i := range c.defaultRules {
		out[i] = c.defaultRules[i].DefaultRule
	}
	return out
}

// CollectRules returns the collect rules of gr, nil when it has none (the common case, one map
// lookup).
func (c *Compiled) CollectRules(gr GroupResource) *ResourceRules {
	if c == nil || c.collect == nil {
		return nil
	}
	return c.collect[gr]
}

// NeedNamespaceLabels reports whether For needs the labels of the object's namespace: some
// rule has a namespace selector.
func (r *ResourceRules) NeedNamespaceLabels() bool { return r != nil && r.selectors }

// For returns the collect rule in force for an object of the resource in namespace ("" for a
// cluster-scoped object) whose labels are nsLabels: the first rule that selects it, or the
// zero Collect (as built in). A rule with a namespace selector never selects a cluster-scoped
// object.
func (r *ResourceRules) For(namespace string, nsLabels map[string]string) Collect {
	if r == nil {
		return Collect{}
	}
	for _, rule := range r.rules {
		if rule.selector != nil && (namespace == "" || !rule.selector.matches(nsLabels)) {
			continue
		}
		return rule.collect
	}
	return Collect{}
}

// Served says what the cluster serves, for Warnings. A nil field is not checked.
type Served struct {
	// Resource reports whether the cluster serves gr (in any version).
	Resource func(gr GroupResource) bool
}

// Warnings returns what in p is valid but will not do anything yet on this cluster: a resource
// it does not serve (a CRD not installed yet: its rules apply once it is). Only resources that
// parse are checked.
func Warnings(p *Policy, served Served) field.ErrorList {
	if p == nil || served.Resource == nil {
		return nil
	}
	var warns field.ErrorList
	check := func(s string, path *field.Path, what string) {
		gr, err := ParseGroupResource(s)
		if err != nil || served.Resource(gr) {
			return
		}
		warns = append(warns, field.Invalid(path, s, "the cluster does not serve "+gr.String()+" (yet); "+what))
	}
	for i, s := range p.IgnoredResources {
		check(s, field.NewPath("ignoredResources").Index(i), "it is ignored once it is served")
	}
	for i, r := range p.Rules {
		check(r.Resource, field.NewPath("rules").Index(i).Child("resource"), "the rule applies once it is served")
	}
	return warns
}
