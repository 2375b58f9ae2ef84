//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// aggregatedAPIService is the APIService of cascade's aggregated API (the opt-in component
// deploy/components/aggregated-api, the chart's apiService.create).
const aggregatedAPIService = "v1alpha1.debug.cascade.dev"

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// hostIP is an IPv4 address of this host that is not loopback (an EndpointSlice may not name
// one, and kube-apiserver does not proxy to one) and not link-local; "" when there is none.
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

// applyAggregatedAPI applies the opt-in component deploy/components/aggregated-api (cascade's
// APIService), and deletes it when the test ends: no later test's discovery may depend on a
// cascade that is gone.
func applyAggregatedAPI(t *testing.T) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(root, "deploy", "components", "aggregated-api", "aggregated-api.yaml")
	if _, err := adminKubectl("apply", "-f", f); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adminKubectl("delete", "--ignore-not-found", "-f", f) })
}

// explainRun runs the cascade binary's explain with args and returns its combined output and
// exit code.
func explainRun(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(suite.CascadeBin, append([]string{"explain"}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

// TestExplainAggregatedAPI (issue 23.2): `cascade explain` with nothing but a user's kubeconfig
// reaches a cascade with secure serving on through the API server, as an aggregated API:
// the opt-in APIService v1alpha1.debug.cascade.dev (deploy/components/aggregated-api), deploy/base's Service cascade-metrics and an
// EndpointSlice naming the address cascade listens on (a non-loopback address of this host;
// kube-apiserver runs with --enable-aggregator-routing and a front-proxy certificate,
// harness.Start). cascade runs as deploy/base's ServiceAccount, so deploy/base's RBAC is what lets
// it read the front-proxy configuration and send its reviews.
//   - a ServiceAccount bound only to cascade-debug-reader gets the explanation (text, yaml,
//     json; kubectl's resource names), and cascade's log names that user: it saw who asked;
//   - a ServiceAccount without the role is refused by the API server (403, exit 1);
//   - straight to cascade's port, the forwarded user's headers without the API server's
//     front-proxy certificate (none, or one the front-proxy CA did not sign) are refused: 401;
//     with that certificate, cascade authorizes the user the headers name (403 for the user
//     without the role, 200 for the one with it) and serves discovery to both.
func TestExplainAggregatedAPI(t *testing.T) {
	ip := hostIP()
	if ip == "" {
		t.Skip("no non-loopback IPv4 address on this host: an EndpointSlice may not name loopback")
	}
	cs := suite.Clients(t)
	deployBase(t)
	ctx := context.Background()
	ns := cs.NewNamespace(t)

	// The users: explainer bound to cascade-debug-reader, nobody to nothing.
	kubeconfigs, users := map[string]string{}, map[string]string{}
	for _, name := range []string{"explainer", "nobody"} {
		if _, err := cs.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tok, err := cs.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		users[name] = "system:serviceaccount:" + ns + ":" + name
		kubeconfigs[name] = filepath.Join(t.TempDir(), name+".kubeconfig")
		if err := suite.CP.WriteKubeconfig(kubeconfigs[name], users[name], tok.Status.Token); err != nil {
			t.Fatal(err)
		}
	}
	binding := "e2e-aggexplain-" + ns
	if _, err := cs.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cascade-debug-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "explainer"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding, metav1.DeleteOptions{})
	})
	// The binding in force in the API server's RBAC authorizer before anyone asks, so that no
	// denial is cached (by cascade) before it is.
	framework.Eventually(t, 30*time.Second, "explainer may get explanations", func() (bool, error) {
		sar, err := cs.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: users["explainer"], Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Group: "debug.cascade.dev", Version: "v1alpha1", Resource: "explanations", Namespace: ns, Name: "x"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, err
	})

	// cascade: deploy/base's ServiceAccount, secure serving (the default) on this host's address.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := suite.CP.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", serviceAccountToken(t, cs)); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, ip)
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	c := suite.StartSecureCascade(t, "--kubeconfig="+kc, "--dry-run", "--orphan-record-configmap=", "--metrics-bind-address="+addr)

	slice := "cascade-metrics-e2e"
	createMetricsEndpoint(ctx, t, cs.Kube, slice, ip, port)
	t.Cleanup(func() {
		_ = cs.Kube.DiscoveryV1().EndpointSlices("cascade-system").Delete(context.Background(), slice, metav1.DeleteOptions{})
	})
	applyAggregatedAPI(t)
	waitAPIServiceAvailable(t, cs.Dyn, aggregatedAPIService)

	cs.CreateCM(t, ns, "x")
	explainer := func(args ...string) (string, int) {
		return explainRun(t, append([]string{"--kubeconfig=" + kubeconfigs["explainer"], "-n", ns}, args...)...)
	}
	framework.Eventually(t, collectTimeout, "cascade explain cm/x through the API server", func() (bool, error) {
		out, code := explainer("cm/x")
		if code != 0 || !strings.HasPrefix(out, "ConfigMap "+ns+"/x (") {
			return false, fmt.Errorf("exit %d: %s", code, out)
		}
		return true, nil
	})
	for what, format := range map[string]string{"configmap/x": "yaml", "configmaps/x": "json"} {
		out, code := explainer(what, "-o", format)
		t.Logf("explain %s -o %s as explainer → exit %d %.100q", what, format, code, out)
		if code != 0 || !strings.Contains(out, `"x"`) && !strings.Contains(out, "name: x\n") {
			t.Errorf("explain %s -o %s: exit %d\n%s", what, format, code, out)
		}
	}
	if out, code := explainer("deployment.apps/none"); code != 1 || !strings.Contains(out, "not in the graph") {
		t.Errorf("explain deployment.apps/none: exit %d, want 1 and not in the graph\n%s", code, out)
	}
	// cascade saw who asked: the user the API server forwarded.
	if log := c.Tail(200); !strings.Contains(log, "Explained an object") || !strings.Contains(log, `user="`+users["explainer"]+`"`) {
		t.Errorf("cascade's log does not name %s as the one who asked:\n%s", users["explainer"], log)
	}
	out, code := explainRun(t, "--kubeconfig="+kubeconfigs["nobody"], "-n", ns, "cm/x")
	t.Logf("explain cm/x as nobody → exit %d %q", code, out)
	if code != 1 || !strings.Contains(out, "403 Forbidden") || !strings.Contains(out, `User "`+users["nobody"]+`" cannot get resource "explanations"`) {
		t.Errorf("a user without the role: exit %d, want 1 and the API server's 403 naming the user\n%s", code, out)
	}

	// Straight to cascade's port, pretending to be the API server.
	proxyCert, err := tls.LoadX509KeyPair(suite.CP.ProxyClientCertFile, suite.CP.ProxyClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	forgedPEM, forgedKeyPEM, err := certutil.GenerateSelfSignedCertKey(harness.FrontProxyClientName, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := tls.X509KeyPair(forgedPEM, forgedKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	explanation := "/apis/debug.cascade.dev/v1alpha1/namespaces/" + ns + "/explanations/x?resource=configmaps"
	discovery := "/apis/debug.cascade.dev/v1alpha1"
	for _, tt := range []struct {
		who, path string
		cert      *tls.Certificate
		user      string
		want      int
		body      string
	}{
		{"no certificate", explanation, nil, users["explainer"], http.StatusUnauthorized, "Unauthorized"},
		{"a certificate the front-proxy CA did not sign", explanation, &forged, users["explainer"], http.StatusUnauthorized, "Unauthorized"},
		{"a certificate the front-proxy CA did not sign", discovery, &forged, users["explainer"], http.StatusUnauthorized, "Unauthorized"},
		{"the front proxy", explanation, &proxyCert, users["nobody"], http.StatusForbidden, `cannot get explanations.debug.cascade.dev "x" in namespace "` + ns + `"`},
		{"the front proxy", discovery, &proxyCert, users["nobody"], http.StatusOK, `"explanations"`},
		{"the front proxy", explanation, &proxyCert, users["explainer"], http.StatusOK, `"name": "x"`},
	} {
		tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // cascade's self-signed certificate
		if tt.cert != nil {
			tlsConfig.Certificates = []tls.Certificate{*tt.cert}
		}
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Remote-User", tt.user)
		req.Header.Add("X-Remote-Group", "system:serviceaccounts")
		req.Header.Add("X-Remote-Group", "system:authenticated")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Logf("%-44s as %s GET %s → %d %.100q", tt.who, tt.user, tt.path, resp.StatusCode, b)
		if resp.StatusCode != tt.want || !strings.Contains(string(b), tt.body) {
			t.Errorf("%s, X-Remote-User %s: GET %s = %d %q, want %d and %q", tt.who, tt.user, tt.path, resp.StatusCode, b, tt.want, tt.body)
		}
	}
}

// createMetricsEndpoint gives the Service cascade-metrics (deploy/base) one endpoint: cascade at
// ip:port, on the port the Service targets (named metrics), as the EndpointSlice named name. No
// kubelet runs here, so no Pod backs the Service; the aggregated API reaches cascade through it.
func createMetricsEndpoint(ctx context.Context, t *testing.T, kube kubernetes.Interface, name, ip string, port int) {
	t.Helper()
	ready, portName, proto, p32 := true, "metrics", corev1.ProtocolTCP, int32(port)
	if _, err := kube.DiscoveryV1().EndpointSlices("cascade-system").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "cascade-metrics"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &p32, Protocol: &proto}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
