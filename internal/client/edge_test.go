package client

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/cascade-gc/cascade/internal/client/clienttest"
)

// edgeParts are the interfaces of Edge's parts, by the name the tests give them.
var edgeParts = map[string]reflect.Type{
	"Objects":    reflect.TypeFor[Interface](),
	"Admission":  reflect.TypeFor[Admission](),
	"ConfigMaps": reflect.TypeFor[ConfigMaps](),
	"Events":     reflect.TypeFor[record.EventSink](),
}

// readMethods send no write.
var readMethods = map[string]bool{
	"Objects.Get": true, "ConfigMaps.Get": true,
	"Admission.GetPolicy": true, "Admission.GetBinding": true, "Admission.GetPolicyV1beta1": true, "Admission.GetBindingV1beta1": true,
}

// edgeWriteCase is one write method of the Edge: its dry-run action and a call of it.
type edgeWriteCase struct {
	action string
	call   func(ctx context.Context, e Edge) error
}

// edgeWriteCases calls every write method of the Edge once, by the name the tests give it.
func edgeWriteCases() map[string]edgeWriteCase {
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w.1"}, Reason: "Test"}
	mp := &admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cascade-defaults"}}
	mb := &admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "cascade-defaults"}}
	mpBeta := &admissionv1beta1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cascade-defaults"}}
	mbBeta := &admissionv1beta1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "cascade-defaults"}}
	return map[string]edgeWriteCase{
		"Objects.Delete": {ActionDelete, func(ctx context.Context, e Edge) error {
			return e.Objects.Delete(ctx, clienttest.Widgets, "ns", "w", deleteOptions("u-w", "3", metav1.DeletePropagationBackground))
		}},
		"Objects.Patch": {ActionRemoveOwnerRefs, func(ctx context.Context, e Edge) error {
			_, err := e.Objects.Patch(ctx, clienttest.Widgets, "ns", "w", types.StrategicMergePatchType, deleteOwnerRefsSMP("u-w", "3", "u-owner"))
			return err
		}},
		"Admission.ApplyPolicy":         {ActionApplyAdmission, func(ctx context.Context, e Edge) error { return e.Admission.ApplyPolicy(ctx, mp) }},
		"Admission.ApplyBinding":        {ActionApplyAdmission, func(ctx context.Context, e Edge) error { return e.Admission.ApplyBinding(ctx, mb) }},
		"Admission.DeletePolicy":        {ActionDeleteAdmission, func(ctx context.Context, e Edge) error { return e.Admission.DeletePolicy(ctx, mp.Name, "u-mp") }},
		"Admission.DeleteBinding":       {ActionDeleteAdmission, func(ctx context.Context, e Edge) error { return e.Admission.DeleteBinding(ctx, mb.Name, mb.UID) }},
		"Admission.ApplyPolicyV1beta1":  {ActionApplyAdmission, func(ctx context.Context, e Edge) error { return e.Admission.ApplyPolicyV1beta1(ctx, mpBeta) }},
		"Admission.ApplyBindingV1beta1": {ActionApplyAdmission, func(ctx context.Context, e Edge) error { return e.Admission.ApplyBindingV1beta1(ctx, mbBeta) }},
		"Admission.DeletePolicyV1beta1": {ActionDeleteAdmission, func(ctx context.Context, e Edge) error {
			return e.Admission.DeletePolicyV1beta1(ctx, mpBeta.Name, "u-mp")
		}},
		"Admission.DeleteBindingV1beta1": {ActionDeleteAdmission, func(ctx context.Context, e Edge) error {
			return e.Admission.DeleteBindingV1beta1(ctx, mbBeta.Name, mbBeta.UID)
		}},
		"ConfigMaps.Create": {ActionWriteConfigMap, func(ctx context.Context, e Edge) error {
			_, err := e.ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}})
			return err
		}},
		"ConfigMaps.MergePatch": {ActionWriteConfigMap, func(ctx context.Context, e Edge) error {
			_, err := e.ConfigMaps("ns").MergePatch(ctx, "record", []byte(`{"data":{"k":"v"}}`))
			return err
		}},
		"Events.Create": {ActionEvent, func(_ context.Context, e Edge) error { _, err := e.Events.Create(ev); return err }},
		"Events.Update": {ActionEvent, func(_ context.Context, e Edge) error { _, err := e.Events.Update(ev); return err }},
		"Events.Patch":  {ActionEvent, func(_ context.Context, e Edge) error { _, err := e.Events.Patch(ev, []byte(`{}`)); return err }},
	}
}

