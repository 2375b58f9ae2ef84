//go:build e2e

package e2e

// The policy's defaultPropagation rules (package finalizers/stamp): the admission objects cascade
// keeps stamp the default's finalizer on objects as they are created, the pass stamps objects
// that existed before and unstamps exactly what it stamped when a rule goes. Each test uses a
// custom resource of its own group (the admission policy is cluster-wide), and deletes the
// admission objects after cascade stopped.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
	"github.com/cascade-gc/cascade/policy"
)

// defaultRule is a policy with one defaultPropagation rule for gvr's resource, narrowed to the
// namespaces labelled keepLabel=true when selected.
func defaultRule(gvr schema.GroupVersionResource, propagation string, selected bool) string {
	sel := ""
	if selected {
		sel = fmt.Sprintf("  namespaceSelector:\n    matchLabels: {%s: \"true\"}\n", keepLabel)
	}
	return policyDoc(fmt.Sprintf("rules:\n- resource: %s.%s\n%s  defaultPropagation: %s\n", gvr.Resource, gvr.Group, sel, propagation))
}

// startWithDefaults creates the policy ConfigMap in ns with doc, makes sure the admission
// objects go after the test (registered before cascade starts, so they are deleted after it
// stopped), and starts cascade on the policy.
func startWithDefaults(t *testing.T, cs framework.Clients, ns, doc string, extra ...string) *harness.Cascade {
	t.Helper()
	level := expectedAdmissionLevel(t, cs)
	t.Cleanup(func() {
		// The binding, then the policy, at the version cascade wrote them.
		var objs []interface {
			Delete(context.Context, string, metav1.DeleteOptions) error
		}
		switch level {
		case "v1":
			adm := cs.Kube.AdmissionregistrationV1()
			objs = append(objs, adm.MutatingAdmissionPolicyBindings(), adm.MutatingAdmissionPolicies())
		case "v1beta1":
			adm := cs.Kube.AdmissionregistrationV1beta1()
			objs = append(objs, adm.MutatingAdmissionPolicyBindings(), adm.MutatingAdmissionPolicies())
		}
		for _, o := range objs {
			if err := o.Delete(context.Background(), policy.AdmissionName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete the admission objects (%s): %v", level, err)
			}
		}
	})
	writePolicy(t, cs, ns, doc)
	if level == "none" {
		// No admission policy served (Kubernetes 1.34 and 1.35 by default): the pass alone
		// stamps, objects created meanwhile within one period; a short one for the tests.
		extra = append([]string{"--default-propagation-period=2s"}, extra...)
	}
	return startWithPolicy(t, ns, 1, extra...)
}

// admissionPolicyGone reports whether cascade's admission policy is absent at the level the
// server offers (always, where none is served).
func admissionPolicyGone(cs framework.Clients, level string) error {
	ctx := context.Background()
	switch level {
	case "v1":
		_, err := cs.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{})
		return err
	case "v1beta1":
		_, err := cs.Kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{})
		return err
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}, policy.AdmissionName)
}

// waitStamped waits until ns/name of gvr carries want (stampOf): at creation where an admission
// policy is served, from the pass (one --default-propagation-period later) where none is.
func waitStamped(t *testing.T, cs framework.Clients, gvr schema.GroupVersionResource, ns, name, want string) *unstructured.Unstructured {
	t.Helper()
	var u *unstructured.Unstructured
	framework.Eventually(t, collectTimeout, ns+"/"+name+": "+want, func() (bool, error) {
		u = getCR(t, cs, gvr, ns, name)
		return stampOf(u) == want, nil
	})
	return u
}

// dryRunStamp creates a probe object of gvr in ns with a server-side dry run (admission runs,
// nothing is stored) and returns the finalizers admission gave it.
func dryRunStamp(cs framework.Clients, gvr schema.GroupVersionResource, kind, ns string) ([]string, error) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind}}
	u.SetName("admission-probe")
	got, err := cs.Dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, err
	}
	return got.GetFinalizers(), nil
}

