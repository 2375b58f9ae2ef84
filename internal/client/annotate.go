package client

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type uidAnnotationsPatch struct {
	UID         types.UID         `json:"uid"`
	Annotations map[string]string `json:"annotations"`
}

type rvAnnotationsPatch struct {
	ResourceVersion string            `json:"resourceVersion"`
	Annotations     map[string]string `json:"annotations"`
}

// setAnnotationSMP returns a strategic merge patch setting one annotation on the object with
// UID uid; the other annotations are kept.
func setAnnotationSMP(uid types.UID, key, value string) []byte {
	return mustMarshal(metadataPatch[uidAnnotationsPatch]{
		Metadata: uidAnnotationsPatch{UID: uid, Annotations: map[string]string{key: value}},
	})
}

// setAnnotationJMP returns a JSON merge patch setting one annotation, valid only at
// resourceVersion rv; a merge patch merges maps, so the other annotations are kept.
func setAnnotationJMP(rv, key, value string) []byte {
	return mustMarshal(metadataPatch[rvAnnotationsPatch]{
		Metadata: rvAnnotationsPatch{ResourceVersion: rv, Annotations: map[string]string{key: value}},
	})
}

// SetAnnotation sets the annotation key to value on t, keeping its other annotations: cascade's
// own bookkeeping on an object (policy.OrphanedAtAnnotation). Fallback and outcomes are those
// of RemoveOwnerRefs: a strategic merge patch with a UID precondition, on 415 a JSON merge
// patch with the live object's resourceVersion; gone, or another UID at the name, is done.
func SetAnnotation(ctx context.Context, c Interface, t Target, key, value string) error {
	return patchWithFallback(ctx, c, t,
		setAnnotationSMP(t.UID, key, value),
		func(live *metav1.PartialObjectMetadata) []byte {
			if v, ok := live.Annotations[key]; ok && v == value {
				return nil
			}
			return setAnnotationJMP(live.ResourceVersion, key, value)
		})
}
