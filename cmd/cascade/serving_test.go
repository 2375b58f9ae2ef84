package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
)

// reviewServer is a fake API server that answers TokenReviews from a token → user table and
// SubjectAccessReviews from a user → allowed paths table (verb get only) and a user → allowed
// resources table, and records them; with authConfig set, it serves that ConfigMap as
// kube-system/extension-apiserver-authentication (get, list, watch: the initial events only).
type reviewServer struct {
	users      map[string]string   // token → user name
	paths      map[string][]string // user → paths it may get
	resources  map[string][]string // user → "VERB RESOURCE.GROUP NAMESPACE/NAME" it may do
	authConfig *corev1.ConfigMap
	mu         sync.Mutex
	tokens     int // TokenReviews received
	access     []authorizationv1.SubjectAccessReviewSpec
}

func (f *reviewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	const configMaps = "/api/v1/namespaces/kube-system/configmaps"
	if strings.HasPrefix(r.URL.Path, configMaps) {
		switch {
		case f.authConfig == nil || r.URL.Path != configMaps && r.URL.Path != configMaps+"/"+authenticationConfigMap:
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: 404})
		case r.URL.Query().Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			if r.URL.Query().Get("sendInitialEvents") == "true" { // client-go's watch-list: the object, then the end of the initial events
				enc := json.NewEncoder(w)
				_ = enc.Encode(map[string]any{"type": "ADDED", "object": f.authConfig})
				_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": &corev1.ConfigMap{TypeMeta: f.authConfig.TypeMeta,
					ObjectMeta: metav1.ObjectMeta{ResourceVersion: f.authConfig.ResourceVersion, Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.URL.Path == configMaps:
			_ = json.NewEncoder(w).Encode(corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"},
				ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.ConfigMap{*f.authConfig}})
		default:
			_ = json.NewEncoder(w).Encode(f.authConfig)
		}
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		var tr authenticationv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.tokens++
		tr.TypeMeta = metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}
		if name, ok := f.users[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: name, Groups: []string{"system:authenticated"}}}
		}
		_ = json.NewEncoder(w).Encode(tr)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.access = append(f.access, sar.Spec)
		sar.TypeMeta = metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}
		if a := sar.Spec.NonResourceAttributes; a != nil && a.Verb == "get" && slices.Contains(f.paths[sar.Spec.User], a.Path) {
			sar.Status.Allowed = true
		}
		if a := sar.Spec.ResourceAttributes; a != nil && slices.Contains(f.resources[sar.Spec.User], a.Verb+" "+a.Resource+"."+a.Group+" "+a.Namespace+"/"+a.Name) {
			sar.Status.Allowed = true
		}
		_ = json.NewEncoder(w).Encode(sar)
	default:
		http.NotFound(w, r)
	}
}

func (f *reviewServer) counts() (tokens, access int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens, len(f.access)
}

// startServers builds cascade's servers with opts against a fake API server, runs them until
// the test ends, and returns the metrics and health addresses.
func startServers(t *testing.T, opts *Options, api *reviewServer) (metrics, health string) {
	t.Helper()
	graph := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "graph of "+r.URL.Query().Get("uid")+" "+r.Header.Get("Authorization"))
	}
	return startServersOf(t, opts, api, graphs{single: fakeCollector{explain: fakeExplain, graph: graph}})
}

