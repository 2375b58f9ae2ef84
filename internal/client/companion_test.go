package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/policy"
)

// TestCompanionEdge lists every method of every part of the Edge, as TestDryRunEdgeSendsNoWrite
// does, and says for each write, and for each shape of patch cascade builds, whether companion
// mode sends it or refuses it: a refused write returns ErrCompanion, reaches no fake and is
// counted in cascade_companion_refused_writes_total{action}; a sent one reaches its fake. What
// companion mode forbids (a DELETE, an ownerReference removal or unblocking, a GC finalizer's
// removal) is refused whatever package calls it, through the helpers or not.
func TestCompanionEdge(t *testing.T) {
	live := clienttest.Widget("ns", "w", "u-w", "3", clienttest.OwnerRef("u-owner", ptr(true)))
	deleting := clienttest.Deleting(clienttest.Widget("ns", "d", "u-d", "5", clienttest.OwnerRef("u-owner", ptr(true))), metav1.FinalizerOrphanDependents)
	wT := Target{GVR: clienttest.Widgets, Namespace: "ns", Name: "w", UID: "u-w"}
	dT := Target{GVR: clienttest.Widgets, Namespace: "ns", Name: "d", UID: "u-d"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "record", UID: "u-cm"}}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w.1"}, Reason: "Test"}
	mp := &admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cascade-defaults"}}
	mb := &admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "cascade-defaults"}}
	mpBeta := &admissionv1beta1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cascade-defaults"}}
	mbBeta := &admissionv1beta1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "cascade-defaults"}}

	const sent = ""
	cases := []struct {
		name    string // Part.Method, then /shape for the patches
		refused string // the action counted, or sent
		call    func(ctx context.Context, e Edge) error
	}{
		{"Objects.Delete", ActionDelete, func(ctx context.Context, e Edge) error {
			return Delete(ctx, e.Objects, wT, "3", metav1.DeletePropagationBackground)
		}},
		{"Objects.Delete/no preconditions", ActionDelete, func(ctx context.Context, e Edge) error {
			return e.Objects.Delete(ctx, clienttest.Widgets, "ns", "w", metav1.DeleteOptions{})
		}},
		{"Objects.Patch/remove owner refs", ActionRemoveOwnerRefs, func(ctx context.Context, e Edge) error {
			return RemoveOwnerRefs(ctx, e.Objects, wT, []types.UID{"u-owner"})
		}},
		{"Objects.Patch/remove stale owner refs", ActionRemoveOwnerRefs, func(ctx context.Context, e Edge) error {
			return RemoveStaleOwnerRefs(ctx, e.Objects, wT, "3", []types.UID{"u-owner"}, []types.UID{"u-other"})
		}},
		{"Objects.Patch/owner refs by merge patch", ActionPatch, func(ctx context.Context, e Edge) error {
			_, err := e.Objects.Patch(ctx, clienttest.Widgets, "ns", "w", types.MergePatchType, deleteOwnerRefsJMP("3", nil))
			return err
		}},
		{"Objects.Patch/unblock", ActionUnblockOwnerRefs, func(ctx context.Context, e Edge) error {
			return UnblockOwnerRefs(ctx, e.Objects, wT, "3", live.OwnerReferences)
		}},
		{"Objects.Patch/remove finalizer", ActionRemoveFinalizer, func(ctx context.Context, e Edge) error {
			_, err := RemoveFinalizer(ctx, e.Objects, dT, metav1.FinalizerOrphanDependents)
			return err
		}},
		{"Objects.Patch/finalizers with another annotation", ActionRemoveFinalizer, func(ctx context.Context, e Edge) error {
			_, err := e.Objects.Patch(ctx, clienttest.Widgets, "ns", "w", types.MergePatchType,
				[]byte(`{"metadata":{"resourceVersion":"3","finalizers":[],"annotations":{"a":"b"}}}`))
			return err
		}},
		{"Objects.Patch/stamp with owner refs", ActionRemoveFinalizer, func(ctx context.Context, e Edge) error {
			_, err := e.Objects.Patch(ctx, clienttest.Widgets, "ns", "w", types.MergePatchType,
				[]byte(`{"metadata":{"resourceVersion":"3","finalizers":[],"ownerReferences":[],"annotations":{"`+policy.DefaultPropagationAnnotation+`":null}}}`))
			return err
		}},
		{"Objects.Patch/annotate", ActionAnnotate, func(ctx context.Context, e Edge) error {
			return SetAnnotation(ctx, e.Objects, wT, policy.OrphanedAtAnnotation, "v")
		}},
		{"Objects.Patch/stamp on an object being deleted", ActionStamp, func(ctx context.Context, e Edge) error {
			_, err := e.Objects.Patch(ctx, clienttest.Widgets, "ns", "d", types.MergePatchType, stampJMP("5", policy.StampPlan{Change: true}))
			return err
		}},
		{"Objects.Patch/stamp", sent, func(ctx context.Context, e Edge) error {
			plan, err := StampDefault(ctx, e.Objects, wT, metav1.DeletePropagationForeground)
			if err == nil && !plan.Change {
				return errors.New("nothing stamped")
			}
			return err
		}},
		{"Objects.Patch/unstamp of a live object", sent, func(ctx context.Context, e Edge) error {
			_, err := e.Objects.Patch(ctx, clienttest.Widgets, "ns", "w", types.MergePatchType, stampJMP("3", policy.StampPlan{Change: true}))
			return err
		}},
		{"Admission.ApplyPolicy", sent, func(ctx context.Context, e Edge) error { return e.Admission.ApplyPolicy(ctx, mp) }},
		{"Admission.ApplyBinding", sent, func(ctx context.Context, e Edge) error { return e.Admission.ApplyBinding(ctx, mb) }},
		{"Admission.DeletePolicy", sent, func(ctx context.Context, e Edge) error { return e.Admission.DeletePolicy(ctx, mp.Name, "u-mp") }},
		{"Admission.DeleteBinding", sent, func(ctx context.Context, e Edge) error { return e.Admission.DeleteBinding(ctx, mb.Name, mb.UID) }},
		// The same objects at v1beta1 (Kubernetes 1.34 and 1.35 with the feature on).
		{"Admission.ApplyPolicyV1beta1", sent, func(ctx context.Context, e Edge) error { return e.Admission.ApplyPolicyV1beta1(ctx, mpBeta) }},
		{"Admission.ApplyBindingV1beta1", sent, func(ctx context.Context, e Edge) error { return e.Admission.ApplyBindingV1beta1(ctx, mbBeta) }},
		{"Admission.DeletePolicyV1beta1", sent, func(ctx context.Context, e Edge) error {
			return e.Admission.DeletePolicyV1beta1(ctx, mpBeta.Name, "u-mp")
		}},
		{"Admission.DeleteBindingV1beta1", sent, func(ctx context.Context, e Edge) error {
			return e.Admission.DeleteBindingV1beta1(ctx, mbBeta.Name, mbBeta.UID)
		}},
		{"ConfigMaps.Create", ActionWriteConfigMap, func(ctx context.Context, e Edge) error {
			_, err := e.ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}})
			return err
		}},
		{"ConfigMaps.MergePatch", ActionWriteConfigMap, func(ctx context.Context, e Edge) error {
			_, err := e.ConfigMaps("ns").MergePatch(ctx, "record", []byte(`{"data":{"k":"v"}}`))
			return err
		}},
		{"Events.Create", sent, func(_ context.Context, e Edge) error { _, err := e.Events.Create(ev); return err }},
		{"Events.Update", sent, func(_ context.Context, e Edge) error { _, err := e.Events.Update(ev); return err }},
		{"Events.Patch", sent, func(_ context.Context, e Edge) error { _, err := e.Events.Patch(ev, []byte(`{}`)); return err }},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		method, _, _ := strings.Cut(c.name, "/")
		covered[method] = true
	}
	for part, typ := range edgeParts {
		for i := range typ.NumMethod() {
			name := part + "." + typ.Method(i).Name
			if !covered[name] && !readMethods[name] {
				t.Errorf("%s is a method of the Edge with no companion case: add one here", name)
			}
		}
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			meta := clienttest.NewFake(live.DeepCopy(), deleting.DeepCopy())
			clienttest.UnsupportSMP(meta) // every patch helper reaches its merge patch too
			kube := fake.NewClientset(cm.DeepCopy(), ev.DeepCopy())
			reg := prometheus.NewRegistry()
			comp := NewEdge(meta, kube).Companion(reg)
			err := c.call(context.Background(), comp)
			var writes []string
			for _, a := range append(meta.Actions(), kube.Actions()...) {
				if a.GetVerb() != "get" {
					writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource)
				}
			}
			refusals := refusedCount(t, reg, "")
			if c.refused == sent {
				if errors.Is(err, ErrCompanion) { // the fakes' own answers (no apply, exists) are fine
					t.Errorf("companion %s: %v, want it sent", c.name, err)
				}
				if len(writes) == 0 {
					t.Errorf("companion %s sent nothing, want it sent", c.name)
				}
				if refusals != 0 {
					t.Errorf("companion %s: %v refusals counted, want none", c.name, refusals)
				}
				return
			}
			if !errors.Is(err, ErrCompanion) {
				t.Errorf("companion %s: error %v, want ErrCompanion", c.name, err)
			}
			if len(writes) > 0 {
				t.Errorf("companion %s sent %v, want nothing sent", c.name, writes)
			}
			if m := refusedCount(t, reg, c.refused); m != 1 {
				t.Errorf("cascade_companion_refused_writes_total{action=%q} = %v after %s, want 1", c.refused, m, c.name)
			}
		})
	}
}

