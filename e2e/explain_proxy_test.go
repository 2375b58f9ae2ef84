//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// hostIP is an IPv4 address of this host that is not loopback (kube-apiserver refuses to proxy
// to loopback addresses) and not link-local; "" when there is none.
func hostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// freePort is a free TCP port on ip.
func freePort(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// userKubeconfig writes a kubeconfig for a new ServiceAccount of ns (a token from the
// TokenRequest API), bound to role when it is not nil, and returns its path.
func userKubeconfig(t *testing.T, cs framework.Clients, ns, name string, role *rbacv1.Role) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if role != nil {
		if _, err := cs.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		}
		if _, err := cs.Kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := cs.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := suite.CP.WriteKubeconfig(path, name, tok.Status.Token); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExplainThroughTheAPIServer (issue 23.2): `cascade explain` with a user's kubeconfig and no
// --url reaches cascade through kube-apiserver's service proxy, as that user: with a Role that
// grants only get on services/proxy for the metrics Service's port (resource name
// "cascade-metrics:metrics": kube-apiserver authorizes the proxy target, port included), the explanation comes back
// (text, yaml), with kubectl's resource names; without it, 403. cascade listens on a
// non-loopback address of this host (kube-apiserver does not proxy to loopback), behind a
// selector-less Service whose Endpoints and EndpointSlice point at it through a Pod object.
func TestExplainThroughTheAPIServer(t *testing.T) {
	ip := hostIP()
	if ip == "" {
		t.Skip("no non-loopback IPv4 address on this host: kube-apiserver proxies only to those")
	}
	cs := suite.Clients(t)
	ctx := context.Background()
	ns := cs.NewNamespace(t)
	port := freePort(t, ip)
	suite.StartCascade(t, "--metrics-bind-address="+net.JoinHostPort(ip, strconv.Itoa(port)))

	const svc = "cascade-metrics"
	p32 := int32(port)
	name, proto := "metrics", corev1.ProtocolTCP
	if _, err := cs.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: name, Port: 8080, TargetPort: intstr.FromInt32(p32)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kube-apiserver's service proxy goes only to Endpoints addresses that are pods (a TargetRef
	// to a Pod whose status has the IP): a Pod object stands for cascade's (never scheduled: no
	// kubelet here; its status written as a kubelet would).
	if _, err := cs.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := cs.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cascade-0"},
		Spec:       corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: "cascade", Image: "cascade"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if _, err := cs.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.Kube.CoreV1().Pods(ns).Delete(context.Background(), "cascade-0", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	target := &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "cascade-0", UID: pod.UID}
	//nolint:staticcheck // v1 Endpoints: what kube-apiserver's service proxy reads
	if _, err := cs.Kube.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: svc},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: ip, TargetRef: target}}, Ports: []corev1.EndpointPort{{Name: name, Port: p32}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := true
	if _, err := cs.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, TargetRef: target}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &p32, Protocol: &proto}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	allowed := userKubeconfig(t, cs, ns, "explainer", &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "cascade-explain"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services/proxy"}, ResourceNames: []string{svc + ":" + name}, Verbs: []string{"get"}}},
	})
	denied := userKubeconfig(t, cs, ns, "nobody", nil)
	cs.CreateCM(t, ns, "x")

	run := func(kubeconfig string, args ...string) (string, int) {
		cmd := exec.Command(suite.CascadeBin, append([]string{"explain", "--kubeconfig=" + kubeconfig, "--service=" + ns + "/" + svc, "-n", ns}, args...)...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	framework.Eventually(t, collectTimeout, "cascade explain cm/x through the API server", func() (bool, error) {
		out, code := run(allowed, "cm/x")
		if code != 0 || !strings.HasPrefix(out, "ConfigMap "+ns+"/x (") {
			return false, fmt.Errorf("exit %d: %s", code, out)
		}
		return true, nil
	})
	for _, what := range []string{"configmap/x", "configmaps/x"} {
		if out, code := run(allowed, what, "-o", "yaml"); code != 0 || !strings.Contains(out, "name: x\n") || !strings.Contains(out, "state: ") {
			t.Errorf("explain %s -o yaml: exit %d\n%s", what, code, out)
		}
	}
	if out, code := run(allowed, "deployment.apps/none"); code != 1 || !strings.Contains(out, "not in the graph") {
		t.Errorf("explain deployment.apps/none: exit %d, want 1 and not in the graph\n%s", code, out)
	}
	if out, code := run(denied, "cm/x"); code != 1 || !strings.Contains(out, "403") {
		t.Errorf("a user without the role: exit %d, want 1 and 403\n%s", code, out)
	}
}