// startServersOf is startServers whose explain endpoints g answers.
func startServersOf(t *testing.T, opts *Options, api *reviewServer, g graphs) (metrics, health string) {
	t.Helper()
	apiServer := httptest.NewServer(api)
	t.Cleanup(apiServer.Close)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: apiServer.URL})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "cascade_test_metric", Help: "A metric of the test."}))
	ctx, cancel := context.WithCancel(context.Background())
	servers, err := newServers(ctx, opts, reg, fakeReadiness{ready: true}, func() error { return nil }, g, kube)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { _ = s.Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	if len(servers) != 2 {
		t.Fatalf("%d servers, want metrics and health", len(servers))
	}
	return servers[0].l.Addr().String(), servers[1].l.Addr().String()
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func secureOptions() *Options {
	o := NewOptions()
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.EnableProfiling = "127.0.0.1:0", "127.0.0.1:0", true
	return o
}

func reviews() *reviewServer {
	return &reviewServer{
		users: map[string]string{"t-none": "nobody", "t-metrics": "prometheus", "t-debug": "operator"},
		paths: map[string][]string{"prometheus": {"/metrics"}, "operator": {"/debug/graph", "/debug/pprof/"}},
	}
}

// TestSecureServing: by default the metrics address serves HTTPS only (a self-signed
// certificate for localhost), and answers 401 without a valid bearer token, 403 when the API
// server says the token's user may not get the path, and the handler's answer when it may;
// the health port stays plain HTTP and answers anyone.
func TestSecureServing(t *testing.T) {
	defer func(ttl time.Duration) { reviewCacheTTL = ttl }(reviewCacheTTL)
	reviewCacheTTL = time.Hour // the cache's check below must not depend on the machine's speed
	api := reviews()
	metrics, health := startServers(t, secureOptions(), api)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the self-signed certificate is checked below
	base := "https://" + metrics

	type want struct {
		code int
		body string
	}
	for _, tc := range []struct {
		token, path string
		want        want
	}{
		{"", "/metrics", want{401, "Unauthorized"}},
		{"", "/debug/graph?uid=u1", want{401, "Unauthorized"}},
		{"", "/debug/pprof/", want{401, "Unauthorized"}},
		{"", "/nothing-here", want{401, "Unauthorized"}},
		{"not-a-token", "/metrics", want{401, "Unauthorized"}},
		{"t-none", "/metrics", want{403, `Forbidden: user "nobody" cannot get path "/metrics"`}},
		{"t-none", "/debug/graph?uid=u1", want{403, `Forbidden: user "nobody" cannot get path "/debug/graph"`}},
		{"t-metrics", "/metrics", want{200, "cascade_test_metric 0"}},
		{"t-metrics", "/debug/graph?uid=u1", want{403, `Forbidden: user "prometheus" cannot get path "/debug/graph"`}},
		{"t-debug", "/metrics", want{403, `Forbidden: user "operator" cannot get path "/metrics"`}},
		{"t-debug", "/debug/graph?uid=u1", want{200, "graph of u1 "}}, // the token is not passed on
		{"t-debug", "/debug/pprof/", want{200, "Types of profiles available"}},
	} {
		code, body := get(t, insecure, base+tc.path, tc.token)
		if code != tc.want.code || !strings.Contains(body, tc.want.body) {
			t.Errorf("GET %s with token %q = %d %q, want %d containing %q", tc.path, tc.token, code, body, tc.want.code, tc.want.body)
		}
		if tc.want.code != 200 && strings.Contains(body, "cascade_test_metric") {
			t.Errorf("GET %s with token %q revealed the metrics: %q", tc.path, tc.token, body)
		}
	}
	api.mu.Lock()
	for _, spec := range api.access {
		if spec.NonResourceAttributes == nil || spec.ResourceAttributes != nil || spec.NonResourceAttributes.Verb != "get" ||
			!slices.Contains(spec.Groups, "system:authenticated") {
			t.Errorf("SubjectAccessReview %+v: want verb get on a non-resource path, with the user's groups", spec)
		}
	}
	api.mu.Unlock()

	// Answers are cached: asking again sends no new review.
	tokens, access := api.counts()
	for range 3 {
		if code, _ := get(t, insecure, base+"/metrics", "t-metrics"); code != 200 {
			t.Fatalf("cached scrape: %d", code)
		}
	}
	if t2, a2 := api.counts(); t2 != tokens || a2 != access {
		t.Errorf("3 more scrapes sent %d TokenReviews and %d SubjectAccessReviews, want none (cached)", t2-tokens, a2-access)
	}

	// Plain HTTP to the TLS port gets Go's refusal (a 400, or the connection reset before the
	// client reads it), never a metric.
	if resp, err := http.Get("http://" + metrics + "/metrics"); err == nil { //nolint:noctx // a one-off probe
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "cascade_test_metric") {
			t.Errorf("plain HTTP to the metrics port = %d %q, want 400 and no metric", resp.StatusCode, b)
		}
	}

	// The certificate is self-signed, for localhost, and not for anything else.
	conn, err := tls.Dial("tcp", metrics, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // inspecting the certificate
	if err != nil {
		t.Fatal(err)
	}
	state := conn.ConnectionState()
	_ = conn.Close()
	if state.Version < tls.VersionTLS12 || state.NegotiatedProtocol == "h2" {
		t.Errorf("TLS version %x, protocol %q: want TLS 1.2 or later, HTTP/1.1", state.Version, state.NegotiatedProtocol)
	}
	leaf := state.PeerCertificates[0]
	if err := leaf.VerifyHostname("localhost"); err != nil {
		t.Errorf("self-signed certificate: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "localhost"}); err == nil {
		t.Error("the self-signed certificate verifies against the system's roots")
	}

	// Health probes: plain HTTP, no credentials, nothing revealed.
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, http.DefaultClient, "http://"+health+p, ""); code != 200 || body != "ok" {
			t.Errorf("GET %s = %d %q, want 200 ok", p, code, body)
		}
	}
}

