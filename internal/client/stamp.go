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
			plan = policy.PlanStamp(stampState(live), want)
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

func stampState(live *metav1.PartialObjectMetadata) policy.StampState {
	return policy.StampState{
		Finalizers: live.Finalizers,
		Stamped:    live.Annotations[policy.DefaultPropagationAnnotation],
		Deleting:   live.DeletionTimestamp != nil,
	}
}

// UnstampDefault removes t's default-propagation stamp, what `cascade uninstall` does to every
// object that carries one: the finalizer its policy.DefaultPropagationAnnotation records (when
// it is still there) and the annotation, and nothing else (policy.PlanStamp with no default
// wanted: a finalizer the annotation does not record is never removed). listed is the object
// as a list returned it, or nil: the first JSON merge patch is planned on it and sent at its
// resourceVersion, saving a GET; on a conflict the live object is read and the plan made again,
// as StampDefault does. An object gone, replaced (another UID) or being deleted is not written
// to (its finalizers are its delete's now). It returns the plan it carried out (Change false
// when none).
func UnstampDefault(ctx context.Context, c Interface, t Target, listed *metav1.PartialObjectMetadata) (policy.StampPlan, error) {
	var done policy.StampPlan
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		done = policy.StampPlan{}
		var plan policy.StampPlan
		jmp := func(live *metav1.PartialObjectMetadata) []byte {
			plan = policy.PlanStamp(stampState(live), "")
			if !plan.Change {
				return nil
			}
			return stampJMP(live.ResourceVersion, plan)
		}
		var sent bool
		var err error
		if listed != nil {
			sent, err = patchRead(ctx, c, t, listed, jmp)
			listed = nil // a retry reads the live object
		} else {
			sent, err = patchLive(ctx, c, t, jmp)
		}
		if sent {
			done = plan
		}
		return err
	})
	return done, err
}