// waitAdmission waits until objects of gvr created in ns get exactly finalizers at creation
// (the admission objects reached kube-apiserver's admission chain, or left it).
func waitAdmission(t *testing.T, cs framework.Clients, gvr schema.GroupVersionResource, kind, ns string, finalizers ...string) {
	t.Helper()
	framework.Eventually(t, collectTimeout, fmt.Sprintf("creates of %s in %s stamped with %q", gvr.Resource, ns, finalizers), func() (bool, error) {
		got, err := dryRunStamp(cs, gvr, kind, ns)
		return err == nil && slices.Equal(got, finalizers), err
	})
}

func getCR(t *testing.T, cs framework.Clients, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := cs.Dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return u
}

// stampOf is what an object carries of a stamp: its finalizers and the annotation.
func stampOf(u *unstructured.Unstructured) string {
	return fmt.Sprintf("finalizers %q, %s=%q", u.GetFinalizers(), policy.DefaultPropagationAnnotation, u.GetAnnotations()[policy.DefaultPropagationAnnotation])
}

func wantStamp(finalizers []string, annotation string) string {
	return fmt.Sprintf("finalizers %q, %s=%q", finalizers, policy.DefaultPropagationAnnotation, annotation)
}

// deletePlain deletes with empty DeleteOptions: no propagation policy, as client-go callers and
// many operators do (kubectl sends Background).
func deletePlain(t *testing.T, cs framework.Clients, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if err := cs.Dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
}

