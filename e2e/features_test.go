//go:build e2e

package e2e

// Feature levels (internal/features, docs/compatibility.md): cascade uses the best level of each
// version-dependent feature the API server offers, and shows which: a log line,
// cascade_feature_in_use{feature,level} and /readyz.

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
	"github.com/cascade-gc/cascade/policy"
)

// featureMetric is the selector of cascade_feature_in_use for feature and level.
func featureMetric(feature, level string) string {
	return fmt.Sprintf(`cascade_feature_in_use{feature=%q,level=%q}`, feature, level)
}

// wantLevels checks that the gauge is 1 for the levels in use and 0 for the other levels of
// the feature.
func wantLevels(t *testing.T, c *harness.Cascade, feature string, all []string, inUse ...string) {
	t.Helper()
	for _, l := range all {
		want := 0.0
		for _, u := range inUse {
			if u == l {
				want = 1
			}
		}
		if got := framework.MetricValue(t, c, featureMetric(feature, l)); got != want {
			t.Errorf("%s = %v, want %v", featureMetric(feature, l), got, want)
		}
	}
}

var (
	admissionLevels = []string{"v1", "v1beta1", "none"}
	listLevels      = []string{"watch_list", "paged"}
)

// expectedAdmissionLevel is what the suite's server offers, told from its version and a direct
// read (not from cascade's own detection): v1 from Kubernetes 1.36, else v1beta1 where it was
// turned on, else none. The version matrix runs this test on 1.34 and 1.35 too.
func expectedAdmissionLevel(t *testing.T, cs framework.Clients) string {
	t.Helper()
	v, err := cs.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	minor, err := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	if err != nil {
		t.Fatalf("server minor version %q: %v", v.Minor, err)
	}
	if minor >= 36 {
		return "v1"
	}
	if _, err := cs.Kube.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().List(context.Background(), metav1.ListOptions{Limit: 1}); err == nil {
		return "v1beta1"
	}
	return "none"
}

// TestFeatureLevelsShown: on the suite's server (Kubernetes 1.36.3 by default) cascade uses the
// admission policy at v1 and watch-lists, says so in its log, in cascade_feature_in_use (1 for
// those levels, 0 for the others) and on /readyz, and the admission objects work at that level.
func TestFeatureLevelsShown(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "feature-levels.e2e.cascade.dev", "Gizmo", "Namespaced")
	want := expectedAdmissionLevel(t, cs)
	c := startWithDefaults(t, cs, ns, defaultRule(gvr, "Orphan", false))
	if want != "none" {
		waitAdmission(t, cs, gvr, "Gizmo", ns, "orphan")
	}
	wantLevels(t, c, "admission_policy", admissionLevels, want)
	wantLevels(t, c, "list", listLevels, "watch_list")
	code, body := readyz(t, c.HealthURL)
	if wantLine := "features in use: admission_policy=" + want + " list=watch_list\n"; code != 200 || !strings.Contains(body, wantLine) {
		t.Errorf("/readyz = %d %q, want 200 with %q", code, body, wantLine)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, line := range []string{
		`"Feature level chosen" feature="admission_policy" level="` + want + `"`,
		`feature="list" level="watch_list"`, // after the resource whose list chose it
	} {
		if err := c.WaitForLine(ctx, line); err != nil {
			t.Error(err)
		}
	}
	if want == "v1" {
		p, err := cs.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(context.Background(), policy.AdmissionName, metav1.GetOptions{})
		if err != nil || !policy.ManagedByCascade(p.Labels) {
			t.Errorf("the admission policy at v1: %v %v", p, err)
		}
	}
}

