package client

import (
	"context"
	"encoding/json"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"
)

// Edge is every API client cascade writes with, in one value: the metadata calls on any
// resource (Objects), the admission objects of the policy's defaultPropagation rules
// (Admission), the ConfigMaps cascade keeps (ConfigMaps: the orphan record) and the Events
// sink (Events). A writer is handed the part it needs; NewEdge builds the real one and
// Edge.DryRun the one that sends no write. (The leader-election Lease is the one write outside
// it: package internal/leader.)
type Edge struct {
	Objects    Interface
	Admission  Admission
	ConfigMaps func(namespace string) ConfigMaps
	Events     record.EventSink
}

// Admission is the MutatingAdmissionPolicy and binding cascade keeps for the policy's
// defaultPropagation rules: read, applied (server-side apply, field manager cascade, forced)
// and deleted, at admissionregistration.k8s.io/v1 (Kubernetes 1.36 on) and, with the V1beta1
// methods, at v1beta1 (1.34 and 1.35 when turned on). Which one is used is package
// finalizers/stamp's choice (internal/features). A version the server does not serve answers
// NotFound.
type Admission interface {
	GetPolicy(ctx context.Context, name string) (*admissionv1.MutatingAdmissionPolicy, error)
	GetBinding(ctx context.Context, name string) (*admissionv1.MutatingAdmissionPolicyBinding, error)
	ApplyPolicy(ctx context.Context, p *admissionv1.MutatingAdmissionPolicy) error
	ApplyBinding(ctx context.Context, b *admissionv1.MutatingAdmissionPolicyBinding) error
	// DeletePolicy deletes the policy only while it still has uid.
	DeletePolicy(ctx context.Context, name string, uid types.UID) error
	// DeleteBinding deletes the binding only while it still has uid.
	DeleteBinding(ctx context.Context, name string, uid types.UID) error

	GetPolicyV1beta1(ctx context.Context, name string) (*admissionv1beta1.MutatingAdmissionPolicy, error)
	GetBindingV1beta1(ctx context.Context, name string) (*admissionv1beta1.MutatingAdmissionPolicyBinding, error)
	ApplyPolicyV1beta1(ctx context.Context, p *admissionv1beta1.MutatingAdmissionPolicy) error
	ApplyBindingV1beta1(ctx context.Context, b *admissionv1beta1.MutatingAdmissionPolicyBinding) error
	// DeletePolicyV1beta1 deletes the policy only while it still has uid.
	DeletePolicyV1beta1(ctx context.Context, name string, uid types.UID) error
	// DeleteBindingV1beta1 deletes the binding only while it still has uid.
	DeleteBindingV1beta1(ctx context.Context, name string, uid types.UID) error
}

// ConfigMaps is the calls cascade makes on its own ConfigMaps in one namespace.
type ConfigMaps interface {
	Get(ctx context.Context, name string) (*corev1.ConfigMap, error)
	Create(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error)
	// MergePatch sends a JSON merge patch (RFC 7386).
	MergePatch(ctx context.Context, name string, patch []byte) (*corev1.ConfigMap, error)
}

// NewEdge returns the Edge that sends every write.
func NewEdge(meta metadata.Interface, kube kubernetes.Interface) Edge {
	return Edge{
		Objects:    New(meta),
		Admission:  admissionClient{kube: kube},
		ConfigMaps: func(ns string) ConfigMaps { return configMapClient{kube: kube, ns: ns} },
		Events:     &typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")},
	}
}

type admissionClient struct{ kube kubernetes.Interface }

func (a admissionClient) GetPolicy(ctx context.Context, name string) (*admissionv1.MutatingAdmissionPolicy, error) {
	return a.kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
}

func (a admissionClient) GetBinding(ctx context.Context, name string) (*admissionv1.MutatingAdmissionPolicyBinding, error) {
	return a.kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
}

func applyOptions() metav1.PatchOptions {
	force := true
	return metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
}

func (a admissionClient) ApplyPolicy(ctx context.Context, p *admissionv1.MutatingAdmissionPolicy) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = a.kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Patch(ctx, p.Name, types.ApplyPatchType, data, applyOptions())
	return err
}

func (a admissionClient) ApplyBinding(ctx context.Context, b *admissionv1.MutatingAdmissionPolicyBinding) error {
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	_, err = a.kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Patch(ctx, b.Name, types.ApplyPatchType, data, applyOptions())
	return err
}

func (a admissionClient) DeletePolicy(ctx context.Context, name string, uid types.UID) error {
	return a.kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

func (a admissionClient) DeleteBinding(ctx context.Context, name string, uid types.UID) error {
	return a.kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

func (a admissionClient) GetPolicyV1beta1(ctx context.Context, name string) (*admissionv1beta1.MutatingAdmissionPolicy, error) {
	return a.kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
}

func (a admissionClient) GetBindingV1beta1(ctx context.Context, name string) (*admissionv1beta1.MutatingAdmissionPolicyBinding, error) {
	return a.kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
}

func (a admissionClient) ApplyPolicyV1beta1(ctx context.Context, p *admissionv1beta1.MutatingAdmissionPolicy) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = a.kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().Patch(ctx, p.Name, types.ApplyPatchType, data, applyOptions())
	return err
}

func (a admissionClient) ApplyBindingV1beta1(ctx context.Context, b *admissionv1beta1.MutatingAdmissionPolicyBinding) error {
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	_, err = a.kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().Patch(ctx, b.Name, types.ApplyPatchType, data, applyOptions())
	return err
}

func (a admissionClient) DeletePolicyV1beta1(ctx context.Context, name string, uid types.UID) error {
	return a.kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

func (a admissionClient) DeleteBindingV1beta1(ctx context.Context, name string, uid types.UID) error {
	return a.kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

type configMapClient struct {
	kube kubernetes.Interface
	ns   string
}

func (c configMapClient) Get(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	return c.kube.CoreV1().ConfigMaps(c.ns).Get(ctx, name, metav1.GetOptions{})
}

func (c configMapClient) Create(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return c.kube.CoreV1().ConfigMaps(c.ns).Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
}

func (c configMapClient) MergePatch(ctx context.Context, name string, patch []byte) (*corev1.ConfigMap, error) {
	return c.kube.CoreV1().ConfigMaps(c.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
}
