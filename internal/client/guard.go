package client

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// ErrNotWritable wraps the reason a guarded edge refused a write.
var ErrNotWritable = fmt.Errorf("this replica may not write now")

// Guarded returns the Edge whose every write first asks writable, and is refused without a
// request when it answers an error: the write guard of a fleet shard (internal/shard's
// Writable: held, and renewed within the renew deadline by the local clock). Reads go through
// e. A process stopped (SIGSTOP) past its Lease resumes with the writes its workers were about
// to send; the guard refuses them, as the shard's Lease may be another replica's by then.
func (e Edge) Guarded(writable func() error) Edge {
	g := guard{writable: writable}
	return Edge{
		Objects:    guardedObjects{g: g, Interface: e.Objects},
		Admission:  guardedAdmission{g: g, Admission: e.Admission},
		ConfigMaps: func(ns string) ConfigMaps { return guardedConfigMaps{g: g, ConfigMaps: e.ConfigMaps(ns)} },
		Events:     guardedEvents{g: g, sink: e.Events},
	}
}

type guard struct{ writable func() error }

func (g guard) check() error {
	if err := g.writable(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotWritable, err)
	}
	return nil
}

type guardedObjects struct {
	g guard
	Interface
}

func (o guardedObjects) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	if err := o.g.check(); err != nil {
		return err
	}
	return o.Interface.Delete(ctx, gvr, namespace, name, opts)
}

func (o guardedObjects) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) (*metav1.PartialObjectMetadata, error) {
	if err := o.g.check(); err != nil {
		return nil, err
	}
	return o.Interface.Patch(ctx, gvr, namespace, name, pt, data)
}

type guardedAdmission struct {
	g guard
	Admission
}

func (a guardedAdmission) ApplyPolicy(ctx context.Context, p *admissionv1.MutatingAdmissionPolicy) error {
	if err := a.g.check(); err != nil {
		return err
	}
	return a.Admission.ApplyPolicy(ctx, p)
}

func (a guardedAdmission) ApplyBinding(ctx context.Context, b *admissionv1.MutatingAdmissionPolicyBinding) error {
	if err := a.g.check(); err != nil {
		return err
	}
	return a.Admission.ApplyBinding(ctx, b)
}

func (a guardedAdmission) DeletePolicy(ctx context.Context, name string, uid types.UID) error {
	if err := a.g.check(); err != nil {
		return err
	}
	return a.Admission.DeletePolicy(ctx, name, uid)
}

func (a guardedAdmission) DeleteBinding(ctx context.Context, name string, uid types.UID) error {
	if err := a.g.check(); err != nil {
		return err
	}
	return a.Admission.DeleteBinding(ctx, name, uid)
}

func (a guardedAdmission) ApplyPolicyV1beta1(ctx context.Context, p *admissionv1beta1.MutatingAdmissionPolicy) error {
	if err := a.g.check(); err != nil {
		return err
	}
	return a.Admission.ApplyPolicyV1beta1(ctx, p)
}

func (a guardedAdmission) ApplyBindingV1beta1(ctx context.Context, b *admissionv1beta1.MutatingAdmissionPolicyBinding) error {
	if err := a.g.check(); err != nil {
		return err
	}
	return a.Admission.ApplyBindingV1beta1(ctx, b)
}

func (a guardedAdmission) DeletePolicyV1beta1(ctx context.Context, name string, uid types.UID) error {
	if err := a.g.check(); err != nil {
		return err
	}
	return a.Admission.DeletePolicyV1beta1(ctx, name, uid)
}

func (a guardedAdmission) DeleteBindingV1beta1(ctx context.Context, name string, uid types.UID) error {
	if err := a.g.check(); err != nil {
		return err
	}
	return a.Admission.DeleteBindingV1beta1(ctx, name, uid)
}

type guardedConfigMaps struct {
	g guard
	ConfigMaps
}

func (c guardedConfigMaps) Create(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	if err := c.g.check(); err != nil {
		return nil, err
	}
	return c.ConfigMaps.Create(ctx, cm)
}

func (c guardedConfigMaps) MergePatch(ctx context.Context, name string, patch []byte) (*corev1.ConfigMap, error) {
	if err := c.g.check(); err != nil {
		return nil, err
	}
	return c.ConfigMaps.MergePatch(ctx, name, patch)
}

type guardedEvents struct {
	g    guard
	sink record.EventSink
}

var _ record.EventSink = guardedEvents{}

func (s guardedEvents) Create(e *corev1.Event) (*corev1.Event, error) {
	if err := s.g.check(); err != nil {
		return nil, err
	}
	return s.sink.Create(e)
}

func (s guardedEvents) Update(e *corev1.Event) (*corev1.Event, error) {
	if err := s.g.check(); err != nil {
		return nil, err
	}
	return s.sink.Update(e)
}

func (s guardedEvents) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	if err := s.g.check(); err != nil {
		return nil, err
	}
	return s.sink.Patch(e, data)
}