func setFinalizers(t *testing.T, cs framework.Clients, gvr schema.GroupVersionResource, ns, name string, finalizers []string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"finalizers":%s}}`, jsonList(finalizers))
	if _, err := cs.Dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("set finalizers of %s/%s: %v", ns, name, err)
	}
}

func jsonList(s []string) string {
	out := "["
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf("%q", v)
	}
	return out + "]"
}

// createCRWith creates ns/name of gvr with the given finalizers.
func createCRWith(t *testing.T, cs framework.Clients, gvr schema.GroupVersionResource, kind, ns, name string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind}}
	u.SetName(name)
	u.SetFinalizers(finalizers)
	got, err := cs.Dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s/%s: %v", kind, ns, name, err)
	}
	return got
}

// TestPolicyDefaultOrphan: with defaultPropagation: Orphan for a custom resource in the
// selected namespaces, an owner created there carries the orphan finalizer and the stamp, and a
// delete that names no policy orphans its dependents. In a namespace the rule does not select,
// nothing is stamped and the same delete cascades.
func TestPolicyDefaultOrphan(t *testing.T) {
	cs := suite.Clients(t)
	ns, other := cs.NewNamespace(t), cs.NewNamespace(t)
	labelNamespace(t, cs, ns)
	gvr := createCRD(t, cs, "default-orphan.e2e.cascade.dev", "Gizmo", "Namespaced")
	level := expectedAdmissionLevel(t, cs)
	startWithDefaults(t, cs, ns, defaultRule(gvr, "Orphan", true))
	if level != "none" {
		waitAdmission(t, cs, gvr, "Gizmo", ns, "orphan")
	}
	waitAdmission(t, cs, gvr, "Gizmo", other)

	owner := createCR(t, cs, gvr, "Gizmo", ns, "owner")
	if got, want := stampOf(owner), wantStamp([]string{"orphan"}, "Orphan"); level != "none" && got != want {
		t.Fatalf("owner created in a selected namespace: %s, want %s", got, want)
	} else if level == "none" {
		owner = waitStamped(t, cs, gvr, ns, "owner", want) // by the pass, no admission policy served
	}
	dep := cs.CreateCM(t, ns, "dep", ownerRefTo(owner))
	otherOwner := createCR(t, cs, gvr, "Gizmo", other, "owner")
	if got, want := stampOf(otherOwner), wantStamp(nil, ""); got != want {
		t.Fatalf("owner created in a namespace the rule does not select: %s, want %s", got, want)
	}
	cs.CreateCM(t, other, "dep", ownerRefTo(otherOwner))

	deletePlain(t, cs, gvr, ns, "owner")
	deletePlain(t, cs, gvr, other, "owner")
	cs.WaitCMGone(t, other, "dep", collectTimeout) // not selected: the built-in Background
	framework.Eventually(t, collectTimeout, "the owner gone and dep orphaned (its reference removed)", func() (bool, error) {
		_, err := cs.Dyn.Resource(gvr).Namespace(ns).Get(context.Background(), "owner", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		return len(cs.MustExistCM(t, ns, "dep").OwnerReferences) == 0, nil
	})
	if got := cs.MustExistCM(t, ns, "dep"); got.UID != dep.UID {
		t.Errorf("dep was replaced")
	}
}

// TestPolicyDefaultForeground: with defaultPropagation: Foreground, a delete that names no
// policy waits for the owner's blocking dependents: the owner stays (Terminating) while a
// blocking dependent is held by a finalizer, and goes once the dependent is gone.
func TestPolicyDefaultForeground(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "default-foreground.e2e.cascade.dev", "Gizmo", "Namespaced")
	startWithDefaults(t, cs, ns, defaultRule(gvr, "Foreground", false))
	waitAdmission(t, cs, gvr, "Gizmo", ns, "foregroundDeletion")

	owner := createCR(t, cs, gvr, "Gizmo", ns, "owner")
	if got, want := stampOf(owner), wantStamp([]string{"foregroundDeletion"}, "Foreground"); got != want {
		t.Fatalf("owner: %s, want %s", got, want)
	}
	block := ownerRefTo(owner)
	createCRWith(t, cs, gvr, "Gizmo", ns, "blocker", holdFinalizer) // itself stamped: a Gizmo
	setOwners := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":"Gizmo","name":"owner","uid":%q,"blockOwnerDeletion":true}]}}`,
		block.APIVersion, block.UID)
	if _, err := cs.Dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), "blocker", types.MergePatchType, []byte(setOwners), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	deletePlain(t, cs, gvr, ns, "owner")
	framework.Eventually(t, collectTimeout, "the blocker deleted (Terminating on its hold finalizer)", func() (bool, error) {
		return getCR(t, cs, gvr, ns, "blocker").GetDeletionTimestamp() != nil, nil
	})
	framework.Consistently(t, 3*time.Second, "the owner waits for its blocking dependent", func() error {
		o := getCR(t, cs, gvr, ns, "owner")
		if o.GetDeletionTimestamp() == nil || !slices.Contains(o.GetFinalizers(), "foregroundDeletion") {
			return fmt.Errorf("owner not waiting in the foreground: %s", stampOf(o))
		}
		return nil
	})
	// The blocker was itself deleted in the foreground (its own stamp); let it go.
	setFinalizers(t, cs, gvr, ns, "blocker", nil)
	framework.WaitGone(t, "the owner, once its blocking dependent is gone", collectTimeout, func() error {
		_, err := cs.Dyn.Resource(gvr).Namespace(ns).Get(context.Background(), "owner", metav1.GetOptions{})
		return err
	})
}

// TestPolicyDefaultExplicitBackground: a delete that names a propagation policy wins over a
// stamped default: a stamped Orphan owner deleted with propagationPolicy: Background has its
// dependents collected.
func TestPolicyDefaultExplicitBackground(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "default-explicit.e2e.cascade.dev", "Gizmo", "Namespaced")
	startWithDefaults(t, cs, ns, defaultRule(gvr, "Orphan", false))
	waitAdmission(t, cs, gvr, "Gizmo", ns, "orphan")

	owner := createCR(t, cs, gvr, "Gizmo", ns, "owner")
	if !slices.Contains(owner.GetFinalizers(), "orphan") {
		t.Fatalf("owner not stamped: %s", stampOf(owner))
	}
	cs.CreateCM(t, ns, "dep", ownerRefTo(owner))
	bg := metav1.DeletePropagationBackground
	if err := cs.Dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), "owner", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	cs.WaitCMGone(t, ns, "dep", collectTimeout)
}

