//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
	"github.com/cascade-gc/cascade/policy"
)

// docsMigration runs docs/migration.md's kustomize steps in order: the shadow overlay; the
// switch to deploy/base; then a cascade as deploy/base's ServiceAccount with the switched
// Deployment's arguments, whose policy has a defaultPropagation rule (what the rollback's step 3
// is for): it leads and stamps; the rollback to the shadow overlay once that cascade has
// stopped (its pods would go with the switch back; no kubelet here); cascade uninstall, dry run
// then for real; the removal. After each step it checks what the step is for: the Deployment's
// mode, cascade's RBAC and PodDisruptionBudget against the rendering of the base or the overlay
// (accessAsRendered, accessGone), the admission objects and the stamped object.
func docsMigration(t *testing.T, cp *harness.ControlPlane, cs framework.Clients, r *docsRunner) {
	ctx := context.Background()
	kube := cs.Kube
	base := kustomize(t, filepath.Join(r.root, "deploy", "base"))
	shadow := kustomize(t, filepath.Join(r.root, "deploy", "overlays", "shadow"))

	// 1. Shadow mode: one --dry-run replica, RBAC that only reads.
	r.run(t, "shadow-kustomize.sh")
	wantMode(t, kube, "shadow-kustomize.sh", true)
	accessAsRendered(t, kube, "shadow-kustomize.sh", shadow)

	// 3. Switch: the same objects, now the collector's.
	r.run(t, "switch-kustomize.sh")
	wantMode(t, kube, "switch-kustomize.sh", false)
	accessAsRendered(t, kube, "switch-kustomize.sh", base)

	// The reader's policy orphans the ConfigMaps of the namespaces labelled
	// cascade.dev/migration=true by default; settings exists there before cascade starts, for
	// its stamping pass.
	const ns = "migration"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"cascade.dev/migration": "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	settings := cs.CreateCM(t, ns, "settings")
	rule := policyDoc("rules:\n- resource: configmaps\n  namespaceSelector:\n    matchLabels: {cascade.dev/migration: \"true\"}\n  defaultPropagation: Orphan\n")
	patch, err := json.Marshal(map[string]any{"data": map[string]string{policy.ConfigMapKey: rule}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("cascade-system").Patch(ctx, "cascade-policy", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// The switched install's cascade, as its pods would run it: it leads (the Lease the
	// leader-election Role allows), creates its admission objects and stamps settings (the
	// ClusterRole's writes).
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", serviceAccountToken(t, cs)); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig=" + kc, "--leader-elect-resource-namespace=cascade-system"}
	for _, a := range deploymentArgs(t, kube) {
		if !strings.HasPrefix(a, "--metrics-bind-address=") && !strings.HasPrefix(a, "--health-probe-bind-address=") {
			args = append(args, a)
		}
	}
	c := framework.StartReady(t, cp, "cascade-migration", suite.CascadeBin, args...)
	waitLeaseStatus(t, cs, "cascade.dev/mode", "collector")
	framework.Eventually(t, collectTimeout, "cascade's admission policy", func() (bool, error) {
		p, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{})
		return err == nil && policy.ManagedByCascade(p.Labels), err
	})
	framework.Eventually(t, collectTimeout, "settings stamped Orphan", func() (bool, error) {
		cm := cs.MustExistCM(t, ns, "settings")
		return slices.Contains(cm.Finalizers, policy.FinalizerOrphan) && cm.Annotations[policy.DefaultPropagationAnnotation] == "Orphan",
			fmt.Errorf("finalizers %q, annotations %v", cm.Finalizers, cm.Annotations)
	})

	// Rolling back, 1: the collector's pods stop as the Deployment goes back to the shadow (here
	// first: with no kubelet, the test stops its cascade), and release the Lease.
	if err := c.Stop(10 * time.Second); err != nil {
		t.Logf("stopping cascade: %v", err)
	}
	l, err := kube.CoordinationV1().Leases("cascade-system").Get(ctx, "cascade", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cascade's Lease once the collector stopped: %v; want it there (cascade uninstall fails closed without it)", err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("cascade's Lease once the collector stopped is held by %s; want it released (cascade uninstall refuses while it is held)", *h)
	}
	r.run(t, "rollback-to-shadow-kustomize.sh")
	wantMode(t, kube, "rollback-to-shadow-kustomize.sh", true)
	accessAsRendered(t, kube, "rollback-to-shadow-kustomize.sh", shadow)
	accessGone(t, kube, "rollback-to-shadow-kustomize.sh", base, shadow)

	// 3. cascade uninstall: the dry run says what it would do and does nothing (the real run
	// finds the admission objects to delete), the real run deletes them and lifts the stamps.
	stamped := 0
	cms, err := kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Annotations[policy.DefaultPropagationAnnotation] != "" {
			stamped++
		}
	}
	out := r.run(t, "rollback-uninstall.sh")
	mustContain(t, "rollback-uninstall.sh", out, "Dry run: nothing is changed",
		"MutatingAdmissionPolicyBinding "+policy.AdmissionName+": would be deleted",
		"MutatingAdmissionPolicy "+policy.AdmissionName+": would be deleted",
		fmt.Sprintf("%d would be unstamped (%d orphan", stamped, stamped),
		"MutatingAdmissionPolicyBinding "+policy.AdmissionName+": deleted",
		"MutatingAdmissionPolicy "+policy.AdmissionName+": deleted",
		fmt.Sprintf("%d unstamped (%d orphan", stamped, stamped))
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the admission policy after rollback-uninstall.sh: %v, want not found", err)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, policy.AdmissionName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the admission binding after rollback-uninstall.sh: %v, want not found", err)
	}
	if cm := cs.MustExistCM(t, ns, "settings"); cm.UID != settings.UID || len(cm.Finalizers) != 0 || cm.Annotations[policy.DefaultPropagationAnnotation] != "" {
		t.Errorf("settings after rollback-uninstall.sh: uid %s (was %s), finalizers %q, annotations %v; want the same object, unstamped",
			cm.UID, settings.UID, cm.Finalizers, cm.Annotations)
	}

	// 4. The removal.
	r.run(t, "rollback-remove-kustomize.sh")
	nothingOfCascadeLeft(t, kube, cs.Dyn)
}

