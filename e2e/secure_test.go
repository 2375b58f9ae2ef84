//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// scrapeAs sends GET path to cascade's metrics address with token (none when empty) and
// returns the status code and body.
func scrapeAs(t *testing.T, client *http.Client, base, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// reader is a ServiceAccount of the test, bound (or not) to one of deploy/base's reader
// ClusterRoles, with a token from the TokenRequest API.
type reader struct {
	name, clusterRole, token string
}

// TestSecureServing (issue 23.1): cascade runs as deploy/base's ServiceAccount with its
// default serving, a certificate from files and profiling on. Its metrics port speaks HTTPS
// only, with that certificate; with no token every path answers 401, a ServiceAccount token
// whose user has no role 403, cascade-metrics-reader's user gets /metrics (200) and nothing of
// /debug (403), cascade-debug-reader's gets /debug/graph and /debug/pprof (200) but not
// /metrics (403). Each review is asked by cascade's ServiceAccount, so deploy/base's RBAC for
// TokenReview and SubjectAccessReview is what lets it. The health port stays plain HTTP and
// answers without credentials.
func TestSecureServing(t *testing.T) {
	cs := suite.Clients(t)
	deployBase(t)
	ctx := context.Background()

	// cascade's credentials: deploy/base's ServiceAccount (it sends the reviews).
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := suite.CP.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", serviceAccountToken(t, cs)); err != nil {
		t.Fatal(err)
	}
	// The serving certificate from files, signed by a CA only this test trusts.
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("cascade-metrics.cascade-system.svc", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)

	// The readers, bound before cascade starts asking about them.
	ns := cs.NewNamespace(t)
	readers := map[string]*reader{
		"none":    {name: "no-role"},
		"metrics": {name: "prometheus", clusterRole: "cascade-metrics-reader"},
		"debug":   {name: "operator", clusterRole: "cascade-debug-reader"},
	}
	for _, r := range readers {
		if _, err := cs.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: r.name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if r.clusterRole != "" {
			binding := "e2e-secure-" + ns + "-" + r.name
			if _, err := cs.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: binding},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.clusterRole},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: r.name}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, binding, metav1.DeleteOptions{}) })
		}
		tok, err := cs.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, r.name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.token = tok.Status.Token
	}
	// The API server's RBAC authorizer sees a new binding through its informer: wait until it
	// answers as cascade will ask, so that no denial is cached before the binding is in force.
	for path, r := range map[string]*reader{"/metrics": readers["metrics"], "/debug/graph": readers["debug"]} {
		user := "system:serviceaccount:" + ns + ":" + r.name
		framework.Eventually(t, 30*time.Second, user+" may get "+path, func() (bool, error) {
			sar, err := cs.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
			}}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed, err
		})
	}

	c := suite.StartSecureCascade(t, "--kubeconfig="+kc, "--dry-run", "--enable-profiling",
		"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile, "--orphan-record-configmap=")
	base := strings.TrimSuffix(c.MetricsURL, "/metrics")
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("metrics address %s, want https", base)
	}
	// A client that trusts only the files' CA: the handshake proves the files are served.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}

	// An object for /debug/graph, once the graph has it.
	cm := cs.CreateCM(t, ns, "explained")
	graph := "/debug/graph?uid=" + string(cm.UID)
	framework.Eventually(t, 30*time.Second, "the ConfigMap in cascade's graph", func() (bool, error) {
		code, body := scrapeAs(t, client, base, graph, readers["debug"].token)
		return code == http.StatusOK && strings.Contains(body, `"state": "observed"`), nil
	})

	paths := []string{"/metrics", graph, "/debug/pprof/", "/debug/pprof/symbol", "/nothing-here"}
	want := map[string]map[string]int{ // who → path → status
		"no credentials": {"/metrics": 401, graph: 401, "/debug/pprof/": 401, "/debug/pprof/symbol": 401, "/nothing-here": 401},
		"a forged token": {"/metrics": 401, graph: 401, "/debug/pprof/": 401, "/debug/pprof/symbol": 401, "/nothing-here": 401},
		"none":           {"/metrics": 403, graph: 403, "/debug/pprof/": 403, "/debug/pprof/symbol": 403, "/nothing-here": 403},
		"metrics":        {"/metrics": 200, graph: 403, "/debug/pprof/": 403, "/debug/pprof/symbol": 403, "/nothing-here": 403},
		"debug":          {"/metrics": 403, graph: 200, "/debug/pprof/": 200, "/debug/pprof/symbol": 200, "/nothing-here": 403},
	}
	tokens := map[string]string{"no credentials": "", "a forged token": readers["metrics"].token[:len(readers["metrics"].token)-4] + "AAAA"}
	for k, r := range readers {
		tokens[k] = r.token
	}
	for _, who := range []string{"no credentials", "a forged token", "none", "metrics", "debug"} {
		for _, path := range paths {
			code, body := scrapeAs(t, client, base, path, tokens[who])
			t.Logf("%-14s GET %-60s → %d %.80q", who, path, code, body)
			if code != want[who][path] {
				t.Errorf("%s: GET %s = %d %q, want %d", who, path, code, body, want[who][path])
			}
			if code != http.StatusOK && (strings.Contains(body, "cascade_") || strings.Contains(body, string(cm.UID))) {
				t.Errorf("%s: GET %s answered %d but revealed: %q", who, path, code, body)
			}
			switch {
			case code == http.StatusOK && path == "/metrics" && !strings.Contains(body, "cascade_api_requests_total"):
				t.Errorf("%s: /metrics has no cascade metric: %.200q", who, body)
			case code == http.StatusOK && path == graph && !strings.Contains(body, `"name": "explained"`):
				t.Errorf("%s: /debug/graph does not explain the ConfigMap: %.200q", who, body)
			case code == http.StatusForbidden && !strings.Contains(body, "system:serviceaccount:"+ns+":"):
				t.Errorf("%s: 403 does not name the user: %q", who, body)
			}
		}
	}

	// The admin (system:masters, a static token reviewed like any other) may read all.
	if m, err := c.Metrics(); err != nil || !strings.Contains(m, "cascade_api_requests_total") {
		t.Errorf("the admin's scrape: %v", err)
	}

	// Plain HTTP to the TLS port: Go's TLS server answers 400 to the stray request and closes
	// the connection, whose reset may beat the answer to the client. Either way, no metric.
	plain := "http://" + strings.TrimPrefix(base, "https://") + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+readers["metrics"].token)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Logf("plain HTTP     GET /metrics → %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Logf("plain HTTP     GET /metrics → %d %q", resp.StatusCode, b)
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "cascade_") {
			t.Errorf("plain HTTP to the metrics port = %d %q, want 400 (or a reset connection) and no metric", resp.StatusCode, b)
		}
	}
	// A client that does not trust the certificate cannot connect.
	if _, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + "/metrics"); err == nil { //nolint:noctx // a one-off probe
		t.Error("a client trusting only the system's roots accepted cascade's certificate")
	}

	// cascade explain through a port-forward's address (here cascade's own): the kubeconfig
	// user's token goes with the request, so the operator's role lets it and no role does not.
	for _, tt := range []struct {
		who      string
		wantCode int
		want     string
	}{{"debug", 0, "explained"}, {"none", 1, "403"}} {
		ukc := filepath.Join(t.TempDir(), tt.who+".kubeconfig")
		if err := suite.CP.WriteKubeconfig(ukc, "system:serviceaccount:"+ns+":"+readers[tt.who].name, readers[tt.who].token); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, suite.CascadeBin, "explain", "configmaps/explained", "-n", ns, "--url", base,
			"--certificate-authority", certFile, "--kubeconfig", ukc)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
		t.Logf("explain as %-6s → exit %d %.120q", tt.who, code, out)
		if code != tt.wantCode || !strings.Contains(string(out), tt.want) {
			t.Errorf("cascade explain --url %s as %s: exit %d %q, want exit %d and %q", base, tt.who, code, out, tt.wantCode, tt.want)
		}
	}

	// The health port: plain HTTP, no credentials, nothing but the state.
	for _, p := range []string{"/healthz", "/readyz"} {
		code, body := scrapeAs(t, http.DefaultClient, c.HealthURL, p, "")
		t.Logf("health         GET %s → %d %q", p, code, body)
		if code != http.StatusOK || !strings.HasPrefix(body, "ok") {
			t.Errorf("GET %s = %d %q, want 200 ok", p, code, body)
		}
	}
}
