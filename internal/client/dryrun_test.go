package client

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/internal/client/clienttest"
)

// TestDryRunWritesNothing: through the dry-run client every write cascade makes is counted by
// action, once per object, and none reaches the server; reads do.
func TestDryRunWritesNothing(t *testing.T) {
	owner := clienttest.Deleting(clienttest.Widget("ns1", "owner", "u-owner", "4"), metav1.FinalizerOrphanDependents, "example.com/keep")
	fake := clienttest.NewFake(
		clienttest.Widget("ns1", "dep", "dep-uid", "7", clienttest.OwnerRef("o1", ptr(true)), clienttest.OwnerRef("o2", nil)),
		owner,
	)
	reg := prometheus.NewRegistry()
	d := NewDryRun(New(fake), reg)
	ctx := context.Background()
	dep := Target{GVR: widgets, Namespace: "ns1", Name: "dep", UID: "dep-uid"}
	for range 2 { // the second round repeats every action: counted once
		if err := RemoveOwnerRefs(ctx, d, dep, []types.UID{"o2"}); err != nil {
			t.Fatal(err)
		}
		if err := UnblockOwnerRefs(ctx, d, dep, "7", fake2refs()); err != nil {
			t.Fatal(err)
		}
		if err := SetAnnotation(ctx, d, dep, "cascade.dev/orphaned-at", "2026-01-01T00:00:00Z owners=o2"); err != nil {
			t.Fatal(err)
		}
		if err := Delete(ctx, d, dep, "7", metav1.DeletePropagationBackground); err != nil {
			t.Fatal(err)
		}
		if _, err := RemoveFinalizer(ctx, d, Target{GVR: widgets, Namespace: "ns1", Name: "owner", UID: "u-owner"}, metav1.FinalizerOrphanDependents); err != nil {
			t.Fatal(err)
		}
	}
	if got := clienttest.Actions(fake); !slices.Equal(got, []string{
		"GET widgets.v1.example.com ns1/owner",
		"GET widgets.v1.example.com ns1/owner",
	}) {
		t.Errorf("requests that reached the server: %q, want only the reads", got)
	}
	for _, action := range []string{ActionRemoveOwnerRefs, ActionUnblockOwnerRefs, ActionAnnotate, ActionDelete, ActionRemoveFinalizer} {
		if v := testutil.ToFloat64(d.actions.WithLabelValues(action)); v != 1 {
			t.Errorf("dry_run_actions_total{action=%q} = %v, want 1", action, v)
		}
	}
	if v := testutil.ToFloat64(d.actions.WithLabelValues(ActionPatch)); v != 0 {
		t.Errorf("unclassified patches: %v", v)
	}
	live, err := clienttest.LiveOwners(fake, widgets, "ns1", "dep")
	if err != nil || len(live) != 2 {
		t.Errorf("dep's references after the dry run: %v, %v; want both", live, err)
	}
}

func ptr(b bool) *bool { return &b }

func fake2refs() []metav1.OwnerReference {
	return []metav1.OwnerReference{clienttest.OwnerRef("o1", ptr(true)), clienttest.OwnerRef("o2", nil)}
}
