package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ClusterAdminKubeconfig gives cascade an identity of its own, as in a cluster: the
// ServiceAccount namespace/name (the namespace must exist), bound to cluster-admin by the
// ClusterRoleBinding binding, and a kubeconfig at cp.Dir/cascade.kubeconfig with a token of it
// valid for ttl (TokenRequest). Tests about what cascade chooses to write give it every right,
// so that RBAC hides nothing; the API server's audit log then names it as that ServiceAccount.
func (cp *ControlPlane) ClusterAdminKubeconfig(ctx context.Context, kube kubernetes.Interface, namespace, name, binding string, ttl time.Duration) (string, error) {
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("ServiceAccount %s/%s: %w", namespace, name, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("ClusterRoleBinding %s: %w", binding, err)
	}
	exp := int64(ttl / time.Second)
	tok, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", namespace, name, err)
	}
	kc := filepath.Join(cp.Dir, "cascade.kubeconfig")
	if err := cp.WriteKubeconfig(kc, name, tok.Status.Token); err != nil {
		return "", err
	}
	return kc, nil
}
