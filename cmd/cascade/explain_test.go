package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cascade-gc/cascade/gc"
)

// fakeAPIServer serves the discovery documents of configmaps (cm), namespaces and
// deployments.apps (deploy) over TLS, and forwards the aggregated API debug.cascade.dev to
// cascade's handler of it (aggregatedAPI), whose explanations it records: "RESOURCE NS/NAME".
// Every request must carry the user's token; a request with denyToken is forbidden as
// kube-apiserver forbids it.
type fakeAPIServer struct {
	*httptest.Server
	mu      sync.Mutex
	proxied []string
}

const denyToken = "denied-token"

func newFakeAPIServer(t *testing.T, token string) *fakeAPIServer {
	return newFakeAPIServerOf(t, token, nil)
}

// newFakeAPIServerOf is newFakeAPIServer in front of a cascade in fleet mode whose running
// members are members (nil: a single-cluster cascade), each explaining as the single cluster
// does, recorded as "MEMBER RESOURCE NS/NAME". Its port is not secured: no member is
// authorized (TestExplainMembers does that).
func newFakeAPIServerOf(t *testing.T, token string, members []string) *fakeAPIServer {
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
	collector := func(prefix string) fakeCollector {
		return fakeCollector{explain: func(_ context.Context, resource, ns, name string) (gc.Explanation, error) {
			f.mu.Lock()
			f.proxied = append(f.proxied, prefix+resource+" "+ns+"/"+name)
			f.mu.Unlock()
			if name == "missing" {
				return gc.Explanation{}, fmt.Errorf("%s %s/missing is not in the graph", resource, ns)
			}
			return gc.Explanation{Object: gc.ExplainedObject{Kind: "ConfigMap", Namespace: ns, Name: name, UID: "u-1"}, State: "Observed", Resource: resource}, nil
		}}
	}
	access := explainAccess{graphs: graphs{single: collector("")}}
	if members != nil {
		access = explainAccess{graphs: graphs{member: func(name string) (explainer, bool) {
			if !slices.Contains(members, name) {
				return nil, false
			}
			return collector(name + " "), true
		}}}
	}
	cascade := aggregatedAPI(access)
	f.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+denyToken && strings.HasPrefix(r.URL.Path, "/apis/debug.cascade.dev/") {
			writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, `explanations.debug.cascade.dev "x" is forbidden: User "nobody" cannot get resource "explanations"`)
			return
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+token && got != "Bearer "+denyToken {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if doc, ok := docs[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(doc)
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/apis/debug.cascade.dev/") {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/explanations/down") { // the aggregator, cascade unreachable
			writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the server is currently unable to handle the request")
			return
		}
		cascade.ServeHTTP(w, r)
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

// TestExplainThroughTheAPIServer: without --url, `cascade explain` asks the API server for the
// explanation in cascade's aggregated API with the kubeconfig's credentials ($KUBECONFIG,
// --kubeconfig, --context), takes the namespace from the context unless -n names one (none for
// a cluster-scoped resource), accepts resource names as kubectl does (resolved with discovery:
// singular, plural, short, .group) and prints text, json, yaml or dot; the API server's 403
// and cascade's 404 are failures that give their message.
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
		{[]string{"cm/x"}, "configmaps shop/x", "ConfigMap shop/x (u-1): Observed, resource configmaps\n"},
		{[]string{"configmap/x", "-n", "ns1"}, "configmaps ns1/x", "ConfigMap ns1/x"},
		{[]string{"configmaps/x", "--context", "other"}, "configmaps other/x", "ConfigMap other/x"},
		{[]string{"deployment.apps/web", "--kubeconfig", kubeconfig}, "deployments.apps shop/web", "resource deployments.apps"},
		{[]string{"deploy/web", "-o", "json"}, "deployments.apps shop/web", `"resource": "deployments.apps"`},
		{[]string{"ns/kube-system", "-o", "yaml"}, "namespaces /kube-system", "resource: namespaces\n"},
		{[]string{"cm/x", "-o", "dot"}, "configmaps shop/x", "digraph cascade {"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := runCLI(t, nil, append([]string{"explain"}, tt.args...)...)
			if c.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", c.code, c.stderr)
			}
			if got := api.last(); got != tt.wantQuery {
				t.Errorf("cascade explained %q, want %q", got, tt.wantQuery)
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
		{[]string{"cm/down"}, exitFailure, "503 Service Unavailable: the server is currently unable to handle the request (the API server cannot reach cascade: kubectl get apiservice v1alpha1.debug.cascade.dev says why)"},
		{[]string{"cm/x", "--kubeconfig", writeKubeconfig(t, api.URL, denyToken)}, exitFailure, `403 Forbidden: explanations.debug.cascade.dev "x" is forbidden: User "nobody"`},
		{[]string{"cm/x", "--service", "cascade-system/cascade-metrics"}, exitUsage, "unknown flag: --service"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := runCLI(t, nil, append([]string{"explain"}, tt.args...)...)
			if c.code != tt.code || !strings.Contains(c.lastLine(), tt.want) {
				t.Errorf("exit %d, last line %q; want %d and %q", c.code, c.lastLine(), tt.code, tt.want)
			}
		})
	}
}

