package client

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/cascade-gc/cascade/policy"
)

type rvStampPatch struct {
	ResourceVersion string             `json:"resourceVersion"`
	Finalizers      []string           `json:"finalizers"`
	Annotations     map[string]*string `json:"annotations"`
}

// stampJMP returns the JSON merge patch that carries out plan on an object read at
// resourceVersion rv: the whole finalizer list (every other finalizer kept in place) and the
// stamp annotation, set or removed (null); the other annotations are kept. The resourceVersion
// makes it fail with 409 if the object changed since it was read.
func stampJMP(rv string, plan policy.StampPlan) []byte {
	var value *string
	if plan.Annotation != "" {
		value = &plan.Annotation
	}
	return mustMarshal(metadataPatch[rvStampPatch]{Metadata: rvStampPatch{
		ResourceVersion: rv,
		Finalizers:      nonNil(plan.Finalizers),
		Annotations:     map[string]*string{policy.DefaultPropagationAnnotation: value},
	}})
}

// StampDefault brings t's default-propagation stamp to want (policy.PlanStamp): GET the live
// object; if it is gone, replaced, being deleted or already as want says, there is nothing to
// do; else a JSON merge patch at the live resourceVersion, retried on conflict with a new GET
// and a new plan. So a stamp never lands on an object a delete reached first: the delete
// changes the resourceVersion (or removes the object) and the patch fails, and the new read
// shows the deletion. It returns the plan it carried out (Change false when none).
func StampDefault(ctx context.Context, c Interface, t Target, want metav1.DeletionPropagation) (policy.StampPlan, error) {
	var done policy.StampPlan
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		done = policy.StampPlan{}
		var plan policy.StampPlan
		sent, err := patchLive(ctx, c, t, func(live *metav1.PartialObjectMetadata) []byte {
			plan = policy.PlanStamp(policy.StampState{
				Finalizers: live.Finalizers,
				Stamped:    live.Annotations[policy.DefaultPropagationAnnotation],
				Deleting:   live.DeletionTimestamp != nil,
			}, want)
			if !plan.Change {
				return nil
			}
			return stampJMP(live.ResourceVersion, plan)
		})
		if sent {
			done = plan
		}
		return err
	})
	return done, err
}
