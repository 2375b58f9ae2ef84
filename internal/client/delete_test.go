package client

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestDeleteOptions(t *testing.T) {
	tests := []struct {
		name       string
		uid        types.UID
		rv         string
		policy     metav1.DeletionPropagation
		wantRV     *string
		wantPolicy *metav1.DeletionPropagation
	}{
		{name: "uid and resourceVersion preconditions", uid: "u1", rv: "42", policy: metav1.DeletePropagationBackground,
			wantRV: new("42"), wantPolicy: new(metav1.DeletePropagationBackground)},
		{name: "empty resourceVersion is left out", uid: "u1", policy: metav1.DeletePropagationForeground,
			wantPolicy: new(metav1.DeletePropagationForeground)},
		{name: "empty policy is left out", uid: "u1", rv: "42", wantRV: new("42")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := deleteOptions(tt.uid, tt.rv, tt.policy)
			if got.Preconditions == nil || got.Preconditions.UID == nil || *got.Preconditions.UID != tt.uid {
				t.Fatalf("UID precondition = %+v, want %q", got.Preconditions, tt.uid)
			}
			if !equalPtr(got.Preconditions.ResourceVersion, tt.wantRV) {
				t.Errorf("ResourceVersion precondition = %v, want %v", deref(got.Preconditions.ResourceVersion), deref(tt.wantRV))
			}
			if !equalPtr(got.PropagationPolicy, tt.wantPolicy) {
				t.Errorf("PropagationPolicy = %v, want %v", deref(got.PropagationPolicy), deref(tt.wantPolicy))
			}
			if got.OrphanDependents != nil || got.GracePeriodSeconds != nil || len(got.DryRun) > 0 {
				t.Errorf("unexpected options set: %+v", got)
			}
		})
	}
}

func TestDeleteOptionsDoNotAlias(t *testing.T) {
	a := deleteOptions("u1", "1", metav1.DeletePropagationOrphan)
	b := deleteOptions("u2", "2", metav1.DeletePropagationForeground)
	if *a.Preconditions.UID != "u1" || *a.Preconditions.ResourceVersion != "1" || *a.PropagationPolicy != metav1.DeletePropagationOrphan {
		t.Errorf("first options changed by the second call: %+v", a)
	}
	if *b.Preconditions.UID != "u2" {
		t.Errorf("second options wrong: %+v", b)
	}
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