// TestExplainURL: --url asks a cascade directly; without a kubeconfig, -n defaults to default
// and the resource is passed as given.
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

// TestExplainURLShortNames (issue 31.5): with --url, explain accepts the names kubectl accepts
// (cm, configmap, deploy, deployment, with .group), resolved with the discovery of the
// kubeconfig's cluster as through the API server, and takes the namespace from -n, else the
// context; a cluster-scoped resource is asked without one. A resource the cluster does not
// serve fails as kubectl does; a cluster that cannot be asked leaves the name as written, with
// a warning.
func TestExplainURLShortNames(t *testing.T) {
	const token = "user-token"
	api := newFakeAPIServer(t, token)
	t.Setenv("KUBECONFIG", writeKubeconfig(t, api.URL, token))
	var query string
	srv := shopGraphServer(t, &query)
	for _, tt := range []struct {
		args      []string
		wantQuery string
	}{
		{[]string{"cm/x"}, "name=x&namespace=shop&resource=configmaps"},
		{[]string{"configmap/x", "-n", "ns1"}, "name=x&namespace=ns1&resource=configmaps"},
		{[]string{"configmaps/x", "--context", "other"}, "name=x&namespace=other&resource=configmaps"},
		{[]string{"deploy/web"}, "name=web&namespace=shop&resource=deployments.apps"},
		{[]string{"deployment/web"}, "name=web&namespace=shop&resource=deployments.apps"},
		{[]string{"deployment.apps/web"}, "name=web&namespace=shop&resource=deployments.apps"},
		{[]string{"ns/kube-system"}, "name=kube-system&namespace=&resource=namespaces"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			query = ""
			c := runCLI(t, nil, append([]string{"explain", "--url", srv.URL}, tt.args...)...)
			if c.code != 0 || query != tt.wantQuery {
				t.Errorf("exit %d, query %q (want %q), stderr %q", c.code, query, tt.wantQuery, c.stderr)
			}
			if c.stderr != "" {
				t.Errorf("stderr %q, want nothing", c.stderr)
			}
		})
	}
	query = ""
	c := runCLI(t, nil, "explain", "--url", srv.URL, "widgets/x")
	if c.code != exitFailure || query != "" || !strings.Contains(c.lastLine(), `the server doesn't have a resource type "widgets"`) {
		t.Errorf("an unserved resource: exit %d, query %q, last line %q", c.code, query, c.lastLine())
	}
	// A kubeconfig whose cluster does not answer: the name as written, said on stderr.
	t.Setenv("KUBECONFIG", writeKubeconfig(t, "https://127.0.0.1:1", token))
	c = runCLI(t, nil, "explain", "--url", srv.URL, "configmaps/x", "-n", "ns1")
	if c.code != 0 || query != "name=x&namespace=ns1&resource=configmaps" || !strings.Contains(c.stderr, `warning: "configmaps" not resolved with the kubeconfig's cluster`) {
		t.Errorf("an unreachable cluster: exit %d, query %q, stderr %q", c.code, query, c.stderr)
	}
}