// TestSecureServingCertificateFiles: --tls-cert-file and --tls-private-key-file are served,
// so a client that trusts their CA verifies the connection; a new certificate written to the
// files is served without a restart.
func TestSecureServingCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(host string) *x509.CertPool {
		t.Helper()
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, []string{"localhost"})
		if err != nil {
			t.Fatal(err)
		}
		// Key first: the files are watched, and a certificate without its key is not loaded.
		if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(certPEM)
		return pool
	}
	first := write("first.example")
	opts := secureOptions()
	opts.TLSCertFile, opts.TLSPrivateKeyFile = certFile, keyFile
	metrics, _ := startServers(t, opts, reviews())
	url := "https://localhost:" + metrics[strings.LastIndex(metrics, ":")+1:] + "/metrics"

	trusting := func(pool *x509.CertPool) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	}
	if code, body := get(t, trusting(first), url, "t-metrics"); code != 200 || !strings.Contains(body, "cascade_test_metric") {
		t.Fatalf("scrape verified with the files' CA = %d %q", code, body)
	}

	second := write("second.example")
	deadline := time.Now().Add(2 * time.Minute) // the files are watched; a resync every minute is the backstop
	for {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer t-metrics")
		resp, err := trusting(second).Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("scrape after the new certificate = %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new certificate was never served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestInsecureServing: --metrics-secure=false serves plain HTTP to anyone, with no review sent.
func TestInsecureServing(t *testing.T) {
	api := reviews()
	opts := secureOptions()
	opts.MetricsSecure = false
	metrics, _ := startServers(t, opts, api)
	if code, body := get(t, http.DefaultClient, "http://"+metrics+"/metrics", ""); code != 200 || !strings.Contains(body, "cascade_test_metric") {
		t.Errorf("plain scrape = %d %q", code, body)
	}
	if tokens, access := api.counts(); tokens+access != 0 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews sent, want none", tokens, access)
	}
}

// TestValidateServingFlags: the TLS files go together, must exist, and are refused with
// --metrics-secure=false, which they would not serve.
func TestValidateServingFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		set        func(o *Options)
		wantErrors []string
	}{
		{"cert without key", func(o *Options) { o.TLSCertFile = file }, []string{"--tls-cert-file and --tls-private-key-file go together"}},
		{"missing files", func(o *Options) { o.TLSCertFile, o.TLSPrivateKeyFile = file+"-no", file }, []string{"invalid --tls-cert-file=" + file + "-no: cannot read the file"}},
		{"files with plain HTTP", func(o *Options) { o.TLSCertFile, o.TLSPrivateKeyFile, o.MetricsSecure = file, file, false }, []string{"invalid --metrics-secure=false"}},
		{"both files", func(o *Options) { o.TLSCertFile, o.TLSPrivateKeyFile = file, file }, nil},
		{"plain HTTP", func(o *Options) { o.MetricsSecure = false }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.set(o)
			errs := o.Validate()
			line := oneLine(errs)
			if len(errs) != len(tc.wantErrors) {
				t.Fatalf("errors %q, want %d", line, len(tc.wantErrors))
			}
			for _, w := range tc.wantErrors {
				if !strings.Contains(line, w) {
					t.Errorf("errors %q lack %q", line, w)
				}
			}
		})
	}
}

