//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// namespaceGoneWithin is how long a deleted namespace may take to go while cascade is down
// (issue 31.1): the namespace controller's own pace, with nothing of cascade's in its way.
const namespaceGoneWithin = 30 * time.Second

// TestNamespaceDeletionWithoutCascade (issue 31.1): nothing of cascade's default install makes
// the cluster's own deletions wait for cascade. On a control plane of its own with
// kube-controller-manager's namespace controller (no kubelet: no pod of cascade ever answers,
// as in a crash loop or with every replica killed), deploy/base is applied as installed, then
// scaled to zero as the uninstall order does; each time a namespace holding objects (an owner
// and its dependent among them) is deleted and is gone within 30 s.
//
// The control that the check can fail: with the opt-in APIService of
// deploy/components/aggregated-api registered and no cascade answering, a deleted namespace
// stays Terminating with NamespaceDeletionDiscoveryFailure, which is why it is opt-in; deleting
// the APIService (the first step of the uninstall order, docs/uninstall.md) lets it go.
func TestNamespaceDeletionWithoutCascade(t *testing.T) {
	// On a control plane of its own: runs beside the other such tests, once the tests on the
	// suite's control plane are done (t.Parallel), so that their waits overlap (CI's time).
	t.Parallel()
	ctx := context.Background()
	cp := framework.StartControlPlane(t, harness.Options{})
	if _, err := cp.StartKubeControllerManager("kcm-namespaces", harness.KCMOptions{Controllers: "namespace-controller"}); err != nil {
		t.Fatal(err)
	}
	cs := framework.ClientsFor(t, cp.RestConfig())
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(suite.CP.BinDir, "kubectl"), append([]string{"--kubeconfig", cp.KubeconfigPath}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(root, "deploy", "base")
	kubectl("apply", "-f", filepath.Join(base, "namespace.yaml"))
	kubectl("apply", "-k", base)
	if out := kubectl("get", "apiservices", "-o", "name"); strings.Contains(out, "cascade") {
		t.Fatalf("the default install registers an APIService of cascade's:\n%s", out)
	}

	// deleteNamespaceWithObjects creates namespace name with ConfigMaps, a Secret, an owner and
	// its dependent, deletes it, and returns when the API server has accepted the delete.
	deleteNamespaceWithObjects := func(name string) {
		t.Helper()
		cs.CreateNamespace(t, name)
		owner := cs.CreateCM(t, name, "owner")
		cs.CreateCM(t, name, "dependent", framework.RefTo("v1", "ConfigMap", owner.Name, owner.UID, true))
		cs.CreateCMs(t, name, "cm", 5)
		if _, err := cs.Kube.CoreV1().Secrets(name).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "secret"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	goneWithin := func(name, since string, d time.Duration) {
		t.Helper()
		start := time.Now()
		framework.Eventually(t, d, "namespace "+name+" gone", func() (bool, error) {
			ns, err := cs.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			return false, fmt.Errorf("%s, conditions %+v", ns.Status.Phase, ns.Status.Conditions)
		})
		t.Logf("namespace %s gone %s after %s", name, time.Since(start).Round(100*time.Millisecond), since)
	}

	// Installed, no pod of cascade answering (killed, crash-looping: none ever runs here).
	deleteNamespaceWithObjects("tenant-installed")
	goneWithin("tenant-installed", "its delete", namespaceGoneWithin)

	// Scaled to zero, as the uninstall order does first.
	kubectl("-n", "cascade-system", "scale", "deployment", "cascade", "--replicas=0")
	deleteNamespaceWithObjects("tenant-scaled-to-zero")
	goneWithin("tenant-scaled-to-zero", "its delete", namespaceGoneWithin)

	// The control: the opt-in APIService with no cascade behind it holds a deleted namespace.
	apiService := filepath.Join(root, "deploy", "components", "aggregated-api", "aggregated-api.yaml")
	kubectl("apply", "-f", apiService)
	framework.Eventually(t, 60*time.Second, "APIService "+aggregatedAPIService+" unavailable", func() (bool, error) {
		as, err := cs.Dyn.Resource(apiServiceGVR).Get(ctx, aggregatedAPIService, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Available" && m["status"] == "False" {
				return true, nil
			}
		}
		return false, nil
	})
	deleteNamespaceWithObjects("tenant-held")
	framework.Eventually(t, 2*time.Minute, "namespace tenant-held held by discovery of debug.cascade.dev", func() (bool, error) {
		ns, err := cs.Kube.CoreV1().Namespaces().Get(ctx, "tenant-held", metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("namespace tenant-held: %w (want it held Terminating)", err)
		}
		for _, c := range ns.Status.Conditions {
			if c.Type == corev1.NamespaceDeletionDiscoveryFailure && c.Status == corev1.ConditionTrue {
				if !strings.Contains(c.Message, "debug.cascade.dev") {
					return false, fmt.Errorf("discovery failure that does not name debug.cascade.dev: %s", c.Message)
				}
				return true, nil
			}
		}
		return false, nil
	})
	// The uninstall order's first step.
	kubectl("delete", "-f", apiService)
	goneWithin("tenant-held", "the APIService's delete", namespaceGoneWithin)
}