// TestURLTarget: explain --url's resolution with a fake discovery: short, singular and plural
// names and .group resolve to plural[.group] and say whether a namespace applies.
func TestURLTarget(t *testing.T) {
	fd := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	fd.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", ShortNames: []string{"cm"}, Verbs: []string{"get", "list"}},
			{Name: "nodes", SingularName: "node", Kind: "Node", ShortNames: []string{"no"}, Verbs: []string{"get", "list"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment", ShortNames: []string{"deploy"}, Verbs: []string{"get", "list"}},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", ShortNames: []string{"wd"}, Verbs: []string{"get", "list"}},
		}},
	}
	cc := clientcmd.NewDefaultClientConfig(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: "https://api.example:6443"}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {}},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u", Namespace: "shop"}},
		CurrentContext: "x",
	}, &clientcmd.ConfigOverrides{})
	newDisco := func(*rest.Config) (discovery.CachedDiscoveryInterface, error) {
		return memory.NewMemCacheClient(fd), nil
	}
	for _, tt := range []struct{ resource, want, ns string }{
		{"cm", "configmaps", "shop"},
		{"configmap", "configmaps", "shop"},
		{"configmaps", "configmaps", "shop"},
		{"deploy", "deployments.apps", "shop"},
		{"deployment", "deployments.apps", "shop"},
		{"deployments.apps", "deployments.apps", "shop"},
		{"deployment.apps", "deployments.apps", "shop"},
		{"wd", "widgets.example.com", "shop"},
		{"widget.example.com", "widgets.example.com", "shop"},
		{"no", "nodes", ""},
		{"node", "nodes", ""},
	} {
		got, err := urlTarget(cc, "", tt.resource, newDisco)
		if err != nil || got.resource != tt.want || got.namespace != tt.ns || got.unresolved != nil {
			t.Errorf("urlTarget(%q) = %+v, %v; want %s in %q", tt.resource, got, err, tt.want, tt.ns)
		}
	}
	if got, err := urlTarget(cc, "", "gadgets", newDisco); err == nil || !meta.IsNoMatchError(err) {
		t.Errorf("urlTarget(gadgets) = %+v, %v; want a no-match error", got, err)
	}
}

func TestAggregatedURL(t *testing.T) {
	for _, tt := range []struct{ server, ns, format, member, want string }{
		{"https://api:6443", "shop", "text", "", "https://api:6443/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations/x?resource=configmaps"},
		{"https://rancher/k8s/clusters/c-1/", "", "dot", "", "https://rancher/k8s/clusters/c-1/apis/debug.cascade.dev/v1alpha1/explanations/x?format=dot&resource=configmaps"},
		{"https://api:6443", "shop", "json", "tenant a&b", "https://api:6443/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations/x?member=tenant+a%26b&resource=configmaps"},
	} {
		if got := aggregatedURL(tt.server, "configmaps", tt.ns, "x", tt.format, tt.member); got != tt.want {
			t.Errorf("aggregatedURL(%s, %q, %s, %q) = %s, want %s", tt.server, tt.ns, tt.format, tt.member, got, tt.want)
		}
	}
	if got, want := debugGraphURL("http://127.0.0.1:8443/", "configmaps", "shop", "x", "dot", "a"), "http://127.0.0.1:8443/debug/graph?format=dot&member=a&name=x&namespace=shop&resource=configmaps"; got != want {
		t.Errorf("debugGraphURL with a member = %s, want %s", got, want)
	}
}