// refusedCount reads cascade_companion_refused_writes_total{action} from reg, as an operator's
// scrape would; action "" sums every action.
func refusedCount(t *testing.T, reg *prometheus.Registry, action string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "cascade_companion_refused_writes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && (action == "" || l.GetValue() == action) {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestCompanionStampChecksTheRead: a stamp's merge patch goes through only at the
// resourceVersion of a read that showed the object alive. A stamp at a resourceVersion the edge
// did not read is checked by a GET of its own: a stale one is a conflict (the caller reads and
// plans again) and sends nothing.
func TestCompanionStampChecksTheRead(t *testing.T) {
	live := clienttest.Widget("ns", "w", "u-w", "3")
	for _, tc := range []struct {
		name     string
		rv       string
		read     bool // the caller read the object through the edge first
		conflict bool
		gets     int
	}{
		{name: "planned on the edge's read", rv: "3", read: true, gets: 1},
		{name: "no read: the edge reads", rv: "3", gets: 1},
		{name: "stale resourceVersion", rv: "2", conflict: true, gets: 1},
		{name: "read at another resourceVersion", rv: "2", read: true, conflict: true, gets: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := clienttest.NewFake(live.DeepCopy())
			comp := NewEdge(meta, fake.NewClientset()).Companion(prometheus.NewRegistry())
			ctx := context.Background()
			if tc.read {
				if _, err := comp.Objects.Get(ctx, clienttest.Widgets, "ns", "w"); err != nil {
					t.Fatal(err)
				}
			}
			_, err := comp.Objects.Patch(ctx, clienttest.Widgets, "ns", "w", types.MergePatchType, stampJMP(tc.rv, policy.StampPlan{Change: true, Annotation: "Orphan", Finalizers: []string{metav1.FinalizerOrphanDependents}}))
			if got := apierrors.IsConflict(err); got != tc.conflict {
				t.Errorf("conflict = %v (%v), want %v", got, err, tc.conflict)
			}
			gets, patches := 0, 0
			for _, a := range meta.Actions() {
				switch a.GetVerb() {
				case "get":
					gets++
				case "patch":
					patches++
				}
			}
			if wantPatches := map[bool]int{false: 1, true: 0}[tc.conflict]; patches != wantPatches || gets != tc.gets {
				t.Errorf("GETs %d, PATCHes %d; want %d and %d", gets, patches, tc.gets, wantPatches)
			}
		})
	}
}