// TestFeatureLevelsFallBackAndFollowAnUpgrade: on a server of its own that serves no
// MutatingAdmissionPolicy (v1 turned off by --runtime-config, and its admission plugin, as 1.34
// and 1.35 are by default) and refuses watch-lists (--feature-gates=WatchList=false), cascade runs at level none with
// paged lists and shows it; the stamping pass alone stamps an owner created meanwhile (not at
// its creation). Then the server is restarted with v1 on (an upgrade): within a discovery round
// the level is v1, the log says it changed, the admission objects are written at v1 and creates
// are stamped at creation again. `cascade uninstall` then deletes them at v1.
func TestFeatureLevelsFallBackAndFollowAnUpgrade(t *testing.T) {
	// On a control plane of its own: runs beside the other such tests, once the tests on the
	// suite's control plane are done (t.Parallel), so that their waits overlap (CI's time).
	t.Parallel()
	ctx := context.Background()
	off := []string{
		"--runtime-config=admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false",
		// Without its resources the admission plugin never syncs, and kube-apiserver never
		// becomes ready: it goes too, as on a server whose feature gate is off.
		"--disable-admission-plugins=MutatingAdmissionPolicy",
		"--feature-gates=WatchList=false",
	}
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	cp, err := harness.Start(startCtx, harness.Options{ExtraAPIServerArgs: off})
	cancel()
	if err != nil {
		t.Fatalf("start a control plane without admission policies nor watch-lists: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	kube, err := kubernetes.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	cs := framework.Clients{Kube: kube, Dyn: dyn}
	if got := expectedAdmissionLevel(t, cs); got != "none" && got != "v1" {
		t.Fatalf("the server offers admission level %q", got)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("MutatingAdmissionPolicy v1 still served with %q: %v", off[0], err)
	}

	ns := cs.NewNamespace(t)
	gvr := createCRD(t, cs, "feature-fallback.e2e.cascade.dev", "Gizmo", "Namespaced")
	writePolicy(t, cs, ns, defaultRule(gvr, "Orphan", false))
	const period = 3 * time.Second
	c := framework.StartReady(t, cp, "cascade-feature-levels", suite.CascadeBin,
		"--policy-configmap="+ns+"/"+policyName, "--discovery-period=2s", "--default-propagation-period="+period.String())

	framework.WaitForMetric(t, c, featureMetric("admission_policy", "none"), 1, 30*time.Second)
	wantLevels(t, c, "admission_policy", admissionLevels, "none")
	wantLevels(t, c, "list", listLevels, "paged")
	if code, body := readyz(t, c.HealthURL); code != 200 || !strings.Contains(body, "features in use: admission_policy=none list=paged\n") {
		t.Errorf("/readyz = %d %q, want the levels none and paged", code, body)
	}
	lineCtx, cancelLine := context.WithTimeout(ctx, 10*time.Second)
	defer cancelLine()
	if err := c.WaitForLine(lineCtx, `"Feature level chosen" feature="admission_policy" level="none"`); err != nil {
		t.Error(err)
	}
	if err := c.WaitForLine(lineCtx, `feature="list" level="paged"`); err != nil {
		t.Error(err)
	}

	// The pass alone: not stamped at creation, stamped within about a period.
	owner := createCR(t, cs, gvr, "Gizmo", ns, "before-upgrade")
	if got, want := stampOf(owner), wantStamp(nil, ""); got != want {
		t.Fatalf("created with no admission policy served: %s, want %s", got, want)
	}
	framework.Eventually(t, collectTimeout, "the pass stamps the owner created meanwhile", func() (bool, error) {
		return stampOf(getCR(t, cs, gvr, ns, "before-upgrade")) == wantStamp([]string{"orphan"}, "Orphan"), nil
	})

	// The upgrade: v1 and watch-lists served.
	restartCtx, cancelRestart := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelRestart()
	if err := cp.RestartAPIServerWith(restartCtx, syscall.SIGTERM, nil); err != nil {
		t.Fatal(err)
	}
	framework.WaitForMetric(t, c, featureMetric("admission_policy", "v1"), 1, collectTimeout)
	wantLevels(t, c, "admission_policy", admissionLevels, "v1")
	changeCtx, cancelChange := context.WithTimeout(ctx, 10*time.Second)
	defer cancelChange()
	if err := c.WaitForLine(changeCtx, `"Feature level changed" feature="admission_policy" level="v1"`); err != nil {
		t.Error(err)
	}
	waitAdmission(t, cs, gvr, "Gizmo", ns, "orphan")
	if got, want := stampOf(createCR(t, cs, gvr, "Gizmo", ns, "after-upgrade")), wantStamp([]string{"orphan"}, "Orphan"); got != want {
		t.Errorf("created after the upgrade: %s, want %s (stamped at creation)", got, want)
	}
	framework.WaitForMetric(t, c, "cascade_default_propagation_admission_synced", 1, collectTimeout)
	_, body := readyz(t, c.HealthURL)
	if !strings.Contains(body, "admission_policy=v1 ") {
		t.Errorf("/readyz after the upgrade: %q", body)
	}
	// Lists change level at their next relist only (a watch resumes where it was): say what it is.
	t.Logf("/readyz after the upgrade: %q", body)

	// Uninstall finds and deletes them at v1.
	if err := c.Stop(10 * time.Second); err != nil {
		t.Logf("stop cascade: %v", err)
	}
	out, err := exec.Command(suite.CascadeBin, "uninstall", "--kubeconfig="+cp.KubeconfigPath, "--lease=").CombinedOutput()
	if err != nil {
		t.Fatalf("cascade uninstall: %v\n%s", err, out)
	}
	for _, want := range []string{
		"MutatingAdmissionPolicyBinding " + policy.AdmissionName + ": deleted\n",
		"MutatingAdmissionPolicy " + policy.AdmissionName + ": deleted\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("uninstall's report lacks %q:\n%s", want, out)
		}
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the admission policy after uninstall: %v", err)
	}
}