// docsMigrationHelm runs docs/migration.md's Helm steps: the shadow release, the switch to the
// collector and the rollback to the shadow, each an upgrade that keeps the release's other
// values, then removes the release as docs/install.md does. After each it checks the mode, the
// image the shadow install set (kept by --reuse-values), and cascade's RBAC and
// PodDisruptionBudget against helm template of the chart in that mode.
func docsMigrationHelm(t *testing.T, cs framework.Clients, r *docsRunner) {
	kube := cs.Kube
	shadow, collector := helmTemplate(t, "mode=dry-run"), helmTemplate(t, "mode=collector")
	image := func(step string) {
		if got, want := deploymentImage(t, kube), "registry.example.com/cascade:v0.1.0"; got != want {
			t.Errorf("after %s the image is %s, want %s", step, got, want)
		}
	}

	r.run(t, "shadow-helm.sh")
	wantMode(t, kube, "shadow-helm.sh", true)
	accessAsRendered(t, kube, "shadow-helm.sh", shadow)
	image("shadow-helm.sh")

	r.run(t, "switch-helm.sh")
	wantMode(t, kube, "switch-helm.sh", false)
	accessAsRendered(t, kube, "switch-helm.sh", collector)
	image("switch-helm.sh")

	r.run(t, "rollback-to-shadow-helm.sh")
	wantMode(t, kube, "rollback-to-shadow-helm.sh", true)
	accessAsRendered(t, kube, "rollback-to-shadow-helm.sh", shadow)
	accessGone(t, kube, "rollback-to-shadow-helm.sh", collector, shadow)
	image("rollback-to-shadow-helm.sh")

	r.run(t, "uninstall-helm.sh")
	nothingOfCascadeLeft(t, kube, cs.Dyn)
}

// wantMode checks the Deployment cascade in cascade-system: shadow mode (dryRun) is one replica
// with --dry-run and no leader election, the collector two replicas with leader election.
func wantMode(t *testing.T, kube kubernetes.Interface, step string, dryRun bool) {
	t.Helper()
	d, err := kube.AppsV1().Deployments("cascade-system").Get(context.Background(), "cascade", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	replicas := int32(2)
	if dryRun {
		replicas = 1
	}
	if slices.Contains(args, "--dry-run") != dryRun || slices.Contains(args, "--leader-elect=true") == dryRun ||
		d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		want := "the collector's: --leader-elect=true, no --dry-run, 2 replicas"
		if dryRun {
			want = "the shadow's: --dry-run, no --leader-elect=true, 1 replica"
		}
		t.Errorf("after %s the Deployment has arguments %v and replicas %v; want %s", step, args, d.Spec.Replicas, want)
	}
}

// accessKinds are the kinds, besides the Deployment, that a change of mode changes: cascade's
// RBAC and its PodDisruptionBudget.
var accessKinds = []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "PodDisruptionBudget"}

// accessKey names an object of accessKinds: "Kind namespace/name".
func accessKey(kind, ns, name string) string { return kind + " " + ns + "/" + name }