// TestPolicyDefaultStampAndUnstamp: objects that existed before the rule are stamped by the
// pass, except those that already carry a GC finalizer or are being deleted; removing the rule
// removes exactly the finalizers cascade stamped (every other finalizer stays, in place) and the
// admission objects.
func TestPolicyDefaultStampAndUnstamp(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "default-stamp.e2e.cascade.dev", "Gizmo", "Namespaced")
	type before struct {
		name       string
		finalizers []string
		deleting   bool
		stamped    bool // what the pass must do
	}
	objs := []before{
		{name: "plain", stamped: true},
		{name: "foreign", finalizers: []string{"example.com/a", "example.com/b"}, stamped: true},
		{name: "users-orphan", finalizers: []string{"example.com/a", "orphan"}},
		{name: "users-foreground", finalizers: []string{"foregroundDeletion"}},
		{name: "deleting", finalizers: []string{holdFinalizer}, deleting: true},
	}
	for _, o := range objs {
		createCRWith(t, cs, gvr, "Gizmo", ns, o.name, o.finalizers...)
		if o.deleting {
			deletePlain(t, cs, gvr, ns, o.name)
		}
	}
	// Every finalizer goes at cleanup, so that the CRD's deletion (which deletes these objects)
	// ends, and leaves no owner waiting on a GC finalizer for a later test's cascade.
	t.Cleanup(func() {
		for _, o := range objs {
			if len(o.finalizers) > 0 {
				setFinalizers(t, cs, gvr, ns, o.name, nil)
			}
		}
	})

	level := expectedAdmissionLevel(t, cs)
	c := startWithDefaults(t, cs, ns, defaultRule(gvr, "Orphan", false))
	for _, o := range objs {
		want := wantStamp(o.finalizers, "")
		if o.stamped {
			want = wantStamp(append(slices.Clone(o.finalizers), "orphan"), "Orphan")
		}
		framework.Eventually(t, collectTimeout, o.name+": "+want, func() (bool, error) {
			return stampOf(getCR(t, cs, gvr, ns, o.name)) == want, nil
		})
	}
	if v := framework.MetricValue(t, c, `cascade_default_propagation_changes_total{action="stamped"}`); v != 2 {
		t.Errorf("the pass counts %v objects stamped, want 2", v)
	}
	if level != "none" {
		waitAdmission(t, cs, gvr, "Gizmo", ns, "orphan")
	}
	created := createCR(t, cs, gvr, "Gizmo", ns, "created")
	if level == "none" {
		// Stamped by the pass (no admission policy served), before the rule goes.
		waitStamped(t, cs, gvr, ns, "created", wantStamp([]string{"orphan"}, "Orphan"))
	}
	// Objects earlier tests left stamped, for rules this policy does not have, are unstamped by
	// the same pass: the unstamps counted from here, once the pass is done, are this test's.
	const unstampedSel = `cascade_default_propagation_changes_total{action="unstamped"}`
	framework.Eventually(t, collectTimeout, "the pass done", func() (bool, error) {
		return framework.MetricValue(t, c, "cascade_default_propagation_pending") == 0, nil
	})
	unstampedBefore, _ := settled(t, c, "cascade_default_propagation_pending").Value(unstampedSel)

	// The rule goes: what cascade stamped is undone, at creation (admission) and at the pass.
	writePolicy(t, cs, ns, policyDoc(""))
	framework.WaitForMetric(t, c, "cascade_policy_generation", 2, collectTimeout)
	for _, o := range append(objs, before{name: "created", stamped: true}) {
		want := wantStamp(o.finalizers, "")
		framework.Eventually(t, collectTimeout, o.name+" after the rule went: "+want, func() (bool, error) {
			return stampOf(getCR(t, cs, gvr, ns, o.name)) == want, nil
		})
	}
	if got := getCR(t, cs, gvr, ns, "created"); got.GetUID() != created.GetUID() {
		t.Error("created was replaced")
	}
	if v := framework.MetricValue(t, c, unstampedSel) - unstampedBefore; v != 3 {
		t.Errorf("the pass counts %v objects unstamped after the rule went, want 3 (plain, foreign, created)", v)
	}
	framework.WaitGone(t, "the admission policy", collectTimeout, func() error { return admissionPolicyGone(cs, level) })
	waitAdmission(t, cs, gvr, "Gizmo", ns)
	if after := createCR(t, cs, gvr, "Gizmo", ns, "after"); len(after.GetFinalizers()) != 0 {
		t.Errorf("created after the rule went: %s", stampOf(after))
	}
}