// TestExplainMemberFlag (issue 33.6): --member reaches cascade on both paths, through the API
// server (the aggregated API's ?member=, answered from that member's graph) and with --url
// (/debug/graph's ?member=). A resource the kubeconfig's cluster (the host) does not serve is
// asked of the member as written, namespaced, with a warning, where without --member it fails
// as kubectl does. A cascade in fleet mode asked without --member, and a single-cluster one
// asked with it, answer 400, which explain reports.
func TestExplainMemberFlag(t *testing.T) {
	const token = "user-token"
	api := newFakeAPIServerOf(t, token, []string{"a", "b"})
	t.Setenv("KUBECONFIG", writeKubeconfig(t, api.URL, token))
	for _, tt := range []struct {
		args                []string
		wantQuery, wantWarn string
	}{
		{[]string{"cm/x", "--member", "a"}, "a configmaps shop/x", ""},
		{[]string{"deploy/web", "-n", "ns1", "--member", "b"}, "b deployments.apps ns1/web", ""},
		{[]string{"ns/kube-system", "--member", "b"}, "b namespaces /kube-system", ""},
		{[]string{"widgets.example.com/w", "--member", "a"}, "a widgets.example.com shop/w", `warning: the kubeconfig's cluster does not serve "widgets.example.com": asking for member a's as written`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := runCLI(t, nil, append([]string{"explain"}, tt.args...)...)
			if c.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", c.code, c.stderr)
			}
			if got := api.last(); got != tt.wantQuery {
				t.Errorf("cascade explained %q, want %q", got, tt.wantQuery)
			}
			if !strings.Contains(c.stderr, tt.wantWarn) || (tt.wantWarn == "") != (c.stderr == "") {
				t.Errorf("stderr %q, want %q", c.stderr, tt.wantWarn)
			}
		})
	}
	for _, tt := range []struct {
		api  *fakeAPIServer
		args []string
		want string
	}{
		{api, []string{"cm/x"}, "400 Bad Request: fleet mode: every object is a member's; name the member (cascade explain --member NAME"},
		{api, []string{"cm/x", "--member", "c"}, `404 Not Found: fleet mode: no running member "c"`},
		{api, []string{"widgets.example.com/w"}, `the server doesn't have a resource type "widgets.example.com"`},
		{newFakeAPIServer(t, token), []string{"cm/x", "--member", "a"}, `400 Bad Request: member "a": this cascade is not in fleet mode`},
	} {
		t.Run("refused "+strings.Join(tt.args, " "), func(t *testing.T) {
			c := runCLI(t, nil, append([]string{"explain", "--kubeconfig", writeKubeconfig(t, tt.api.URL, token)}, tt.args...)...)
			if c.code != exitFailure || !strings.Contains(c.lastLine(), tt.want) {
				t.Errorf("exit %d, last line %q; want %d and %q", c.code, c.lastLine(), exitFailure, tt.want)
			}
		})
	}

	// --url: /debug/graph with the member.
	var query string
	srv := shopGraphServer(t, &query)
	for _, tt := range []struct {
		args            []string
		query, wantWarn string
	}{
		{[]string{"cm/x", "--member", "a"}, "member=a&name=x&namespace=shop&resource=configmaps", ""},
		{[]string{"widgets.example.com/w", "-n", "ns1", "--member", "a"}, "member=a&name=w&namespace=ns1&resource=widgets.example.com", `does not serve "widgets.example.com"`},
		{[]string{"cm/x"}, "name=x&namespace=shop&resource=configmaps", ""},
	} {
		query = ""
		c := runCLI(t, nil, append([]string{"explain", "--url", srv.URL}, tt.args...)...)
		if c.code != 0 || query != tt.query || !strings.Contains(c.stderr, tt.wantWarn) || (tt.wantWarn == "") != (c.stderr == "") {
			t.Errorf("--url %v: exit %d, query %q (want %q), stderr %q (want %q)", tt.args, c.code, query, tt.query, c.stderr, tt.wantWarn)
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

// TestExplainTextCompanion: in companion mode the text says so, and presents the decision as
// the in-tree collector's, not cascade's; in collector mode it says neither.
func TestExplainTextCompanion(t *testing.T) {
	e := gc.Explanation{
		Object:   gc.ExplainedObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "dep", UID: "u-dep"},
		State:    "observed",
		Decision: &gc.ExplainedDecision{Action: "Delete", Reason: "OwnersGone", Propagation: "Background"},
	}
	collector := explainText(e)
	e.Mode = gc.ModeCompanion
	companion := explainText(e)
	for _, want := range []string{
		"Mode: companion: kube-controller-manager's garbage collector acts",
		"What the in-tree collector would decide now (cascade's reading of its rules; the policy's collect rules do not apply): Delete (OwnersGone), propagation Background",
	} {
		if !strings.Contains(companion, want) {
			t.Errorf("companion explanation lacks %q:\n%s", want, companion)
		}
	}
	if !strings.Contains(collector, "Decision now: Delete (OwnersGone)") || strings.Contains(collector, "companion") {
		t.Errorf("collector explanation:\n%s", collector)
	}
}

// shopGraphServer is a cascade whose /debug/graph explains ConfigMap shop/x to anyone, and
// records each request's query in query. It stops at cleanup.
func shopGraphServer(t *testing.T, query *string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*query = r.URL.RawQuery
		_ = json.NewEncoder(w).Encode(gc.Explanation{Object: gc.ExplainedObject{Kind: "ConfigMap", Namespace: "shop", Name: "x", UID: "u-1"}, State: "Observed"})
	}))
	t.Cleanup(srv.Close)
	return srv
}
