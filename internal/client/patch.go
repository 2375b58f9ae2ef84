package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The patch bodies below are built from small structs whose field order fixes
// the byte layout, so tests can compare exact bytes.
//
// Strategic merge patches carry metadata.uid: uid is immutable, so a patch
// that reaches a recreated object with the same name fails instead of editing
// it. JSON merge patches carry metadata.resourceVersion: the server rejects
// them with 409 if the object changed since it was read. Custom resources and
// aggregated APIs reject strategic merge patches with 415, which is when the
// JSON merge patch is used.

type metadataPatch[T any] struct {
	Metadata T `json:"metadata"`
}

type uidOwnerRefsPatch[R any] struct {
	UID types.UID `json:"uid"`
	// ResourceVersion, when set, is a precondition too (409 if the object moved on).
	ResourceVersion string `json:"resourceVersion,omitempty"`
	OwnerReferences []R    `json:"ownerReferences"`
}

type rvOwnerRefsPatch struct {
	ResourceVersion string                  `json:"resourceVersion"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
}

type rvFinalizersPatch struct {
	ResourceVersion string   `json:"resourceVersion"`
	Finalizers      []string `json:"finalizers"`
}

// deleteDirective removes the list element whose merge key (uid) matches.
type deleteDirective struct {
	Patch string    `json:"$patch"`
	UID   types.UID `json:"uid"`
}

// mustMarshal encodes the patch types above. They hold only strings, UIDs,
// bools and slices of those, which always encode.
func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", v, err))
	}
	return b
}

// deleteOwnerRefsSMP returns a strategic merge patch removing the owner
// references with the given UIDs from the object with UID dependentUID. A UID
// that is not referenced is not an error. A non-empty rv is a precondition too:
// the server answers 409 if the object moved on from that resourceVersion.
func deleteOwnerRefsSMP(dependentUID types.UID, rv string, ownerUIDs ...types.UID) []byte {
	dirs := make([]deleteDirective, 0, len(ownerUIDs))
	for _, uid := range ownerUIDs {
		dirs = append(dirs, deleteDirective{Patch: "delete", UID: uid})
	}
	return mustMarshal(metadataPatch[uidOwnerRefsPatch[deleteDirective]]{
		Metadata: uidOwnerRefsPatch[deleteDirective]{UID: dependentUID, ResourceVersion: rv, OwnerReferences: dirs},
	})
}

// deleteOwnerRefsJMP returns a JSON merge patch that replaces the owner
// references with remaining, valid only at resourceVersion rv.
func deleteOwnerRefsJMP(rv string, remaining []metav1.OwnerReference) []byte {
	return mustMarshal(metadataPatch[rvOwnerRefsPatch]{
		Metadata: rvOwnerRefsPatch{ResourceVersion: rv, OwnerReferences: nonNil(remaining)},
	})
}

// unblockOwnerRefsSMP returns a strategic merge patch setting
// blockOwnerDeletion=false on every reference in refs that blocks its owner,
// on the object with UID uid. References that do not block are left out of
// the patch and so stay as they are.
//
// A strategic merge patch merges list entries by uid: one naming a reference the object no
// longer has would add it back. So the patch carries the resourceVersion the references were
// read at (rv) as a precondition: a reference removed meanwhile makes it a 409, never a
// reference written back (found by the chaos suite: a user removed a dependent's last
// reference, the unblock put it back, and the dependent was collected for it).
func unblockOwnerRefsSMP(uid types.UID, rv string, refs []metav1.OwnerReference) []byte {
	var blocking []metav1.OwnerReference
	for _, ref := range refs {
		if blocks(ref) {
			blocking = append(blocking, unblocked(ref))
		}
	}
	return mustMarshal(metadataPatch[uidOwnerRefsPatch[metav1.OwnerReference]]{
		Metadata: uidOwnerRefsPatch[metav1.OwnerReference]{UID: uid, ResourceVersion: rv, OwnerReferences: nonNil(blocking)},
	})
}

// unblockOwnerRefsJMP returns a JSON merge patch that replaces the owner
// references with refs, blocking ones set to blockOwnerDeletion=false, valid
// only at resourceVersion rv. refs must be every reference of the object at
// rv, since a merge patch replaces the whole list.
func unblockOwnerRefsJMP(rv string, refs []metav1.OwnerReference) []byte {
	out := make([]metav1.OwnerReference, 0, len(refs))
	for _, ref := range refs {
		if blocks(ref) {
			ref = unblocked(ref)
		}
		out = append(out, ref)
	}
	return mustMarshal(metadataPatch[rvOwnerRefsPatch]{
		Metadata: rvOwnerRefsPatch{ResourceVersion: rv, OwnerReferences: out},
	})
}

// removeFinalizerJMP returns a JSON merge patch that replaces the finalizers
// with remaining, valid only at resourceVersion rv. No remaining finalizer
// encodes as [], never null.
func removeFinalizerJMP(rv string, remaining []string) []byte {
	return mustMarshal(metadataPatch[rvFinalizersPatch]{
		Metadata: rvFinalizersPatch{ResourceVersion: rv, Finalizers: nonNil(remaining)},
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func blocks(ref metav1.OwnerReference) bool {
	return ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion
}

// unblocked returns a copy of ref with blockOwnerDeletion=false; the caller's
// pointer is not touched.
func unblocked(ref metav1.OwnerReference) metav1.OwnerReference {
	f := false
	ref.BlockOwnerDeletion = &f
	return ref
}

// RemoveOwnerRefs removes the references to ownerUIDs from t. It sends a strategic merge patch with
// a UID precondition; when the server does not support strategic merge patch
// (415) it reads the live object and sends a JSON merge patch with the
// object's resourceVersion. The object being gone (404) counts as done, and
// so does finding another UID at the name on the fallback path. Every other
// error is returned and means the caller should decide again from a fresh
// view: a 409 from the merge patch (the object changed), or the server's
// rejection of the strategic merge patch because the name now holds an
// object with another UID (422, metadata.uid is immutable).
func RemoveOwnerRefs(ctx context.Context, c Interface, t Target, ownerUIDs []types.UID) error {
	if len(ownerUIDs) == 0 {
		return nil
	}
	return patchWithFallback(ctx, c, t, deleteOwnerRefsSMP(t.UID, "", ownerUIDs...), removeRefsJMP(ownerUIDs))
}

// removeRefsJMP builds, from the live object, the JSON merge patch removing the references to
// ownerUIDs, or nil when it has none of them.
func removeRefsJMP(ownerUIDs []types.UID) func(live *metav1.PartialObjectMetadata) []byte {
	return func(live *metav1.PartialObjectMetadata) []byte {
		remaining := slices.DeleteFunc(slices.Clone(live.OwnerReferences), func(ref metav1.OwnerReference) bool {
			return slices.Contains(ownerUIDs, ref.UID)
		})
		if len(remaining) == len(live.OwnerReferences) {
			return nil
		}
		return deleteOwnerRefsJMP(live.ResourceVersion, remaining)
	}
}

// ErrKeepersGone is returned by RemoveStaleOwnerRefs when the live object no longer references
// any of the owners the decision to keep it relied on: the caller decides again.
var ErrKeepersGone = errors.New("the live object no longer references the owners that kept it")

// RemoveStaleOwnerRefs removes the references to ownerUIDs (owners verified gone) from t, which a
// decision kept because it also references keepers (owners that exist), as seen at
// resourceVersion rv. The removal is valid only while that holds: were a keeper's reference
// dropped meanwhile, the object would have to be collected for its gone owners, and removing
// their references would leave it owned by nobody, never collected (found by the chaos suite: the
// user dropped the only live owner between the decision and the patch).
//
// So the strategic merge patch carries rv as a precondition besides the UID. On 409 (the object
// moved on) or 415 (no strategic merge patch), the live object is read: if it still references a
// keeper, a JSON merge patch at its resourceVersion removes the references; if it references none,
// ErrKeepersGone is returned and nothing is sent. Gone objects and another UID at the name are
// done, as in RemoveOwnerRefs.
func RemoveStaleOwnerRefs(ctx context.Context, c Interface, t Target, rv string, ownerUIDs, keepers []types.UID) error {
	if len(ownerUIDs) == 0 {
		return nil
	}
	_, err := c.Patch(ctx, t.GVR, t.Namespace, t.Name, types.StrategicMergePatchType, deleteOwnerRefsSMP(t.UID, rv, ownerUIDs...))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case !apierrors.IsUnsupportedMediaType(err) && !apierrors.IsConflict(err):
		return err
	}
	lost := false
	remove := removeRefsJMP(ownerUIDs)
	_, err = patchLive(ctx, c, t, func(live *metav1.PartialObjectMetadata) []byte {
		if !slices.ContainsFunc(live.OwnerReferences, func(ref metav1.OwnerReference) bool { return slices.Contains(keepers, ref.UID) }) {
			lost = true
			return nil
		}
		return remove(live)
	})
	if lost {
		return ErrKeepersGone
	}
	return err
}

// ErrRefsChanged is returned by UnblockOwnerRefs when the live object's owner references are
// not the ones the decision saw: nothing was sent, and the caller decides again.
var ErrRefsChanged = errors.New("the live object's owner references are not the ones the decision saw")

// UnblockOwnerRefs sets blockOwnerDeletion=false on the blocking owner
// references of t, refs being the references as last seen, at resourceVersion
// rv (a precondition when not empty: a 409 means the caller decides again). It
// breaks potential cycles before a foreground delete. Fallback and outcomes
// are those of RemoveOwnerRefs, but for the merge patch: it replaces the whole
// list at the live resourceVersion, so it is sent only when the live references
// are the ones the decision saw (SameOwnerRefs). Otherwise nothing is sent and
// ErrRefsChanged is returned: unblocking a reference added after the decision
// would let that new owner's foreground deletion finish without waiting for t.
func UnblockOwnerRefs(ctx context.Context, c Interface, t Target, rv string, refs []metav1.OwnerReference) error {
	if !slices.ContainsFunc(refs, blocks) {
		return nil
	}
	changed := false
	err := patchWithFallback(ctx, c, t,
		unblockOwnerRefsSMP(t.UID, rv, refs),
		func(live *metav1.PartialObjectMetadata) []byte {
			if !SameOwnerRefs(live.OwnerReferences, refs) {
				changed = true
				return nil
			}
			return unblockOwnerRefsJMP(live.ResourceVersion, live.OwnerReferences)
		})
	if changed {
		return ErrRefsChanged
	}
	return err
}

// SameOwnerRefs reports whether the live owner references are the ones seen (the graph's view
// of them): equal once identical references (same UID, apiVersion, kind and name) are collapsed
// to the first with the strongest controller and blockOwnerDeletion flags, as the graph keeps
// them, and flags compared by value (an absent flag is false).
func SameOwnerRefs(live, seen []metav1.OwnerReference) bool {
	return slices.Equal(collapseRefs(live), collapseRefs(seen))
}

// ownerRefKey is an owner reference with its flags by value, comparable.
type ownerRefKey struct {
	APIVersion, Kind, Name string
	UID                    types.UID
	Controller, Block      bool
}

func collapseRefs(refs []metav1.OwnerReference) []ownerRefKey {
	out := make([]ownerRefKey, 0, len(refs))
	for _, r := range refs {
		k := ownerRefKey{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID,
			Controller: r.Controller != nil && *r.Controller, Block: blocks(r)}
		i := slices.IndexFunc(out, func(o ownerRefKey) bool {
			return o.UID == k.UID && o.Name == k.Name && o.APIVersion == k.APIVersion && o.Kind == k.Kind
		})
		if i < 0 {
			out = append(out, k)
			continue
		}
		out[i].Controller = out[i].Controller || k.Controller
		out[i].Block = out[i].Block || k.Block
	}
	return out
}

// patchWithFallback sends smp; on 415 it reads the live object and sends the
// JSON merge patch jmp builds from it, unless jmp returns nil (nothing left
// to change). NotFound and a live object with another UID are success.
func patchWithFallback(ctx context.Context, c Interface, t Target, smp []byte, jmp func(live *metav1.PartialObjectMetadata) []byte) error {
	_, err := c.Patch(ctx, t.GVR, t.Namespace, t.Name, types.StrategicMergePatchType, smp)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case !apierrors.IsUnsupportedMediaType(err):
		return err
	}
	_, err = patchLive(ctx, c, t, jmp)
	return err
}

// patchLive reads t's live object and sends the JSON merge patch jmp builds from it, unless jmp
// returns nil (nothing to change). NotFound, before or at the patch, and a live object with
// another UID are success with nothing sent; sent reports whether the patch was applied. A 409
// is returned as it is: callers that retry on conflict read and build again.
func patchLive(ctx context.Context, c Interface, t Target, jmp func(live *metav1.PartialObjectMetadata) []byte) (sent bool, err error) {
	live, err := c.Get(ctx, t.GVR, t.Namespace, t.Name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return patchRead(ctx, c, t, live, jmp)
}

// patchRead is patchLive on live, t's object as just read.
func patchRead(ctx context.Context, c Interface, t Target, live *metav1.PartialObjectMetadata, jmp func(live *metav1.PartialObjectMetadata) []byte) (sent bool, err error) {
	if live.UID != t.UID {
		return false, nil
	}
	body := jmp(live)
	if body == nil {
		return false, nil
	}
	_, err = c.Patch(ctx, t.GVR, t.Namespace, t.Name, types.MergePatchType, body)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
