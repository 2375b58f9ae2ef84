package policy

import (
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// errorsOf reduces a list to "type field" strings so tests do not depend on
// message wording.
func errorsOf(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Type.String()+" "+e.Field)
	}
	return out
}

func TestValidate(t *testing.T) {
	root := field.NewPath("policy")
	tests := []struct {
		name string
		cfg  *Config
		want []string
	}{
		{name: "nil config", cfg: nil, want: []string{"Required value policy"}},
		{name: "zero config is valid", cfg: &Config{}},
		{
			name: "defaults and ignored resources are valid",
			cfg: &Config{
				Defaults: []ResourcePolicy{
					{Group: "apps", Resource: "deployments", Policy: metav1.DeletePropagationForeground},
					{Resource: "configmaps", Policy: metav1.DeletePropagationOrphan},
					{Group: "example.com", Resource: "widgets", Policy: metav1.DeletePropagationBackground},
					{Group: "batch", Resource: "jobs", Policy: metav1.DeletePropagationForeground},
				},
				IgnoredResources: DefaultIgnoredResources(),
			},
		},
		{
			name: "every error is reported, not only the first",
			cfg: &Config{
				Defaults: []ResourcePolicy{
					{Group: "apps", Resource: "", Policy: "Cascade"},                                 // 0: empty resource, unknown policy
					{Group: "apps", Resource: "deployments", Policy: ""},                             // 1: missing policy
					{Group: "apps", Resource: "deployments", Policy: metav1.DeletePropagationOrphan}, // 2: duplicate of 1
					{Group: "Apps_", Resource: "Deployment", Policy: metav1.DeletePropagationOrphan}, // 3: bad group, kind instead of resource
				},
				IgnoredResources: []GroupResource{
					{Resource: "events"},
					{Resource: ""},       // 1: empty resource
					{Resource: "events"}, // 2: duplicate of 0
				},
			},
			want: []string{
				"Required value policy.ignoredResources[1].resource",
				"Duplicate value policy.ignoredResources[2]",
				"Required value policy.defaults[0].resource",
				"Unsupported value policy.defaults[0].policy",
				"Required value policy.defaults[1].policy",
				"Duplicate value policy.defaults[2]",
				"Invalid value policy.defaults[3].resource",
				"Invalid value policy.defaults[3].group",
			},
		},
		{
			name: "background cannot override the built-in orphan default",
			cfg: &Config{Defaults: []ResourcePolicy{
				{Resource: "replicationcontrollers", Policy: metav1.DeletePropagationBackground},
				{Group: "batch", Resource: "jobs", Policy: metav1.DeletePropagationBackground},
			}},
			want: []string{
				"Invalid value policy.defaults[0].policy",
				"Invalid value policy.defaults[1].policy",
			},
		},
		{
			name: "a default for an ignored resource is an error",
			cfg: &Config{
				Defaults:         []ResourcePolicy{{Group: "events.k8s.io", Resource: "events", Policy: metav1.DeletePropagationOrphan}},
				IgnoredResources: DefaultIgnoredResources(),
			},
			want: []string{"Invalid value policy.defaults[0].resource"},
		},
		{
			name: "policy values are case-sensitive",
			cfg:  &Config{Defaults: []ResourcePolicy{{Resource: "pods", Policy: "orphan"}}},
			want: []string{"Unsupported value policy.defaults[0].policy"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before Config
			if tt.cfg != nil {
				before = Config{Defaults: slices.Clone(tt.cfg.Defaults), IgnoredResources: slices.Clone(tt.cfg.IgnoredResources)}
			}
			got := errorsOf(Validate(tt.cfg, root))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Validate() =\n%q\nwant\n%q", got, tt.want)
			}
			if tt.cfg != nil && !reflect.DeepEqual(before, *tt.cfg) {
				t.Errorf("Validate() modified the config: %+v, was %+v", *tt.cfg, before)
			}
		})
	}
}
