package policy

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config is the per-resource garbage-collection policy, read from the policy
// file mounted from a ConfigMap. The zero value is usable: SetDefaults fills
// the ignored resources; no resource gets a default propagation policy.
type Config struct {
	// Defaults sets the propagation policy applied to objects of a resource
	// when a delete request names none. At most one entry per resource.
	Defaults []ResourcePolicy `json:"defaults,omitempty"`
	// IgnoredResources are never watched nor collected. Nil means
	// DefaultIgnoredResources; an empty list ignores nothing.
	IgnoredResources []GroupResource `json:"ignoredResources,omitempty"`
}

// ResourcePolicy is the default propagation policy of one resource.
type ResourcePolicy struct {
	// Group is the API group; empty for the core group.
	Group string `json:"group"`
	// Resource is the lowercase plural resource name, such as "deployments".
	Resource string `json:"resource"`
	// Policy is Orphan, Foreground or Background.
	Policy metav1.DeletionPropagation `json:"policy"`
}

// GroupResource names a resource independently of its version.
type GroupResource struct {
	// Group is the API group; empty for the core group.
	Group string `json:"group"`
	// Resource is the lowercase plural resource name.
	Resource string `json:"resource"`
}

func (gr GroupResource) String() string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}
