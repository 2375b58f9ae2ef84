package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cascade-gc/cascade/internal/client/clienttest"
)

func TestRemainingFinalizers(t *testing.T) {
	tests := []struct {
		name      string
		in        []string
		remove    string
		want      []string
		wantFound bool
	}{
		{name: "only GC finalizer", in: []string{"orphan"}, remove: "orphan", want: []string{}, wantFound: true},
		{name: "others keep their order", in: []string{"a/x", "orphan", "b/y"}, remove: "orphan", want: []string{"a/x", "b/y"}, wantFound: true},
		{name: "repeated entries all go", in: []string{"orphan", "a/x", "orphan"}, remove: "orphan", want: []string{"a/x"}, wantFound: true},
		{name: "the other GC finalizer stays", in: []string{"foregroundDeletion", "orphan"}, remove: "orphan", want: []string{"foregroundDeletion"}, wantFound: true},
		{name: "absent", in: []string{"a/x"}, remove: "orphan", want: []string{"a/x"}, wantFound: false},
		{name: "nil", in: nil, remove: "orphan", want: nil, wantFound: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			got, found := RemainingFinalizers(in, tt.remove)
			if !slices.Equal(got, tt.want) || found != tt.wantFound {
				t.Errorf("got %q, %t; want %q, %t", got, found, tt.want, tt.wantFound)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("input modified: %q", in)
			}
		})
	}
}

func TestFinalizerRemovalPatch(t *testing.T) {
	now := metav1.Now()
	obj := func(uid types.UID, deleting bool, finalizers ...string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: uid, ResourceVersion: "7", Finalizers: finalizers}}
		if deleting {
			m.DeletionTimestamp = &now
		}
		return m
	}
	tests := []struct {
		name      string
		live      *metav1.PartialObjectMetadata
		finalizer string
		want      string // "" means no patch
	}{
		{
			name: "orphan removed, everyone else's kept", live: obj("u", true, "example.com/keep", metav1.FinalizerOrphanDependents),
			finalizer: metav1.FinalizerOrphanDependents, want: `{"metadata":{"resourceVersion":"7","finalizers":["example.com/keep"]}}`,
		},
		{
			name: "last finalizer leaves an empty list", live: obj("u", true, metav1.FinalizerDeleteDependents),
			finalizer: metav1.FinalizerDeleteDependents, want: `{"metadata":{"resourceVersion":"7","finalizers":[]}}`,
		},
		{
			name: "removing foregroundDeletion keeps orphan", live: obj("u", true, metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents),
			finalizer: metav1.FinalizerDeleteDependents, want: `{"metadata":{"resourceVersion":"7","finalizers":["orphan"]}}`,
		},
		{name: "already removed", live: obj("u", true, "example.com/keep"), finalizer: metav1.FinalizerOrphanDependents},
		{name: "another object with the same name is never touched", live: obj("other", true, metav1.FinalizerOrphanDependents), finalizer: metav1.FinalizerOrphanDependents},
		{name: "a live object's GC finalizer (a default policy) is never removed", live: obj("u", false, metav1.FinalizerOrphanDependents), finalizer: metav1.FinalizerOrphanDependents},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, ok := FinalizerRemovalPatch(tt.live, "u", tt.finalizer)
			if ok != (tt.want != "") || string(patch) != tt.want {
				t.Errorf("got %s, %t; want %s", patch, ok, tt.want)
			}
		})
	}
}

// TestRemoveFinalizerFrom: the first attempt is built from the object the caller read (no
// GET); when that read is stale the patch conflicts, and the retry reads the live object.
func TestRemoveFinalizerFrom(t *testing.T) {
	ctx := context.Background()
	target := Target{GVR: widgets, Namespace: "ns1", Name: "owner", UID: "u-owner"}
	read := clienttest.Deleting(clienttest.Widget("ns1", "owner", "u-owner", "4"), metav1.FinalizerOrphanDependents)

	fake := clienttest.NewFake(read.DeepCopy())
	if removed, err := RemoveFinalizerFrom(ctx, New(fake), target, metav1.FinalizerOrphanDependents, read); !removed || err != nil {
		t.Fatalf("RemoveFinalizerFrom = %t, %v; want removed", removed, err)
	}
	if got := clienttest.Actions(fake); len(got) != 1 || !strings.HasPrefix(got[0], "PATCH ") {
		t.Errorf("requests %q, want only the patch", got)
	}

	// Stale: someone added a finalizer since the caller's read (resourceVersion 5 now).
	live := clienttest.Deleting(clienttest.Widget("ns1", "owner", "u-owner", "5"), "example.com/late", metav1.FinalizerOrphanDependents)
	fake = clienttest.NewFake(live)
	fake.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if strings.Contains(string(a.(clienttesting.PatchAction).GetPatch()), `"resourceVersion":"4"`) {
			return true, nil, apierrors.NewConflict(widgets.GroupResource(), "owner", errors.New("modified"))
		}
		return false, nil, nil
	})
	if removed, err := RemoveFinalizerFrom(ctx, New(fake), target, metav1.FinalizerOrphanDependents, read); !removed || err != nil {
		t.Fatalf("RemoveFinalizerFrom a stale read = %t, %v; want removed", removed, err)
	}
	got, err := clienttest.Live(fake, widgets, "ns1", "owner")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Finalizers, []string{"example.com/late"}) {
		t.Errorf("finalizers %q, want the late one kept", got.Finalizers)
	}
}
