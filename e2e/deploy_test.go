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

	"github.com/cascade-gc/cascade/e2e/harness"
)

// TestDeployManifests applies deploy/base (kustomize, through bin/kubectl) to the control plane,
// then runs cascade as the cascade ServiceAccount with exactly that RBAC and leader election:
// it takes the Lease, collects garbage, and emits events; the RBAC lets it do nothing else.
func TestDeployManifests(t *testing.T) {
	cs := newClients(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(cp.BinDir, "kubectl")
	out, err := exec.Command(kubectl, "--kubeconfig", cp.KubeconfigPath, "apply", "--server-side", "-k", filepath.Join(root, "deploy", "base")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k deploy/base: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command(kubectl, "--kubeconfig", cp.KubeconfigPath, "delete", "--wait=false", "-k", filepath.Join(root, "deploy", "base")).Run()
	})
	ctx := context.Background()
	tok, err := cs.kube.CoreV1().ServiceAccounts("cascade-system").CreateToken(ctx, "cascade",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", tok.Status.Token); err != nil {
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

	ns := newNamespace(t, cs)
	startCascade(t, "--kubeconfig="+kc, "--leader-elect=true", "--leader-elect-resource-namespace=cascade-system")
	eventually(t, 30*time.Second, "lease held", func() (bool, error) {
		l, err := cs.kube.CoordinationV1().Leases("cascade-system").Get(ctx, "cascade", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	owner := createCM(t, cs, ns, "owner")
	createCMs(t, cs, ns, "dep", 10, cmRef(owner))
	other := createCM(t, cs, newNamespace(t, cs), "elsewhere")
	bad := createCM(t, cs, ns, "bad", cmRef(other)) // cross-namespace: needs events create
	deleteCM(t, cs, ns, "owner", metav1.DeletePropagationBackground)
	waitCMCount(t, cs, ns, "dep-", 0, collectTimeout)
	waitCMGone(t, cs, ns, "bad", collectTimeout)
	eventually(t, 30*time.Second, "event written by the service account", func() (bool, error) {
		evs, err := cs.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=OwnerRefInvalidNamespace"})
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