// TestPolicyDefaultNeverRacesDelete: objects being deleted while the pass stamps them are never
// stamped: 150 objects that existed before the rule (held by a finalizer so that they stay
// Terminating, and can be inspected) are deleted with propagationPolicy: Background while a
// slow pass (--default-propagation-rate=30) stamps them. A stamp that landed after the delete
// would turn that Background delete into an orphaning one: no Terminating object may carry the
// orphan finalizer; objects the pass reached first lost it to the explicit Background.
func TestPolicyDefaultNeverRacesDelete(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "default-race.e2e.cascade.dev", "Gizmo", "Namespaced")
	const n = 150
	for i := range n {
		createCRWith(t, cs, gvr, "Gizmo", ns, fmt.Sprintf("g-%03d", i), holdFinalizer)
	}
	t.Cleanup(func() {
		for i := range n {
			setFinalizers(t, cs, gvr, ns, fmt.Sprintf("g-%03d", i), nil)
		}
	})
	c := startWithDefaults(t, cs, ns, defaultRule(gvr, "Orphan", false), "--default-propagation-rate=30")
	// Delete every object while the pass runs (it needs about n/30 s).
	framework.WaitForMetric(t, c, `cascade_default_propagation_changes_total{action="stamped"}`, 1, collectTimeout)
	bg := metav1.DeletePropagationBackground
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 5 {
		wg.Go(func() {
			for i := w; i < n; i += 5 {
				err := cs.Dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), fmt.Sprintf("g-%03d", i), metav1.DeleteOptions{PropagationPolicy: &bg})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stampedBefore := framework.MetricValue(t, c, `cascade_default_propagation_changes_total{action="stamped"}`)
	// Let the pass finish with what it had queued (it finds every object being deleted).
	framework.Eventually(t, collectTimeout, "the pass done", func() (bool, error) {
		return framework.MetricValue(t, c, "cascade_default_propagation_pending") == 0, nil
	})
	list, err := cs.Dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stampedAnnotation := 0
	for _, u := range list.Items {
		if u.GetDeletionTimestamp() == nil {
			t.Errorf("%s is not being deleted", u.GetName())
		}
		if slices.Contains(u.GetFinalizers(), "orphan") {
			t.Errorf("%s, deleted with propagationPolicy: Background, carries the orphan finalizer: %s", u.GetName(), stampOf(&u))
		}
		if u.GetAnnotations()[policy.DefaultPropagationAnnotation] != "" {
			stampedAnnotation++
		}
	}
	stamped := framework.MetricValue(t, c, `cascade_default_propagation_changes_total{action="stamped"}`)
	t.Logf("%d objects; the pass stamped %v before the deletes ended and %v in all; %d carry the stamp annotation (stamped before their delete)",
		len(list.Items), stampedBefore, stamped, stampedAnnotation)
	if stamped == 0 || stamped >= n {
		t.Errorf("the pass stamped %v of %d objects: the deletes did not race it (want some stamped, some not)", stamped, n)
	}
	if float64(stampedAnnotation) != stamped {
		t.Errorf("%d objects carry the stamp annotation, the pass counts %v stamps", stampedAnnotation, stamped)
	}
}

// TestPolicyDefaultStampWhileOwnersGo (issue 22, item 1): the pass stamps the orphan finalizer on
// Gizmos while their owners are deleted, so cascade collects some Gizmos it decided on before
// the stamp reached its graph. Each Gizmo owns a ConfigMap leaf. A Gizmo that carried the orphan
// finalizer before its deletion must be deleted with the orphan propagation (its leaf orphaned,
// kept without the reference); one never stamped is deleted in the background (its leaf
// collected). Before the fix, a DELETE retried after a 409 at the live resourceVersion kept the
// view's Background: the API server dropped the orphan finalizer, and the leaf was collected.
// The test watches the Gizmos itself from before cascade starts, so it knows of every version
// whether the stamp came before the deletion.
// Never deleted: the leaf of a Gizmo stamped before its deletion.
func TestPolicyDefaultStampWhileOwnersGo(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "default-racing-owners.e2e.cascade.dev", "Gizmo", "Namespaced")
	const n = 200
	ctx := context.Background()
	err := framework.Parallel(n, 8, func(i int) error {
		root, err := cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("root-%03d", i)}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "Gizmo"}}
		g.SetName(fmt.Sprintf("g-%03d", i))
		g.SetOwnerReferences([]metav1.OwnerReference{framework.CMRef(root)})
		if g, err = cs.Dyn.Resource(gvr).Namespace(ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
			return err
		}
		leaf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("leaf-%03d", i), OwnerReferences: []metav1.OwnerReference{ownerRefTo(g)}}}
		_, err = cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, leaf, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Every version of every Gizmo, from before cascade starts: was the orphan finalizer on it
	// before its deletionTimestamp?
	list, err := cs.Dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.Dyn.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	type fate struct{ stampedBeforeDelete, deleteSeen, gone bool }
	var mu sync.Mutex
	fates := map[string]*fate{}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			mu.Lock()
			f := fates[u.GetName()]
			if f == nil {
				f = &fate{}
				fates[u.GetName()] = f
			}
			if u.GetDeletionTimestamp() == nil && !f.deleteSeen && slices.Contains(u.GetFinalizers(), metav1.FinalizerOrphanDependents) {
				f.stampedBeforeDelete = true
			}
			if u.GetDeletionTimestamp() != nil {
				f.deleteSeen = true
			}
			if ev.Type == watch.Deleted {
				f.deleteSeen, f.gone = true, true
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-watched })

	c := startWithDefaults(t, cs, ns, defaultRule(gvr, "Orphan", false), "--default-propagation-rate=40")
	// The owners go while the pass is a third of the way through: it goes on stamping Gizmos
	// that cascade is collecting.
	framework.WaitForMetric(t, c, `cascade_default_propagation_changes_total{action="stamped"}`, n/3, collectTimeout)
	if err := framework.Parallel(n, 5, func(i int) error {
		bg := metav1.DeletePropagationBackground
		return cs.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("root-%03d", i), metav1.DeleteOptions{PropagationPolicy: &bg})
	}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, collectTimeout, "every Gizmo gone (collected with its root)", func() (bool, error) {
		l, err := cs.Dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	// The leaves settle: each is collected or orphaned.
	leaves := map[string]*corev1.ConfigMap{}
	framework.Eventually(t, collectTimeout, "every leaf collected or orphaned", func() (bool, error) {
		l, err := cs.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		clear(leaves)
		for i := range l.Items {
			cm := &l.Items[i]
			if strings.HasPrefix(cm.Name, "leaf-") {
				if len(cm.OwnerReferences) > 0 {
					return false, nil
				}
				leaves[cm.Name] = cm
			}
		}
		return true, nil
	})
	framework.Eventually(t, collectTimeout, "the test's watch saw every Gizmo go", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		gone := 0
		for _, f := range fates {
			if f.gone {
				gone++
			}
		}
		return gone == n, nil
	})
	mu.Lock()
	defer mu.Unlock()
	stamped, kept := 0, 0
	for i := range n {
		f := fates[fmt.Sprintf("g-%03d", i)]
		_, leafKept := leaves[fmt.Sprintf("leaf-%03d", i)]
		if f.stampedBeforeDelete {
			stamped++
		}
		if leafKept {
			kept++
		}
		switch {
		case f.stampedBeforeDelete && !leafKept:
			t.Errorf("g-%03d carried the orphan finalizer before its deletion, and its leaf was collected", i)
		case !f.stampedBeforeDelete && leafKept:
			t.Errorf("g-%03d was never stamped before its deletion, and its leaf was orphaned", i)
		}
	}
	t.Logf("%d Gizmos: %d stamped before their deletion (leaves kept: %d), %d deleted unstamped; cascade's deletes: %v",
		n, stamped, kept, n-stamped, framework.MetricValue(t, c, `cascade_collected_total{action="delete"}`))
	if stamped == 0 || stamped == n {
		t.Errorf("%d of %d Gizmos stamped before their deletion: the deletes did not race the pass (want some of each)", stamped, n)
	}
}
