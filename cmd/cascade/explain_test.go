package main

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/gc"
)

// fakeAPIServer serves the discovery documents of configmaps (cm), namespaces and
// deployments.apps (deploy) over TLS, and answers the service proxy to cascade's /debug/graph with an
// explanation, recording each proxied request. Every request must carry the user's token.
type fakeAPIServer struct {
	*httptest.Server
	mu      sync.Mutex
	proxied []string // path?query of each proxied request
}

func newFakeAPIServer(t *testing.T, token string) *fakeAPIServer {
	f := &fakeAPIServer{}
	docs := map[string]any{
		"/api": metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}},
		"/apis": metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{{
			Name: "apps", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apps/v1", Version: "v1"}},
			PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "apps/v1", Version: "v1"},
		}}},
		"/api/v1": metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", ShortNames: []string{"cm"}, Verbs: []string{"get", "list"}},
			{Name: "namespaces", SingularName: "namespace", Kind: "Namespace", ShortNames: []string{"ns"}, Verbs: []string{"get", "list"}},
		}},
		"/apis/apps/v1": metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment", ShortNames: []string{"deploy"}, Verbs: []string{"get", "list"}},
		}},
	}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if doc, ok := docs[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
			return
		}
		const proxy = "/api/v1/namespaces/cascade-system/services/cascade-metrics:metrics/proxy/debug/graph"
		if r.URL.Path != proxy {
			http.NotFound(w, r)
			return
		}
		f.mu.Lock()
		f.proxied = append(f.proxied, r.URL.RawQuery)
		f.mu.Unlock()
		q := r.URL.Query()
		if q.Get("name") == "missing" {
			http.Error(w, q.Get("resource")+" "+q.Get("namespace")+"/missing is not in the graph", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(gc.Explanation{
			Object: gc.ExplainedObject{Kind: "ConfigMap", Namespace: q.Get("namespace"), Name: q.Get("name"), UID: "u-1"},
			State:  "Observed", Resource: q.Get("resource"),
		})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPIServer) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.proxied) == 0 {
		return ""
	}
	return f.proxied[len(f.proxied)-1]
}

// writeKubeconfig writes a kubeconfig with two contexts on server: "shop" (namespace shop, the
// current one) and "other" (namespace other).
func writeKubeconfig(t *testing.T, server, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	body := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: ` + token + `}}]
contexts:
- {name: shop, context: {cluster: c, user: u, namespace: shop}}
- {name: other, context: {cluster: c, user: u, namespace: other}}
current-context: shop
`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExplainThroughTheAPIServer: without --url, `cascade explain` reaches cascade through the
// API server's service proxy with the kubeconfig's credentials ($KUBECONFIG, --kubeconfig,
// --context), takes the namespace from the context unless -n names one, accepts resource names
// as kubectl does (resolved with discovery: singular, plural, short, .group) and prints text,
// json or yaml.
func TestExplainThroughTheAPIServer(t *testing.T) {
	const token = "user-token"
	api := newFakeAPIServer(t, token)
	kubeconfig := writeKubeconfig(t, api.URL, token)
	t.Setenv("KUBECONFIG", kubeconfig)
	for _, tt := range []struct {
		args      []string
		wantQuery string
		wantOut   string
	}{
		{[]string{"cm/x"}, "name=x&namespace=shop&resource=configmaps", "ConfigMap shop/x (u-1): Observed, resource configmaps\n"},
		{[]string{"configmap/x", "-n", "ns1"}, "name=x&namespace=ns1&resource=configmaps", "ConfigMap ns1/x"},
		{[]string{"configmaps/x", "--context", "other"}, "name=x&namespace=other&resource=configmaps", "ConfigMap other/x"},
		{[]string{"deployment.apps/web", "--kubeconfig", kubeconfig}, "name=web&namespace=shop&resource=deployments.apps", "resource deployments.apps"},
		{[]string{"deploy/web", "-o", "json"}, "name=web&namespace=shop&resource=deployments.apps", `"resource":"deployments.apps"`},
		{[]string{"ns/kube-system", "-o", "yaml"}, "name=kube-system&namespace=&resource=namespaces", "resource: namespaces\n"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := runCLI(t, nil, append([]string{"explain"}, tt.args...)...)
			if c.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", c.code, c.stderr)
			}
			if got := api.last(); got != tt.wantQuery {
				t.Errorf("proxied /debug/graph?%s, want ?%s", got, tt.wantQuery)
			}
			if !strings.Contains(c.stdout, tt.wantOut) {
				t.Errorf("output lacks %q:\n%s", tt.wantOut, c.stdout)
			}
		})
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"widgets/x"}, exitFailure, `the server doesn't have a resource type "widgets"`},
		{[]string{"cm/missing"}, exitFailure, "404 Not Found: configmaps shop/missing is not in the graph"},
		{[]string{"cm/x", "--scheme", "gopher"}, exitUsage, `invalid --scheme "gopher"`},
		{[]string{"cm/x", "--service", "no-namespace"}, exitUsage, "invalid --service=no-namespace"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := runCLI(t, nil, append([]string{"explain"}, tt.args...)...)
			if c.code != tt.code || !strings.Contains(c.lastLine(), tt.want) {
				t.Errorf("exit %d, last line %q; want %d and %q", c.code, c.lastLine(), tt.code, tt.want)
			}
		})
	}
}

