//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// TestDeployManifests applies deploy/base (kustomize, through bin/kubectl) to the control plane,
// then runs cascade as the cascade ServiceAccount with exactly that RBAC and leader election:
// it takes the Lease, collects garbage, and emits events; the RBAC lets it do nothing else.
func TestDeployManifests(t *testing.T) {
	cs := suite.Clients(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(suite.CP.BinDir, "kubectl")
	out, err := exec.Command(kubectl, "--kubeconfig", suite.CP.KubeconfigPath, "apply", "--server-side", "-k", filepath.Join(root, "deploy", "base")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k deploy/base: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command(kubectl, "--kubeconfig", suite.CP.KubeconfigPath, "delete", "--wait=false", "-k", filepath.Join(root, "deploy", "base")).Run()
	})
	ctx := context.Background()
	tok, err := cs.Kube.CoreV1().ServiceAccounts("cascade-system").CreateToken(ctx, "cascade",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := suite.CP.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", tok.Status.Token); err != nil {
		t.Fatal(err)
	}

	// The RBAC is narrow: the collector can delete and patch, but not create or update.
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		verb, group, resource string
		allowed               bool
	}{
		{"delete", "", "configmaps", true},
		{"patch", "apps", "deployments", true},
		{"watch", "example.com", "anything", true},
		{"create", "", "configmaps", false},
		{"update", "", "secrets", false},
		{"create", "", "pods", false},
	} {
		r, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: tc.verb, Group: tc.group, Resource: tc.resource, Namespace: "default",
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != tc.allowed {
			t.Errorf("service account may %s %s.%s: %t, want %t", tc.verb, tc.resource, tc.group, r.Status.Allowed, tc.allowed)
		}
	}

	ns := cs.NewNamespace(t)
	suite.StartCascade(t, "--kubeconfig="+kc, "--leader-elect=true", "--leader-elect-resource-namespace=cascade-system")
	framework.Eventually(t, 30*time.Second, "lease held", func() (bool, error) {
		l, err := cs.Kube.CoordinationV1().Leases("cascade-system").Get(ctx, "cascade", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	owner := cs.CreateCM(t, ns, "owner")
	cs.CreateCMs(t, ns, "dep", 10, framework.CMRef(owner))
	other := cs.CreateCM(t, cs.NewNamespace(t), "elsewhere")
	bad := cs.CreateCM(t, ns, "bad", framework.CMRef(other)) // cross-namespace: needs events create
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationBackground)
	cs.WaitCMCount(t, ns, "dep-", 0, collectTimeout)
	cs.WaitCMGone(t, ns, "bad", collectTimeout)
	framework.Eventually(t, 30*time.Second, "event written by the service account", func() (bool, error) {
		evs, err := cs.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=OwnerRefInvalidNamespace"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.UID == bad.UID && e.Type == corev1.EventTypeWarning {
				return true, nil
			}
		}
		return false, nil
	})
}
