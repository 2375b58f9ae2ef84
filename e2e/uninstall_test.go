//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/policy"
)

// uninstall runs `cascade uninstall` with the suite's kubeconfig and returns its output and exit
// code.
func uninstall(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(suite.CascadeBin, append([]string{"uninstall", "--kubeconfig=" + suite.CP.KubeconfigPath}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("cascade uninstall: %v", err)
	}
	t.Logf("cascade uninstall %s (exit %d):\n%s", strings.Join(args, " "), cmd.ProcessState.ExitCode(), out)
	return string(out), cmd.ProcessState.ExitCode()
}

// TestUninstall (issue 23.4): cascade runs with a defaultPropagation rule (Orphan) for a custom
// resource, stamps objects that existed before (the pass) and one created after (admission),
// then stops; `cascade uninstall --dry-run` changes nothing, `cascade uninstall` deletes the
// admission objects and removes exactly the stamps, and a user's own finalizers stay: on
// stamped objects, on an object carrying its own orphan finalizer (cascade did not stamp it) and
// on a ConfigMap cascade has no rule for.
func TestUninstall(t *testing.T) {
	cs := suite.Clients(t)
	ctx := context.Background()
	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "uninstall.e2e.cascade.dev", "Gizmo", "Namespaced")
	const keep = "example.com/keep"
	createCRWith(t, cs, gvr, "Gizmo", ns, "plain")
	createCRWith(t, cs, gvr, "Gizmo", ns, "foreign", keep)
	createCRWith(t, cs, gvr, "Gizmo", ns, "users-orphan", keep, "orphan")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "users-cm", Namespace: ns, Finalizers: []string{"orphan", keep}}}
	if _, err := cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{"foreign", "users-orphan"} {
			setFinalizers(t, cs, gvr, ns, name, nil)
		}
		_, _ = cs.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, "users-cm", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})

	// With leader election on a Lease of the test's namespace, which uninstall checks (fail
	// closed: without --lease naming it, Leases named cascade left by other tests would decide).
	c := startWithDefaults(t, cs, ns, defaultRule(gvr, "Orphan", false), "--leader-elect", "--leader-elect-resource-namespace="+ns)
	leaseFlag := "--lease=" + ns + "/cascade"
	waitAdmission(t, cs, gvr, "Gizmo", ns, "orphan")
	createCRWith(t, cs, gvr, "Gizmo", ns, "created") // stamped by admission
	stamped := map[string][]string{"plain": nil, "foreign": {keep}, "created": nil}
	for name, fins := range stamped {
		want := wantStamp(append(slices.Clone(fins), "orphan"), "Orphan")
		framework.Eventually(t, collectTimeout, name+": "+want, func() (bool, error) {
			return stampOf(getCR(t, cs, gvr, ns, name)) == want, nil
		})
	}
	if got, want := stampOf(getCR(t, cs, gvr, ns, "users-orphan")), wantStamp([]string{keep, "orphan"}, ""); got != want {
		t.Fatalf("users-orphan: %s, want %s (cascade never stamps next to an orphan finalizer)", got, want)
	}
	if err := c.Stop(collectTimeout); err != nil {
		t.Fatal(err)
	}

	// The dry run says what it would do and changes nothing.
	out, code := uninstall(t, "--dry-run", leaseFlag)
	if code != 0 {
		t.Fatalf("uninstall --dry-run: exit %d", code)
	}
	for _, want := range []string{
		"MutatingAdmissionPolicyBinding " + policy.AdmissionName + ": would be deleted",
		"MutatingAdmissionPolicy " + policy.AdmissionName + ": would be deleted",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q", want)
		}
	}
	row := regexp.MustCompile(`(?m)^\s+gizmos\.uninstall\.e2e\.cascade\.dev\s+3\s+3\s+3\s+0\s+0\s+0\s+0$`)
	if !row.MatchString(out) {
		t.Errorf("dry run output lacks the gizmos row: 3 stamped, 3 unstamped, 3 orphan finalizers")
	}
	for name, fins := range stamped {
		if got, want := stampOf(getCR(t, cs, gvr, ns, name)), wantStamp(append(slices.Clone(fins), "orphan"), "Orphan"); got != want {
			t.Errorf("after the dry run, %s: %s, want %s", name, got, want)
		}
	}
	if _, err := cs.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{}); err != nil {
		t.Errorf("after the dry run, the admission policy: %v", err)
	}

	out, code = uninstall(t, leaseFlag)
	if code != 0 {
		t.Fatalf("uninstall: exit %d", code)
	}
	for _, want := range []string{
		"MutatingAdmissionPolicyBinding " + policy.AdmissionName + ": deleted",
		"MutatingAdmissionPolicy " + policy.AdmissionName + ": deleted",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if !row.MatchString(out) {
		t.Errorf("output lacks the gizmos row: 3 stamped, 3 unstamped, 3 orphan finalizers")
	}
	adm := cs.Kube.AdmissionregistrationV1()
	if _, err := adm.MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the admission policy after uninstall: %v, want NotFound", err)
	}
	if _, err := adm.MutatingAdmissionPolicyBindings().Get(ctx, policy.AdmissionName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the admission binding after uninstall: %v, want NotFound", err)
	}
	for name, fins := range stamped {
		if got, want := stampOf(getCR(t, cs, gvr, ns, name)), wantStamp(fins, ""); got != want {
			t.Errorf("after uninstall, %s: %s, want %s", name, got, want)
		}
	}
	if got, want := stampOf(getCR(t, cs, gvr, ns, "users-orphan")), wantStamp([]string{keep, "orphan"}, ""); got != want {
		t.Errorf("after uninstall, users-orphan: %s, want %s (a user's own orphan finalizer)", got, want)
	}
	if got := cs.MustExistCM(t, ns, "users-cm").Finalizers; !slices.Equal(got, []string{"orphan", keep}) {
		t.Errorf("after uninstall, users-cm's finalizers: %q", got)
	}
	// Creates are no longer stamped once kube-apiserver's admission chain drops the policy.
	waitAdmission(t, cs, gvr, "Gizmo", ns)

	// Nothing is left: a second run finds nothing of the test's and changes nothing. (Objects
	// stamped by earlier tests' cascades were unstamped by the first run too, but those being
	// deleted are left, and listed again: uninstall reads the whole cluster.)
	out, code = uninstall(t, leaseFlag)
	if code != 0 || !strings.Contains(out, "MutatingAdmissionPolicy "+policy.AdmissionName+": none") {
		t.Errorf("second uninstall: exit %d", code)
	}
	if !strings.Contains(out, "Objects stamped by cascade's defaultPropagation (annotation "+policy.DefaultPropagationAnnotation+"): none") {
		rows := stampRow.FindAllStringSubmatch(out, -1)
		if len(rows) == 0 {
			t.Errorf("second uninstall says neither that no object is stamped nor which are")
		}
		for _, r := range rows {
			if r[1] == "gizmos.uninstall.e2e.cascade.dev" || r[3] != "0" || r[4] != "0" || r[5] != "0" {
				t.Errorf("second uninstall: %s stamped %s, unstamped %s, orphan removed %s, foregroundDeletion removed %s; want none of the test's and nothing changed",
					r[1], r[2], r[3], r[4], r[5])
			}
		}
	}
}

// stampRow is a row of uninstall's table of stamped objects: resource, stamped, unstamped,
// orphan and foregroundDeletion finalizers removed, being deleted, changed meanwhile, failed.
var stampRow = regexp.MustCompile(`(?m)^\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$`)