// accessOf is what matters of an object of accessKinds: a role's rules, a binding's role and
// subjects, a budget's minAvailable.
func accessOf(t *testing.T, o *unstructured.Unstructured) any {
	t.Helper()
	switch o.GetKind() {
	case "ClusterRole":
		return into[rbacv1.ClusterRole](t, o).Rules
	case "Role":
		return into[rbacv1.Role](t, o).Rules
	case "ClusterRoleBinding":
		b := into[rbacv1.ClusterRoleBinding](t, o)
		return binding{b.RoleRef, b.Subjects}
	case "RoleBinding":
		b := into[rbacv1.RoleBinding](t, o)
		return binding{b.RoleRef, b.Subjects}
	case "PodDisruptionBudget":
		return into[policyv1.PodDisruptionBudget](t, o).Spec.MinAvailable.String()
	}
	t.Fatalf("%s is not one of %v", o.GetKind(), accessKinds)
	return nil
}

// binding is what a (Cluster)RoleBinding grants.
type binding struct {
	RoleRef  rbacv1.RoleRef
	Subjects []rbacv1.Subject
}

// renderedAccess is the objects of accessKinds a rendering (kubectl kustomize, helm template)
// creates, Helm's hooks left out, by accessKey.
func renderedAccess(t *testing.T, manifests string) map[string]*unstructured.Unstructured {
	t.Helper()
	objs := map[string]*unstructured.Unstructured{}
	for _, o := range installed(objects(t, manifests)) {
		if slices.Contains(accessKinds, o.GetKind()) {
			objs[accessKey(o.GetKind(), o.GetNamespace(), o.GetName())] = o
		}
	}
	return objs
}

// accessAsRendered checks that cascade's RBAC and PodDisruptionBudget in the cluster are the
// rendering's, after step: every object of accessKinds it renders, with its rules, role and
// subjects or minAvailable, and none labelled app.kubernetes.io/name=cascade that it does not.
func accessAsRendered(t *testing.T, kube kubernetes.Interface, step, manifests string) {
	t.Helper()
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=cascade"}
	got := map[string]any{}
	crs, err := kube.RbacV1().ClusterRoles().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range crs.Items {
		got[accessKey("ClusterRole", "", o.Name)] = o.Rules
	}
	crbs, err := kube.RbacV1().ClusterRoleBindings().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range crbs.Items {
		got[accessKey("ClusterRoleBinding", "", o.Name)] = binding{o.RoleRef, o.Subjects}
	}
	roles, err := kube.RbacV1().Roles("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range roles.Items {
		got[accessKey("Role", o.Namespace, o.Name)] = o.Rules
	}
	rbs, err := kube.RbacV1().RoleBindings("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rbs.Items {
		got[accessKey("RoleBinding", o.Namespace, o.Name)] = binding{o.RoleRef, o.Subjects}
	}
	pdbs, err := kube.PolicyV1().PodDisruptionBudgets("").List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range pdbs.Items {
		got[accessKey("PodDisruptionBudget", o.Namespace, o.Name)] = o.Spec.MinAvailable.String()
	}

	want := renderedAccess(t, manifests)
	for key, o := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("after %s there is no %s, which the rendering has", step, key)
			continue
		}
		if w := accessOf(t, o); !equality.Semantic.DeepEqual(g, w) {
			t.Errorf("after %s %s is\n  %+v\nwant, as rendered,\n  %+v", step, key, g, w)
		}
	}
	for key := range got {
		if want[key] == nil {
			t.Errorf("after %s %s is left, which the rendering lacks", step, key)
		}
	}
}

// accessGone checks that the objects of accessKinds that from renders and to does not are gone
// after step (by name: whatever their labels).
func accessGone(t *testing.T, kube kubernetes.Interface, step, from, to string) {
	t.Helper()
	ctx := context.Background()
	kept := renderedAccess(t, to)
	checked := 0
	for key, o := range renderedAccess(t, from) {
		if kept[key] != nil {
			continue
		}
		checked++
		var err error
		ns, name := o.GetNamespace(), o.GetName()
		switch o.GetKind() {
		case "ClusterRole":
			_, err = kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		case "ClusterRoleBinding":
			_, err = kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
		case "Role":
			_, err = kube.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
		case "RoleBinding":
			_, err = kube.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
		case "PodDisruptionBudget":
			_, err = kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		}
		if !apierrors.IsNotFound(err) {
			t.Errorf("after %s %s: %v, want not found", step, key, err)
		}
	}
	if checked == 0 {
		t.Errorf("after %s: the two renderings have the same objects of %v, nothing to check gone", step, accessKinds)
	}
}
