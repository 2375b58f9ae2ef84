package policy

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIVersion and Kind identify a policy document.
const (
	APIVersion = "cascade.dev/v1alpha1"
	Kind       = "Policy"
)

// ConfigMapKey is the key of the policy ConfigMap that holds the document.
const ConfigMapKey = "policy.yaml"

// Policy is the per-resource garbage-collection policy: the document under ConfigMapKey in the
// policy ConfigMap (--policy-configmap), decoded strictly by Decode. The zero value (no rules,
// nothing ignored) is cascade's built-in behaviour, the in-tree collector's.
//
//	apiVersion: cascade.dev/v1alpha1
//	kind: Policy
//	ignoredResources: [podtemplates]
//	rules:
//	  - resource: configmaps
//	    namespaceSelector: {matchLabels: {team: a}}
//	    collect: Never
//	  - resource: replicasets.apps
//	    collect: After 10m
type Policy struct {
	// APIVersion is cascade.dev/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind is Policy.
	Kind string `json:"kind"`
	// IgnoredResources are never watched nor collected, on top of --ignored-resources. Each
	// names a resource as resource.group ("podtemplates", "widgets.example.com").
	IgnoredResources []string `json:"ignoredResources,omitempty"`
	// Rules say, per resource and optionally per namespace, how its dependents are collected
	// and what its owners' default propagation is. For a given object, the first rule (in this
	// order) that selects it and sets a kind of rule decides that kind.
	Rules []Rule `json:"rules,omitempty"`
}

// Rule is one rule of a Policy. It sets DefaultPropagation, Collect or both.
type Rule struct {
	// Resource names the resource the rule is about, as resource.group: "configmaps" (core),
	// "replicasets.apps", "widgets.example.com".
	Resource string `json:"resource"`
	// NamespaceSelector, when set, narrows the rule to objects in namespaces whose labels it
	// matches. A rule with a selector never applies to cluster-scoped objects. An empty
	// selector ({}) matches every namespace.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// DefaultPropagation (Orphan, Foreground or Background) is what a delete of an object of
	// this resource that names no propagation policy does to its dependents. Orphan and
	// Foreground are applied as the orphan or foregroundDeletion finalizer on the object
	// (package finalizers/stamp: at creation by admission, before by a pass); an explicit policy on
	// the delete always wins. Background is kube-apiserver's own default (rejected for
	// resources whose built-in default is Orphan); it stops later rules from applying.
	DefaultPropagation metav1.DeletionPropagation `json:"defaultPropagation,omitempty"`
	// Collect is about objects of this resource as dependents, once every owner is gone (or
	// waits for its dependents in the foreground): "Never" (cascade removes the references to
	// the gone owners instead of deleting the object, and says so in an Event on it) or
	// "After <duration>" such as "After 10m" (the object is kept that long after cascade first
	// found its last owner gone, then collected). Empty: collected as built in. Cascade applies
	// it whatever propagation the owner's delete asked for.
	Collect string `json:"collect,omitempty"`
}

// Collect values.
const (
	// CollectNeverValue is the Rule.Collect that keeps dependents.
	CollectNeverValue = "Never"
	// CollectAfterPrefix starts a Rule.Collect that delays collection: "After 10m".
	CollectAfterPrefix = "After "
)

// MinCollectAfter is the shortest delay of collect: After. The time a dependent's last owner
// was found gone is recorded with a precision of one second.
const MinCollectAfter = time.Second

// CollectMode says how dependents of a resource are collected.
type CollectMode int

const (
	// CollectAsBuiltIn: deleted as soon as every owner is gone (the zero value).
	CollectAsBuiltIn CollectMode = iota
	// CollectNever: never deleted for lack of owners; the references to gone owners are removed.
	CollectNever
	// CollectAfter: deleted Collect.After after cascade first found every owner gone.
	CollectAfter
)

func (m CollectMode) String() string {
	switch m {
	case CollectAsBuiltIn:
		return "AsBuiltIn"
	case CollectNever:
		return "Never"
	case CollectAfter:
		return "After"
	default:
		return "CollectMode(?)"
	}
}

// Collect is the collect rule in force for one dependent: an input of the decision. The zero
// value collects as built in.
type Collect struct {
	Mode CollectMode
	// After is the delay of CollectAfter.
	After time.Duration
	// Rule names the rule that set it, for messages: "rules[2] (collect: Never for configmaps)".
	Rule string
}

// GroupResource names a resource independently of its version.
type GroupResource struct {
	// Group is the API group; empty for the core group.
	Group string `json:"group"`
	// Resource is the lowercase plural resource name.
	Resource string `json:"resource"`
}

// String is resource.group, or resource for the core group: the form policies use.
func (gr GroupResource) String() string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}

// DefaultRule is one parsed defaultPropagation rule, as Compiled reports it.
type DefaultRule struct {
	// Rule is the rule's path: "rules[0]".
	Rule        string
	Resource    GroupResource
	Propagation metav1.DeletionPropagation
	// NamespaceSelector is the rule's selector rendered as a string ("" for every namespace).
	NamespaceSelector string
}