func TestNonResourceVerb(t *testing.T) {
	for method, verb := range map[string]string{"GET": "get", "HEAD": "get", "POST": "post", "PUT": "put", "PATCH": "patch", "DELETE": "delete", "OPTIONS": "options"} {
		if got := nonResourceVerb(method); got != verb {
			t.Errorf("nonResourceVerb(%s) = %s, want %s", method, got, verb)
		}
	}
}

// TestHealthz: the liveness probe answers 200 "ok" while the checks pass and 500 with what
// failed when one does (a Lease no longer renewed, stalled workers), so the kubelet restarts
// the replica (issue 25.4).
func TestHealthz(t *testing.T) {
	var failing atomic.Pointer[error]
	h := healthz(func() error {
		if e := failing.Load(); e != nil {
			return *e
		}
		return nil
	})
	probe := func() (int, string) {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := probe(); code != http.StatusOK || body != "ok" {
		t.Errorf("healthy: %d %q, want 200 ok", code, body)
	}
	err := errors.New("workers stalled: queue attempt_to_delete: 3 items ready, none finished for 6m0s")
	failing.Store(&err)
	if code, body := probe(); code != http.StatusInternalServerError || !strings.Contains(body, "attempt_to_delete") {
		t.Errorf("stalled: %d %q, want 500 naming the queue", code, body)
	}
}

// testCA is a CA of the test that signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// clientCert is a client certificate for cn signed by the CA.
func (ca *testCA) clientCert(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestFrontProxy: a request the API server forwards to the aggregated API is authenticated by
// the API server's front-proxy client certificate (signed by the CA, with an allowed name, both
// read from kube-system/extension-apiserver-authentication) and the user it names in its
// headers, then authorized for that user with the resource attributes of the path; discovery
// needs authentication only. The user's headers without that certificate (none, another CA's,
// another name) are not believed: 401. A bearer token reaches the aggregated API as well.
func TestFrontProxy(t *testing.T) {
	defer func(ttl time.Duration) { reviewCacheTTL = ttl }(reviewCacheTTL)
	reviewCacheTTL = time.Hour
	front, rogue := newTestCA(t, "front-proxy-ca"), newTestCA(t, "rogue-ca")
	api := reviews()
	api.resources = map[string][]string{"operator": {"get explanations.debug.cascade.dev shop/x"}}
	api.authConfig = &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: authenticationConfigMap, Namespace: "kube-system", ResourceVersion: "1"},
		Data: map[string]string{
			"requestheader-client-ca-file":       string(front.pem),
			"requestheader-allowed-names":        `["front-proxy-client"]`,
			"requestheader-username-headers":     `["X-Remote-User"]`,
			"requestheader-group-headers":        `["X-Remote-Group"]`,
			"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		},
	}
	metrics, _ := startServers(t, secureOptions(), api)
	base := "https://" + metrics
	client := func(cert *tls.Certificate) *http.Client {
		c := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // cascade's self-signed certificate
		if cert != nil {
			c.Certificates = []tls.Certificate{*cert}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: c}}
	}
	proxy := front.clientCert(t, "front-proxy-client")
	forwarded := func(c *http.Client, path, user string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.Header.Set("X-Remote-User", user)
			req.Header.Add("X-Remote-Group", "ops")
			req.Header.Add("X-Remote-Group", "system:authenticated")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const explanation = "/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations/x?resource=configmaps"
	// The CA comes from an informer cascade starts with its servers: wait until it is loaded.
	deadline := time.Now().Add(time.Minute)
	for code, _ := forwarded(client(&proxy), explanation, "operator"); code == http.StatusUnauthorized; code, _ = forwarded(client(&proxy), explanation, "operator") {
		if time.Now().After(deadline) {
			t.Fatal("the front-proxy CA was never loaded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	otherName, rogueCert := front.clientCert(t, "someone-else"), rogue.clientCert(t, "front-proxy-client")
	for _, tc := range []struct {
		name   string
		c      *http.Client
		path   string
		user   string
		token  string
		code   int
		answer string
	}{
		{"front proxy, allowed user", client(&proxy), explanation, "operator", "", 200, `"name": "x"`},
		{"front proxy, user without the role", client(&proxy), explanation, "nobody", "", 403, `Forbidden: user "nobody" cannot get explanations.debug.cascade.dev "x" in namespace "shop"`},
		{"front proxy, discovery", client(&proxy), "/apis/debug.cascade.dev/v1alpha1", "nobody", "", 200, `"explanations"`},
		{"front proxy, /metrics as a user without the role", client(&proxy), "/metrics", "nobody", "", 403, `cannot get path "/metrics"`},
		{"front proxy, no user", client(&proxy), explanation, "", "", 401, "Unauthorized"},
		{"headers, no certificate", client(nil), explanation, "operator", "", 401, "Unauthorized"},
		{"headers, no certificate, discovery", client(nil), "/apis/debug.cascade.dev/v1alpha1", "operator", "", 401, "Unauthorized"},
		{"headers, another CA's certificate", client(&rogueCert), explanation, "operator", "", 401, "Unauthorized"},
		{"headers, a name not allowed", client(&otherName), explanation, "operator", "", 401, "Unauthorized"},
		{"bearer token, allowed user", client(nil), explanation, "", "t-debug", 200, `"name": "x"`},
		{"bearer token, user without the role", client(nil), explanation, "", "t-none", 403, `Forbidden: user "nobody"`},
	} {
		var code int
		var body string
		if tc.token != "" {
			code, body = get(t, tc.c, base+tc.path, tc.token)
		} else {
			code, body = forwarded(tc.c, tc.path, tc.user)
		}
		if code != tc.code || !strings.Contains(body, tc.answer) {
			t.Errorf("%s: GET %s = %d %q, want %d containing %q", tc.name, tc.path, code, body, tc.code, tc.answer)
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	var sawOperator bool
	for _, spec := range api.access {
		if spec.NonResourceAttributes != nil {
			continue
		}
		a := spec.ResourceAttributes
		if a == nil || a.Verb != "get" || a.Group != "debug.cascade.dev" || a.Version != "v1alpha1" || a.Resource != "explanations" || a.Namespace != "shop" || a.Name != "x" {
			t.Errorf("SubjectAccessReview %+v: want get explanations.debug.cascade.dev shop/x", spec)
		}
		if spec.User == "operator" && slices.Equal(spec.Groups, []string{"ops", "system:authenticated"}) {
			sawOperator = true
		}
	}
	if !sawOperator {
		t.Errorf("no SubjectAccessReview for the forwarded user operator with its groups: %+v", api.access)
	}
}

// TestServerClosesIdleConnections (issue 32.6): a keep-alive connection left idle is closed by
// cascade's servers after the idle timeout (on main it was held for ever), and a client that
// never finishes its request headers is cut off after the header timeout.
func TestServerClosesIdleConnections(t *testing.T) {
	saved := serverTimeouts
	t.Cleanup(func() { serverTimeouts = saved })
	serverTimeouts.readHeader, serverTimeouts.read, serverTimeouts.idle = 300*time.Millisecond, time.Second, 300*time.Millisecond
	srv, err := newServer("--test-bind-address", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = srv.Run(ctx) }()
	addr := srv.l.Addr().String()

	// closedWithin reads from conn until the server closes it (EOF), or fails after d.
	closedWithin := func(what string, conn net.Conn, d time.Duration) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(d))
		buf := make([]byte, 4096)
		for {
			if _, err := conn.Read(buf); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("%s: the server still holds the connection after %s", what, d)
				}
				return
			}
		}
	}
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = idle.Close() }()
	if _, err := idle.Write([]byte("GET / HTTP/1.1\r\nHost: cascade\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	closedWithin("an idle keep-alive connection", idle, 3*time.Second)

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = slow.Close() }()
	if _, err := slow.Write([]byte("GET / HTTP/1.1\r\nHost: casc")); err != nil {
		t.Fatal(err)
	}
	closedWithin("a request whose headers never end", slow, 3*time.Second)
}

// TestThrottledLog: the servers' error log keeps the first line and then one line a period,
// counting what it left out, so that a flood of failed TLS handshakes is a few log lines.
func TestThrottledLog(t *testing.T) {
	l := &throttledLog{flag: "--test", every: time.Hour}
	for range 5 {
		if _, err := l.Write([]byte("http: TLS handshake error from 10.0.0.1:1234: EOF\n")); err != nil {
			t.Fatal(err)
		}
	}
	if l.dropped != 4 {
		t.Errorf("left out %d of 5 lines within the period, want 4 (the first is logged)", l.dropped)
	}
	l.last = time.Now().Add(-2 * time.Hour)
	_, _ = l.Write([]byte("again\n"))
	if l.dropped != 0 {
		t.Errorf("after the period the next line is logged and the count starts afresh; %d left out", l.dropped)
	}
}

// TestReviewClientBounded (issue 32.6): the serving port's reviews go through a client of their
// own that sends at most reviewsInFlight at once and refuses the next at once (the request
// being authenticated gets 401), so that a flood of forged tokens cannot queue without bound
// nor take the Lease renewals' and deletes' client.
func TestReviewClientBounded(t *testing.T) {
	release := make(chan struct{})
	var inFlight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		inFlight.Add(-1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":false}}`))
	}))
	defer srv.Close()
	kube, err := reviewClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	review := func() error {
		_, err := kube.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "forged"}}, metav1.CreateOptions{})
		return err
	}
	var wg sync.WaitGroup
	for range reviewsInFlight {
		wg.Go(func() { _ = review() })
	}
	deadline := time.Now().Add(10 * time.Second)
	for inFlight.Load() < reviewsInFlight && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := review(); !errors.Is(err, errReviewsBusy) {
		t.Errorf("review %d while %d are in flight: %v, want %v", reviewsInFlight+1, reviewsInFlight, err, errReviewsBusy)
	}
	close(release)
	wg.Wait()
	if m := most.Load(); m != reviewsInFlight {
		t.Errorf("%d reviews reached the API server at once, want %d", m, reviewsInFlight)
	}
	if err := review(); err != nil {
		t.Errorf("a review once the others are answered: %v", err)
	}
}

// TestRefusedRequestsCounted: every request the access gate refuses is counted by code.
func TestRefusedRequestsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := &accessGate{
		authn: authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
			if r.Header.Get("Authorization") == "" {
				return nil, false, nil
			}
			return &authenticator.Response{User: &user.DefaultInfo{Name: "mallory"}}, true, nil
		}),
		authz: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionDeny, "no", nil
		}),
		refused: newRefusedRequests(reg),
	}
	h := g.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a refused request reached the handler") }))
	for _, auth := range []string{"", "", "Bearer x"} {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if got := testutil.ToFloat64(g.refused.WithLabelValues("401")); got != 2 {
		t.Errorf("401s counted: %v, want 2", got)
	}
	if got := testutil.ToFloat64(g.refused.WithLabelValues("403")); got != 1 {
		t.Errorf("403s counted: %v, want 1", got)
	}
}
