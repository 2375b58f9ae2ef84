package policy

import (
	"slices"
	"testing"
)

func TestDefaultIgnoredResources(t *testing.T) {
	want := []GroupResource{{Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}}
	got := DefaultIgnoredResources()
	if !slices.Equal(got, want) {
		t.Fatalf("DefaultIgnoredResources() = %v, want %v", got, want)
	}
	got[0].Resource = "changed"
	if DefaultIgnoredResources()[0].Resource != "events" {
		t.Error("DefaultIgnoredResources() shares its backing array between calls")
	}
}

func TestSetDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Config
		want []GroupResource
	}{
		{name: "nil ignored resources become the defaults", in: Config{}, want: DefaultIgnoredResources()},
		{name: "an empty list ignores nothing", in: Config{IgnoredResources: []GroupResource{}}, want: []GroupResource{}},
		{
			name: "an explicit list is kept",
			in:   Config{IgnoredResources: []GroupResource{{Group: "example.com", Resource: "widgets"}}},
			want: []GroupResource{{Group: "example.com", Resource: "widgets"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.in
			SetDefaults(&cfg)
			if !slices.Equal(cfg.IgnoredResources, tt.want) || (cfg.IgnoredResources == nil) != (tt.want == nil) {
				t.Errorf("IgnoredResources = %#v, want %#v", cfg.IgnoredResources, tt.want)
			}
		})
	}
}

func TestGroupResourceString(t *testing.T) {
	if got := (GroupResource{Resource: "pods"}).String(); got != "pods" {
		t.Errorf("got %q", got)
	}
	if got := (GroupResource{Group: "apps", Resource: "deployments"}).String(); got != "deployments.apps" {
		t.Errorf("got %q", got)
	}
}