// TestDryRunEdgeSendsNoWrite lists every method of every part of the Edge: each one that
// writes has a case here (a new write method fails the test until it has one), and each is
// counted in cascade_dry_run_actions_total under its action and sends nothing: the fakes behind
// the dry-run Edge record reads only.
func TestDryRunEdgeSendsNoWrite(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "record", UID: "u-cm"}}
	w := clienttest.Widget("ns", "w", "u-w", "3")
	writes := edgeWriteCases()
	var listed []string
	for part, typ := range edgeParts {
		for i := range typ.NumMethod() {
			name := part + "." + typ.Method(i).Name
			listed = append(listed, name)
			if _, ok := writes[name]; !ok && !readMethods[name] {
				t.Errorf("%s is a method of the Edge with no dry-run case: add one here (or to readMethods if it only reads)", name)
			}
		}
	}
	for name := range writes {
		if !strings.Contains(strings.Join(listed, " "), name) {
			t.Errorf("case %s names no method of the Edge", name)
		}
	}

	for name, w0 := range writes {
		t.Run(name, func(t *testing.T) {
			meta := clienttest.NewFake(w)
			kube := fake.NewClientset(cm.DeepCopy())
			reg := prometheus.NewRegistry()
			dry, d := NewEdge(meta, kube).DryRun(reg, DefaultDivergenceAfter)
			if err := w0.call(context.Background(), dry); err != nil {
				t.Fatalf("dry-run %s: %v", name, err)
			}
			for _, a := range append(meta.Actions(), kube.Actions()...) {
				if a.GetVerb() != "get" {
					t.Errorf("dry-run %s sent %s %s", name, a.GetVerb(), a.GetResource().Resource)
				}
			}
			if v := testutil.ToFloat64(d.actions.WithLabelValues(w0.action)); v != 1 {
				t.Errorf("cascade_dry_run_actions_total{action=%q} = %v after %s, want 1", w0.action, v, name)
			}
		})
	}
}

// TestOnlyTheEdgeWrites: no package of cascade but this one (and internal/leader and
// internal/shard, for their Leases, which decide whether the others may be sent) builds the options of a client-go write: every Create, Update, Patch, Delete and Apply
// takes metav1's CreateOptions, UpdateOptions, PatchOptions, DeleteOptions or ApplyOptions, and
// outside this package those appear nowhere (test kits aside), so every write goes to an Edge
// part.
func TestOnlyTheEdgeWrites(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	writeOptions := map[string]bool{"CreateOptions": true, "UpdateOptions": true, "PatchOptions": true, "DeleteOptions": true, "ApplyOptions": true}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == "e2e" || rel == "internal/client" || rel == "internal/leader" || rel == "internal/shard" || rel == ".git" || rel == "bin" || rel == "tools":
				return filepath.SkipDir
			case strings.HasSuffix(rel, "test") && rel != ".": // test kits: gctest, clienttest, worktest
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && writeOptions[sel.Sel.Name] {
				t.Errorf("%s: %s builds a write outside internal/client: send it through an Edge part", rel, render(src, sel))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d Go files read under %s: the walk missed the tree", files, root)
	}
}

func render(src []byte, n ast.Node) string {
	s := string(src[n.Pos()-1 : n.End()-1])
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}

// TestAdmissionVersions: the real Edge's admission methods write at the version they name:
// server-side apply (field manager cascade, forced) to v1 or v1beta1, each read back at its
// version, and a policy's delete carries its UID.
func TestAdmissionVersions(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	adm := NewEdge(nil, kube).Admission
	name := "cascade-defaults"
	typ := func(gv, kind string) metav1.TypeMeta { return metav1.TypeMeta{APIVersion: gv, Kind: kind} }
	beta, v1 := admissionv1beta1.SchemeGroupVersion.String(), admissionv1.SchemeGroupVersion.String()
	if err := adm.ApplyPolicyV1beta1(ctx, &admissionv1beta1.MutatingAdmissionPolicy{TypeMeta: typ(beta, "MutatingAdmissionPolicy"), ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	if err := adm.ApplyBindingV1beta1(ctx, &admissionv1beta1.MutatingAdmissionPolicyBinding{TypeMeta: typ(beta, "MutatingAdmissionPolicyBinding"), ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	if err := adm.ApplyPolicy(ctx, &admissionv1.MutatingAdmissionPolicy{TypeMeta: typ(v1, "MutatingAdmissionPolicy"), ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	p, err := adm.GetPolicyV1beta1(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := adm.GetBindingV1beta1(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.GetBinding(ctx, name); err == nil {
		t.Error("a v1 binding exists: only the v1beta1 one was applied")
	}
	if err := adm.DeletePolicyV1beta1(ctx, name, p.UID); err != nil {
		t.Fatal(err)
	}
	if err := adm.DeleteBindingV1beta1(ctx, name, b.UID); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range kube.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Version + "/" + a.GetResource().Resource
		switch a := a.(type) {
		case clienttesting.PatchAction:
			s += " " + string(a.GetPatchType())
		case clienttesting.DeleteAction:
			if pre := a.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil {
				s += " uid=" + string(*pre.UID)
			}
		}
		got = append(got, s)
	}
	want := []string{
		"patch v1beta1/mutatingadmissionpolicies application/apply-patch+yaml",
		"patch v1beta1/mutatingadmissionpolicybindings application/apply-patch+yaml",
		"patch v1/mutatingadmissionpolicies application/apply-patch+yaml",
		"get v1beta1/mutatingadmissionpolicies",
		"get v1beta1/mutatingadmissionpolicybindings",
		"get v1/mutatingadmissionpolicybindings",
		"delete v1beta1/mutatingadmissionpolicies uid=" + string(p.UID),
		"delete v1beta1/mutatingadmissionpolicybindings uid=" + string(b.UID),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("actions:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