// TestExplainURL: --url asks a cascade directly (no kubeconfig is read), -n defaulting to
// default, the resource passed as given.
func TestExplainURL(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/graph" {
			http.NotFound(w, r)
			return
		}
		query = r.URL.RawQuery
		_ = json.NewEncoder(w).Encode(gc.Explanation{Object: gc.ExplainedObject{Kind: "ConfigMap", Namespace: "default", Name: "x", UID: "u-1"}, State: "Observed"})
	}))
	defer srv.Close()
	c := runCLI(t, nil, "explain", "configmaps/x", "--url", srv.URL+"/")
	if c.code != 0 || query != "name=x&namespace=default&resource=configmaps" || !strings.HasPrefix(c.stdout, "ConfigMap default/x (u-1): Observed") {
		t.Errorf("exit %d, query %q, stdout %q, stderr %q", c.code, query, c.stdout, c.stderr)
	}
}

func TestServiceProxyURL(t *testing.T) {
	for _, tt := range []struct{ host, scheme, want string }{
		{"https://api:6443", "http", "https://api:6443/api/v1/namespaces/cascade-system/services/cascade-metrics:metrics/proxy"},
		{"https://rancher/k8s/clusters/c-1/", "https", "https://rancher/k8s/clusters/c-1/api/v1/namespaces/cascade-system/services/https:cascade-metrics:metrics/proxy"},
	} {
		if got := serviceProxyURL(tt.host, "cascade-system", "cascade-metrics", "metrics", tt.scheme); got != tt.want {
			t.Errorf("serviceProxyURL(%s, %s) = %s, want %s", tt.host, tt.scheme, got, tt.want)
		}
	}
}

// TestExplainSecureURL: an https --url (a port-forward to a secure cascade) sends the kubeconfig
// user's bearer token and verifies cascade's certificate with --certificate-authority; without
// it or --insecure-skip-tls-verify it is a usage error that connects nowhere, and a 403 from
// cascade is a failure that says so.
func TestExplainSecureURL(t *testing.T) {
	var auth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if auth != "Bearer operator-token" {
			http.Error(w, `Forbidden: user "someone" cannot get path "/debug/graph"`, http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(gc.Explanation{Object: gc.ExplainedObject{Kind: "ConfigMap", Namespace: "default", Name: "x", UID: "u-1"}, State: "Observed"})
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := func(token string) string {
		p := filepath.Join(dir, token+".kubeconfig")
		cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\n" +
			"users:\n- name: u\n  user: {token: " + token + "}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := runCLI(t, nil, "explain", "configmaps/x", "--url", srv.URL, "--certificate-authority", ca, "--kubeconfig", kubeconfig("operator-token"))
	if c.code != 0 || auth != "Bearer operator-token" || !strings.HasPrefix(c.stdout, "ConfigMap default/x (u-1): Observed") {
		t.Errorf("with the operator's token: exit %d, Authorization %q, stdout %q, stderr %q", c.code, auth, c.stdout, c.stderr)
	}
	auth = ""
	c = runCLI(t, nil, "explain", "configmaps/x", "--url", srv.URL, "--kubeconfig", kubeconfig("operator-token"))
	if c.code != exitUsage || auth != "" || !strings.Contains(c.stderr, "--certificate-authority") {
		t.Errorf("no CA: exit %d (want %d), reached cascade: %t, stderr %q", c.code, exitUsage, auth != "", c.stderr)
	}
	c = runCLI(t, nil, "explain", "configmaps/x", "--url", srv.URL, "--insecure-skip-tls-verify", "--kubeconfig", kubeconfig("other-token"))
	if c.code != exitFailure || auth != "Bearer other-token" || !strings.Contains(c.stderr, "403") {
		t.Errorf("a token without the role: exit %d (want %d), Authorization %q, stderr %q", c.code, exitFailure, auth, c.stderr)
	}
}
