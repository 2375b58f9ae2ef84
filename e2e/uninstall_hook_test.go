//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
	"github.com/cascade-gc/cascade/policy"
)

// TestHelmUninstallLeavesNothing (issue 31.3): on a control plane of its own, the chart is
// installed with a defaultPropagation rule (Orphan for ConfigMaps) and cascade runs as the
// chart's ServiceAccount with the Deployment's arguments (the suite has no kubelet: the test
// starts it, and stops it when the Deployment is scaled to zero, as the kubelet would); it
// creates the admission objects and stamps a ConfigMap. Then `helm uninstall` alone: its
// pre-delete hook Job (run by framework.HookJobs as a kubelet and the Job controller would)
// stops cascade and runs `cascade uninstall`. Afterwards nothing of cascade's is left: no
// admission object, no stamp (the ConfigMap keeps its own finalizer), no object of the release.
func TestHelmUninstallLeavesNothing(t *testing.T) {
	// On a control plane of its own: runs beside the other such tests, once the tests on the
	// suite's control plane are done (t.Parallel), so that their waits overlap (CI's time).
	t.Parallel()
	cp := framework.StartControlPlane(t, harness.Options{BinDir: suite.CP.BinDir})
	cs := framework.ClientsFor(t, cp.RestConfig())
	ctx := context.Background()
	const ns = "cascade-hook"
	chart := filepath.Join(deployDir(t), "chart")
	if out, err := helm(t, "install", "cascade", chart, "--kubeconfig", cp.KubeconfigPath, "-n", ns, "--create-namespace",
		"--set-json", `policy={"rules":[{"resource":"configmaps","defaultPropagation":"Orphan"}]}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	hooks := framework.RunHookJobs(t, cp, cs, suite.CascadeBin, ns)

	// cascade as the release's pod would run it: its ServiceAccount, the Deployment's arguments.
	dep, err := cs.Kube.AppsV1().Deployments(ns).Get(ctx, "cascade", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cs.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "cascade", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kc, "system:serviceaccount:"+ns+":cascade", tok.Status.Token); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kubeconfig=" + kc, "--leader-elect-resource-namespace=" + ns}
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if !strings.HasPrefix(a, "--metrics-bind-address=") && !strings.HasPrefix(a, "--health-probe-bind-address=") {
			args = append(args, a)
		}
	}
	c := framework.StartReady(t, cp, "cascade-hook", suite.CascadeBin, args...)
	var stopOnce sync.Once
	stopped := make(chan struct{})
	kubeletCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { // the kubelet: the Deployment scaled to zero stops the pod
		for kubeletCtx.Err() == nil {
			d, err := cs.Kube.AppsV1().Deployments(ns).Get(kubeletCtx, "cascade", metav1.GetOptions{})
			if err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
				stopOnce.Do(func() { _ = c.Stop(10 * time.Second); close(stopped) })
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	// cascade stamps: the admission policy, then a ConfigMap at creation.
	framework.Eventually(t, collectTimeout, "the admission policy", func() (bool, error) {
		p, err := cs.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{})
		return err == nil && policy.ManagedByCascade(p.Labels), nil
	})
	cs.CreateNamespace(t, "shop")
	var stamped *corev1.ConfigMap
	framework.Eventually(t, collectTimeout, "a new ConfigMap stamped", func() (bool, error) {
		name := "stamped-" + strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")
		cm, err := cs.Kube.CoreV1().ConfigMaps("shop").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{"example.com/keep"}}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		stamped = cm
		return slices.Contains(cm.Finalizers, "orphan") && cm.Annotations[policy.DefaultPropagationAnnotation] != "", nil
	})
	t.Cleanup(func() {
		_, _ = cs.Kube.CoreV1().ConfigMaps("shop").Patch(context.Background(), stamped.Name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})

	// helm uninstall, alone.
	if out, err := helm(t, "uninstall", "cascade", "--kubeconfig", cp.KubeconfigPath, "-n", ns, "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	select {
	case <-stopped:
	default:
		t.Error("helm uninstall finished without the Deployment scaled to zero (cascade still running)")
	}
	if code, ran := hooks.Ran("cascade-uninstall"); !ran || code != 0 {
		t.Fatalf("the pre-delete hook cascade-uninstall: ran %v, exit %d; want it run, exit 0", ran, code)
	}
	if _, err := cs.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the admission policy after helm uninstall: %v, want not found", err)
	}
	if _, err := cs.Kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, policy.AdmissionName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the admission binding after helm uninstall: %v, want not found", err)
	}
	cm := cs.MustExistCM(t, "shop", stamped.Name)
	if !slices.Equal(cm.Finalizers, []string{"example.com/keep"}) || cm.Annotations[policy.DefaultPropagationAnnotation] != "" {
		t.Errorf("the stamped ConfigMap after helm uninstall: finalizers %q, annotations %v; want only its own finalizer, no stamp", cm.Finalizers, cm.Annotations)
	}
	for _, what := range []struct {
		kind string
		get  func() error
	}{
		{"Deployment cascade", func() error {
			_, err := cs.Kube.AppsV1().Deployments(ns).Get(ctx, "cascade", metav1.GetOptions{})
			return err
		}},
		{"ClusterRole cascade", func() error {
			_, err := cs.Kube.RbacV1().ClusterRoles().Get(ctx, "cascade", metav1.GetOptions{})
			return err
		}},
		{"FlowSchema cascade", func() error {
			_, err := cs.Kube.FlowcontrolV1().FlowSchemas().Get(ctx, "cascade", metav1.GetOptions{})
			return err
		}},
		{"Job cascade-uninstall", func() error {
			_, err := cs.Kube.BatchV1().Jobs(ns).Get(ctx, "cascade-uninstall", metav1.GetOptions{})
			return err
		}},
	} {
		if err := what.get(); !apierrors.IsNotFound(err) {
			t.Errorf("%s after helm uninstall: %v, want not found", what.kind, err)
		}
	}
}
