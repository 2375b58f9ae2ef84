package client

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// Dry-run actions of the writes outside Interface (labels of cascade_dry_run_actions_total).
const (
	ActionApplyAdmission  = "apply_admission"  // the MutatingAdmissionPolicy or its binding, at either version
	ActionDeleteAdmission = "delete_admission" // idem
	ActionWriteConfigMap  = "write_configmap"  // the orphan record
	ActionEvent           = "event"
)

var (
	gvrAdmissionPolicy         = admissionv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicies")
	gvrAdmissionBinding        = admissionv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicybindings")
	gvrAdmissionPolicyV1beta1  = admissionv1beta1.SchemeGroupVersion.WithResource("mutatingadmissionpolicies")
	gvrAdmissionBindingV1beta1 = admissionv1beta1.SchemeGroupVersion.WithResource("mutatingadmissionpolicybindings")
	gvrConfigMaps              = corev1.SchemeGroupVersion.WithResource("configmaps")
	gvrEvents                  = corev1.SchemeGroupVersion.WithResource("events")
)

// DryRun returns the Edge of shadow mode: reads go through e, and every write of every part
// is counted in cascade_dry_run_actions_total{action} and logged once per action and object,
// then answered as if it succeeded, never sent. This is the one place where --dry-run is
// decided; the returned DryRun checks divergence (Run) every divergenceAfter/10 (at least a
// second).
func (e Edge) DryRun(reg prometheus.Registerer, divergenceAfter time.Duration) (Edge, *DryRun) {
	d := NewDryRun(e.Objects, reg)
	d.after = divergenceAfter
	return Edge{
		Objects:    d,
		Admission:  dryAdmission{d: d, read: e.Admission},
		ConfigMaps: func(ns string) ConfigMaps { return dryConfigMaps{d: d, read: e.ConfigMaps(ns), ns: ns} },
		Events:     dryEvents{d: d},
	}, d
}

type dryAdmission struct {
	d    *DryRun
	read Admission
}

func (a dryAdmission) GetPolicy(ctx context.Context, name string) (*admissionv1.MutatingAdmissionPolicy, error) {
	return a.read.GetPolicy(ctx, name)
}

func (a dryAdmission) GetBinding(ctx context.Context, name string) (*admissionv1.MutatingAdmissionPolicyBinding, error) {
	return a.read.GetBinding(ctx, name)
}

func (a dryAdmission) ApplyPolicy(ctx context.Context, p *admissionv1.MutatingAdmissionPolicy) error {
	a.d.record(ctx, ActionApplyAdmission, Target{GVR: gvrAdmissionPolicy, Name: p.Name})
	return nil
}

func (a dryAdmission) ApplyBinding(ctx context.Context, b *admissionv1.MutatingAdmissionPolicyBinding) error {
	a.d.record(ctx, ActionApplyAdmission, Target{GVR: gvrAdmissionBinding, Name: b.Name})
	return nil
}

func (a dryAdmission) DeletePolicy(ctx context.Context, name string, uid types.UID) error {
	a.d.record(ctx, ActionDeleteAdmission, Target{GVR: gvrAdmissionPolicy, Name: name, UID: uid})
	return nil
}

func (a dryAdmission) DeleteBinding(ctx context.Context, name string, uid types.UID) error {
	a.d.record(ctx, ActionDeleteAdmission, Target{GVR: gvrAdmissionBinding, Name: name, UID: uid})
	return nil
}

func (a dryAdmission) GetPolicyV1beta1(ctx context.Context, name string) (*admissionv1beta1.MutatingAdmissionPolicy, error) {
	return a.read.GetPolicyV1beta1(ctx, name)
}

func (a dryAdmission) GetBindingV1beta1(ctx context.Context, name string) (*admissionv1beta1.MutatingAdmissionPolicyBinding, error) {
	return a.read.GetBindingV1beta1(ctx, name)
}

func (a dryAdmission) ApplyPolicyV1beta1(ctx context.Context, p *admissionv1beta1.MutatingAdmissionPolicy) error {
	a.d.record(ctx, ActionApplyAdmission, Target{GVR: gvrAdmissionPolicyV1beta1, Name: p.Name})
	return nil
}

func (a dryAdmission) ApplyBindingV1beta1(ctx context.Context, b *admissionv1beta1.MutatingAdmissionPolicyBinding) error {
	a.d.record(ctx, ActionApplyAdmission, Target{GVR: gvrAdmissionBindingV1beta1, Name: b.Name})
	return nil
}

func (a dryAdmission) DeletePolicyV1beta1(ctx context.Context, name string, uid types.UID) error {
	a.d.record(ctx, ActionDeleteAdmission, Target{GVR: gvrAdmissionPolicyV1beta1, Name: name, UID: uid})
	return nil
}

func (a dryAdmission) DeleteBindingV1beta1(ctx context.Context, name string, uid types.UID) error {
	a.d.record(ctx, ActionDeleteAdmission, Target{GVR: gvrAdmissionBindingV1beta1, Name: name, UID: uid})
	return nil
}

type dryConfigMaps struct {
	d    *DryRun
	read ConfigMaps
	ns   string
}

func (c dryConfigMaps) Get(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	return c.read.Get(ctx, name)
}

// Create answers with cm, as if created.
func (c dryConfigMaps) Create(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	c.d.record(ctx, ActionWriteConfigMap, Target{GVR: gvrConfigMaps, Namespace: c.ns, Name: cm.Name}, "operation", "create")
	return cm.DeepCopy(), nil
}

// MergePatch answers with the live ConfigMap, unchanged (its read's error when it cannot be
// read: NotFound sends a writer on to Create, as it would).
func (c dryConfigMaps) MergePatch(ctx context.Context, name string, patch []byte) (*corev1.ConfigMap, error) {
	live, err := c.read.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	c.d.record(ctx, ActionWriteConfigMap, Target{GVR: gvrConfigMaps, Namespace: c.ns, Name: name, UID: live.UID}, "operation", "patch", "patch", string(patch))
	return live, nil
}

type dryEvents struct{ d *DryRun }

var _ record.EventSink = dryEvents{}

func (s dryEvents) event(e *corev1.Event, op string) (*corev1.Event, error) {
	s.d.record(context.TODO(), ActionEvent, Target{GVR: gvrEvents, Namespace: e.Namespace, Name: e.Name},
		"operation", op, "reason", e.Reason, "object", e.InvolvedObject.Kind+" "+e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name, "message", e.Message)
	return e.DeepCopy(), nil
}

func (s dryEvents) Create(e *corev1.Event) (*corev1.Event, error) { return s.event(e, "create") }
func (s dryEvents) Update(e *corev1.Event) (*corev1.Event, error) { return s.event(e, "update") }
func (s dryEvents) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return s.event(e, "patch")
}
