package client

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// RemoveFinalizer removes finalizer from t: GET the live object; if it is gone, replaced, not
// being deleted or without the finalizer, there is nothing to do; else a JSON merge patch at
// the live resourceVersion that keeps every other finalizer, retried on conflict. It reports
// whether this call removed it.
func RemoveFinalizer(ctx context.Context, c Interface, t Target, finalizer string) (bool, error) {
	return RemoveFinalizerFrom(ctx, c, t, finalizer, nil)
}

// RemoveFinalizerFrom is RemoveFinalizer whose first attempt starts from read, t's object as
// the caller has just read it (nil: GET it), saving that request; a conflict reads it again.
func RemoveFinalizerFrom(ctx context.Context, c Interface, t Target, finalizer string, read *metav1.PartialObjectMetadata) (bool, error) {
	removed := false
	jmp := func(live *metav1.PartialObjectMetadata) []byte {
		patch, _ := FinalizerRemovalPatch(live, t.UID, finalizer)
		return patch
	}
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var err error
		if read != nil {
			removed, err = patchRead(ctx, c, t, read, jmp)
			read = nil
		} else {
			removed, err = patchLive(ctx, c, t, jmp)
		}
		return err
	})
	return removed, err
}

// FinalizerRemovalPatch returns the JSON merge patch that removes finalizer from live, the
// object as just read, or ok=false when nothing must be patched: the name now holds another
// object than uid, the object is not being deleted (a GC finalizer on a live object is a
// default policy, not cascade's to remove), or the finalizer is already gone. The patch
// carries live's resourceVersion, so it fails with 409 if the object changed since it was
// read, and names every other finalizer, so none is lost.
func FinalizerRemovalPatch(live *metav1.PartialObjectMetadata, uid types.UID, finalizer string) (patch []byte, ok bool) {
	if live.UID != uid || live.DeletionTimestamp == nil {
		return nil, false
	}
	remaining, found := RemainingFinalizers(live.Finalizers, finalizer)
	if !found {
		return nil, false
	}
	return removeFinalizerJMP(live.ResourceVersion, remaining), true
}

// RemainingFinalizers returns fs without every occurrence of finalizer, and whether it was
// there. The input is not modified; every other finalizer keeps its place.
func RemainingFinalizers(fs []string, finalizer string) ([]string, bool) {
	if !slices.Contains(fs, finalizer) {
		return fs, false
	}
	out := make([]string, 0, len(fs)-1)
	for _, f := range fs {
		if f != finalizer {
			out = append(out, f)
		}
	}
	return out, true
}
