//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	"github.com/cascade-gc/cascade/policy"
)

// deployed is deployBase's outcome, once per package.
var deployed struct {
	sync.Once
	err error
}

// adminKubectl runs bin/kubectl with the admin kubeconfig and returns its combined output.
func adminKubectl(args ...string) (string, error) {
	bin := filepath.Join(suite.CP.BinDir, "kubectl")
	out, err := exec.Command(bin, append([]string{"--kubeconfig", suite.CP.KubeconfigPath}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// deployBaseDir is deploy/base in the repository.
func deployBaseDir(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "deploy", "base")
}

// deployBase applies deploy/base (kustomize, through bin/kubectl) once for the package: its
// Namespace first, then a server-side dry run of the whole base (kube-apiserver validates every
// object as it would create it, with strict field validation, and warns where a pod template
// would not meet the namespace's Pod Security level: a warning fails too), then the base for
// real. It stays applied: no namespace controller runs here, so a deleted cascade-system would
// stay Terminating and refuse the objects of the next test that applies the base. The base
// registers no APIService (TestNamespaceDeletionWithoutCascade), so nothing of it fails
// discovery for later tests although no pod of its Deployment runs here.
func deployBase(t *testing.T) {
	t.Helper()
	base := deployBaseDir(t)
	deployed.Do(func() {
		if _, deployed.err = adminKubectl("apply", "-f", filepath.Join(base, "namespace.yaml")); deployed.err != nil {
			return
		}
		var out string
		if out, deployed.err = adminKubectl("apply", "--dry-run=server", "-k", base); deployed.err != nil {
			return
		}
		if strings.Contains(out, "Warning:") { // such as the namespace's Pod Security level
			deployed.err = fmt.Errorf("kubectl apply --dry-run=server -k deploy/base warns:\n%s", out)
			return
		}
		_, deployed.err = adminKubectl("apply", "-k", base)
	})
	if deployed.err != nil {
		t.Fatal(deployed.err)
	}
}

// serviceAccountToken returns a token of deploy/base's ServiceAccount (TokenRequest, as the
// kubelet asks for a pod's projected token).
func serviceAccountToken(t *testing.T, cs framework.Clients) string {
	t.Helper()
	tok, err := cs.Kube.CoreV1().ServiceAccounts("cascade-system").CreateToken(context.Background(), "cascade",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// TestDeployDryRun: `kubectl apply --dry-run=server -k deploy/base` passes (deployBase runs it
// before the base exists, so every object is validated as created; here again, as updated), and
// names every object of the base, with no warning from the server.
func TestDeployDryRun(t *testing.T) {
	deployBase(t)
	out, err := adminKubectl("apply", "--dry-run=server", "-k", deployBaseDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []string{
		"namespace/cascade-system", "serviceaccount/cascade", "clusterrole.rbac.authorization.k8s.io/cascade",
		"clusterrolebinding.rbac.authorization.k8s.io/cascade", "role.rbac.authorization.k8s.io/cascade-leader-election",
		"rolebinding.rbac.authorization.k8s.io/cascade-leader-election", "service/cascade-metrics",
		"deployment.apps/cascade", "poddisruptionbudget.policy/cascade",
		"configmap/cascade-policy", "role.rbac.authorization.k8s.io/cascade-policy", "rolebinding.rbac.authorization.k8s.io/cascade-policy",
		"clusterrole.rbac.authorization.k8s.io/cascade-metrics-reader", "clusterrole.rbac.authorization.k8s.io/cascade-debug-reader",
		"networkpolicy.networking.k8s.io/cascade",
		"role.rbac.authorization.k8s.io/cascade-explain-port-forward", "rolebinding.rbac.authorization.k8s.io/cascade-authentication-reader",
		"flowschema.flowcontrol.apiserver.k8s.io/cascade", "flowschema.flowcontrol.apiserver.k8s.io/cascade-leader-election",
		"flowschema.flowcontrol.apiserver.k8s.io/cascade-reviews",
	} {
		if !strings.Contains(out, obj+" ") {
			t.Errorf("server dry run does not name %s:\n%s", obj, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasSuffix(line, "(server dry run)") {
			t.Errorf("not a line of a server dry run: %q", line)
		}
	}
}

// TestDeployManifests applies deploy/base (kustomize, through bin/kubectl) to the control plane,
// then runs cascade as the cascade ServiceAccount with exactly that RBAC and leader election:
// it takes the Lease, collects garbage, and emits events; the RBAC lets it do nothing else.
func TestDeployManifests(t *testing.T) {
	cs := suite.Clients(t)
	deployBase(t)
	ctx := context.Background()
	tok := serviceAccountToken(t, cs)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := suite.CP.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", tok); err != nil {
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
		{"create", "admissionregistration.k8s.io", "mutatingadmissionpolicies", true},
		{"create", "admissionregistration.k8s.io", "mutatingadmissionpolicybindings", true},
		{"create", "admissionregistration.k8s.io", "validatingadmissionpolicies", false},
		{"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", false},
		// The reviews that guard the metrics port (secure serving).
		{"create", "authentication.k8s.io", "tokenreviews", true},
		{"create", "authorization.k8s.io", "subjectaccessreviews", true},
		{"create", "certificates.k8s.io", "certificatesigningrequests", false},
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
	c := suite.StartCascade(t, "--kubeconfig="+kc, "--leader-elect=true", "--leader-elect-resource-namespace=cascade-system",
		"--policy-configmap=cascade-system/cascade-policy", "--orphan-record-configmap=cascade-system/cascade-orphaned-owners")
	// The Lease's name is the one deploy/base's Role allows, which TestImage's replicas take too
	// (a holder killed without releasing it stays named until the Lease expires): the holder is
	// this cascade once it says it leads.
	framework.WaitForMetric(t, c, "cascade_leader", 1, 60*time.Second)
	framework.Eventually(t, 30*time.Second, "lease held", func() (bool, error) {
		l, err := cs.Kube.CoordinationV1().Leases("cascade-system").Get(ctx, "cascade", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	// The shipped policy ConfigMap is read with that RBAC (policy-rbac.yaml).
	framework.WaitForMetric(t, c, "cascade_policy_generation", 1, 30*time.Second)
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

	// An orphan deletion: the service account records the owner (orphan-record Role).
	orphaned := cs.CreateCM(t, ns, "orphaned-owner")
	cs.CreateCM(t, ns, "kept", framework.CMRef(orphaned))
	cs.DeleteCM(t, ns, "orphaned-owner", metav1.DeletePropagationOrphan)
	cs.WaitCMGone(t, ns, "orphaned-owner", collectTimeout)
	record, err := cs.Kube.CoreV1().ConfigMaps("cascade-system").Get(ctx, "cascade-orphaned-owners", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the orphan record: %v", err)
	}
	if _, ok := record.Data[string(orphaned.UID)]; !ok {
		t.Errorf("the orphan record does not hold the orphaned owner %s: %v", orphaned.UID, record.Data)
	}

	// A defaultPropagation rule in the shipped ConfigMap: the service account creates the
	// admission objects (server-side apply) and deletes them when the rule goes.
	cms := cs.Kube.CoreV1().ConfigMaps("cascade-system")
	shipped, err := cms.Get(ctx, "cascade-policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	maps := cs.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies()
	t.Cleanup(func() {
		_ = cs.Kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(ctx, policy.AdmissionName, metav1.DeleteOptions{})
		_ = maps.Delete(ctx, policy.AdmissionName, metav1.DeleteOptions{})
		// The shipped policy back, also when the test failed before it restored it: TestImage
		// runs its replicas on this ConfigMap.
		if cur, err := cms.Get(ctx, "cascade-policy", metav1.GetOptions{}); err == nil && cur.Data[policy.ConfigMapKey] != shipped.Data[policy.ConfigMapKey] {
			cur.Data = shipped.Data
			_, _ = cms.Update(ctx, cur, metav1.UpdateOptions{})
		}
	})
	withRule := shipped.DeepCopy()
	withRule.Data[policy.ConfigMapKey] = policyDoc("rules:\n- resource: gizmos.deploy.e2e.cascade.dev\n  defaultPropagation: Orphan\n")
	if _, err := cms.Update(ctx, withRule, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, collectTimeout, "the admission policy created by the service account", func() (bool, error) {
		p, err := maps.Get(ctx, policy.AdmissionName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, f := range p.ManagedFields {
			if f.Manager == "cascade" && f.Operation == metav1.ManagedFieldsOperationApply {
				return p.Labels[policy.ManagedByLabel] == policy.ManagedByValue, nil
			}
		}
		return false, nil
	})
	restored, err := cms.Get(ctx, "cascade-policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restored.Data = shipped.Data
	if _, err := cms.Update(ctx, restored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, "the admission policy, deleted by the service account", collectTimeout, func() error {
		_, err := maps.Get(ctx, policy.AdmissionName, metav1.GetOptions{})
		return err
	})
}
