package policy

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestBuiltinPropagation(t *testing.T) {
	for _, tt := range []struct {
		gr   GroupResource
		want metav1.DeletionPropagation
	}{
		{GroupResource{Resource: "replicationcontrollers"}, metav1.DeletePropagationOrphan},
		{GroupResource{Group: "batch", Resource: "jobs"}, metav1.DeletePropagationOrphan},
		{GroupResource{Group: "apps", Resource: "replicasets"}, metav1.DeletePropagationBackground},
		{GroupResource{Group: "example.com", Resource: "jobs"}, metav1.DeletePropagationBackground},
	} {
		if got := BuiltinPropagation(tt.gr); got != tt.want {
			t.Errorf("BuiltinPropagation(%s) = %s, want %s", tt.gr, got, tt.want)
		}
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