// TestCompanionStampChangesOnlyItsOwn (issue 32.3): in companion mode a patch shaped like a
// default-propagation stamp goes through only when what it changes, against the object as read
// at its resourceVersion, is cascade's own stamp: one GC finalizer added that its annotation
// records, or the one its recorded stamp put there removed. A stamp-shaped patch that drops a
// foreign finalizer, drops a GC finalizer cascade did not record stamping, or adds anything else
// is refused and counted; on main each was sent.
func TestCompanionStampChangesOnlyItsOwn(t *testing.T) {
	const keep = "example.com/keep"
	withFinalizers := func(stamped string, fins ...string) *metav1.PartialObjectMetadata {
		o := clienttest.Widget("ns", "f", "u-f", "7")
		o.Finalizers = fins
		if stamped != "" {
			o.Annotations = map[string]string{policy.DefaultPropagationAnnotation: stamped}
		}
		return o
	}
	stamp := func(annotation string, fins ...string) []byte {
		return stampJMP("7", policy.StampPlan{Change: true, Finalizers: fins, Annotation: annotation})
	}
	for _, c := range []struct {
		name  string
		live  *metav1.PartialObjectMetadata
		patch []byte
		sent  bool
	}{
		{"stamp orphan beside a foreign finalizer", withFinalizers("", keep), stamp("Orphan", keep, metav1.FinalizerOrphanDependents), true},
		{"unstamp cascade's orphan", withFinalizers("Orphan", keep, metav1.FinalizerOrphanDependents), stamp("", keep), true},
		{"replace cascade's orphan by foreground", withFinalizers("Orphan", metav1.FinalizerOrphanDependents, keep), stamp("Foreground", keep, metav1.FinalizerDeleteDependents), true},
		{"drop a foreign finalizer while stamping", withFinalizers("", keep), stamp("Orphan", metav1.FinalizerOrphanDependents), false},
		{"drop a foreign finalizer while unstamping", withFinalizers("Orphan", keep, metav1.FinalizerOrphanDependents), stamp("", metav1.FinalizerOrphanDependents), false},
		{"drop an orphan finalizer cascade did not stamp", withFinalizers("", keep, metav1.FinalizerOrphanDependents), stamp("", keep), false},
		{"add a foreign finalizer", withFinalizers("", keep), stamp("Orphan", keep, "example.com/other"), false},
		{"add a GC finalizer the annotation does not record", withFinalizers("", keep), stamp("Foreground", keep, metav1.FinalizerOrphanDependents), false},
		{"add two GC finalizers", withFinalizers("", keep), stamp("Orphan", keep, metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			meta := clienttest.NewFake(c.live)
			reg := prometheus.NewRegistry()
			comp := NewEdge(meta, fake.NewClientset()).Companion(reg)
			_, err := comp.Objects.Patch(context.Background(), clienttest.Widgets, "ns", "f", types.MergePatchType, c.patch)
			patched := slices.ContainsFunc(meta.Actions(), func(a clienttesting.Action) bool { return a.GetVerb() == "patch" })
			refused := refusedCount(t, reg, ActionStamp)
			if c.sent && (errors.Is(err, ErrCompanion) || !patched || refused != 0) {
				t.Errorf("%s: %v (patched %t, refused %v), want it sent", c.name, err, patched, refused)
			}
			if !c.sent && (!errors.Is(err, ErrCompanion) || patched || refused != 1) {
				t.Errorf("%s: %v (patched %t, refused %v), want it refused and counted", c.name, err, patched, refused)
			}
		})
	}
}
