package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/cascade-gc/cascade/internal/client"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: ca.crt
users:
- name: u
  user:
    token: secret-token
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

// TestSecretsProviderMembers: multicluster-runtime's Secrets are members named after the Secret
// (key kubeconfig); Cluster API's only when typed, named and labelled by its convention (key
// value), named after the cluster. Anything else is no member.
func TestSecretsProviderMembers(t *testing.T) {
	secret := func(name, typ string, labels map[string]string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, Labels: labels}, Type: corev1.SecretType(typ), Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	mcr := &secretsProvider{namespace: "fleet", selector: defaultFleetSecretsSelector}
	capi := &secretsProvider{namespace: "fleet", clusterAPI: true}
	for _, tt := range []struct {
		what string
		p    *secretsProvider
		s    *corev1.Secret
		want string // member name, "" for none
	}{
		{"kubeconfig secret", mcr, secret("tenant-a", "Opaque", nil, map[string]string{"kubeconfig": testKubeconfig}), "tenant-a"},
		{"kubeconfig secret without the key", mcr, secret("tenant-b", "Opaque", nil, map[string]string{"config": testKubeconfig}), ""},
		{"cluster api", capi, secret("prod-kubeconfig", capiSecretType, map[string]string{capiClusterLabel: "prod"}, map[string]string{"value": testKubeconfig}), "prod"},
		{"cluster api, other name", capi, secret("prod-admin", capiSecretType, map[string]string{capiClusterLabel: "prod"}, map[string]string{"value": testKubeconfig}), ""},
		{"cluster api, untyped", capi, secret("prod-kubeconfig", "Opaque", map[string]string{capiClusterLabel: "prod"}, map[string]string{"value": testKubeconfig}), ""},
		{"cluster api, unlabelled", capi, secret("prod-kubeconfig", capiSecretType, nil, map[string]string{"value": testKubeconfig}), ""},
	} {
		name, src, ok := tt.p.member(tt.s)
		if ok != (tt.want != "") || name != tt.want {
			t.Errorf("%s: member %q (%v), want %q", tt.what, name, ok, tt.want)
		}
		if ok && !strings.Contains(src.origin, "Secret fleet/") {
			t.Errorf("%s: origin %q", tt.what, src.origin)
		}
	}
}

// TestSecretsProviderFollowsChanges: the provider hands over the whole member set at start and
// after each change of the Secrets: added, rotated, removed.
func TestSecretsProviderFollowsChanges(t *testing.T) {
	kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "a"}, Data: map[string][]byte{"kubeconfig": []byte("one")}})
	p := &secretsProvider{client: kube, namespace: "fleet"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var sets []map[string]string
	go func() {
		_ = p.Run(ctx, func(set map[string]memberSource) {
			m := map[string]string{}
			for n, s := range set {
				m[n] = string(s.kubeconfig)
			}
			mu.Lock()
			sets = append(sets, m)
			mu.Unlock()
		})
	}()
	last := func() map[string]string {
		mu.Lock()
		defer mu.Unlock()
		if len(sets) == 0 {
			return nil
		}
		return sets[len(sets)-1]
	}
	waitFor := func(what string, ok func(map[string]string) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if ok(last()) {
				return
			}
		}
		t.Fatalf("%s: last member set %v", what, last())
	}
	waitFor("start", func(m map[string]string) bool { return m["a"] == "one" && len(m) == 1 })
	secrets := kube.CoreV1().Secrets("fleet")
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Data: map[string][]byte{"kubeconfig": []byte("two")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("added", func(m map[string]string) bool { return m["b"] == "two" && len(m) == 2 })
	if _, err := secrets.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string][]byte{"kubeconfig": []byte("rotated")}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("rotated", func(m map[string]string) bool { return m["a"] == "rotated" })
	if err := secrets.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("removed", func(m map[string]string) bool { _, ok := m["b"]; return !ok && len(m) == 1 })
}

// TestDirProvider: each regular file is a member named after it without its extension; hidden
// entries (a mounted Secret's ..data) and directories are not; relative paths in a kubeconfig
// resolve against the directory.
func TestDirProvider(t *testing.T) {
	dir := t.TempDir()
	// ca.crt is in a subdirectory: only the files of the directory itself are members.
	if err := os.Mkdir(filepath.Join(dir, "pki"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pki", "ca.crt"), []byte("a CA file: read, not parsed, when the config is built\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"tenant-a.kubeconfig": strings.Replace(testKubeconfig, "ca.crt", "pki/ca.crt", 1), "tenant-b": testKubeconfig, ".hidden": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "..data"), 0o755); err != nil {
		t.Fatal(err)
	}
	set, err := (&dirProvider{dir: dir}).read()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"tenant-a", "tenant-b"}) {
		t.Fatalf("members %v, want tenant-a, tenant-b", names)
	}
	cfg, err := memberRESTConfig(set["tenant-a"])
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret-token" || cfg.CAFile != filepath.Join(dir, "pki", "ca.crt") {
		t.Errorf("config: host %s, token %q, CA file %s; want the file's, the CA in %s", cfg.Host, cfg.BearerToken, cfg.CAFile, dir)
	}
}

// TestSummarizeMembers is /readyz's members line.
func TestSummarizeMembers(t *testing.T) {
	got := summarizeMembers([]memberState{{name: "a", up: true}, {name: "b", reason: "connection refused"}, {name: "c", up: true}})
	if want := "members: 2 synced, 1 not: b (connection refused)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got := summarizeMembers([]memberState{{name: "a", up: true}}); got != "members: 1 synced" {
		t.Errorf("%q", got)
	}
}

// TestFleetFlags: one provider at most, collector mode only, bounded member budgets.
func TestFleetFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		bad  string // the flag named in the error, "" for none
	}{
		{[]string{"--fleet-secrets-namespace=fleet"}, ""},
		{[]string{"--fleet-kubeconfig-dir=" + dir}, ""},
		{[]string{"--fleet-secrets-namespace=fleet", "--fleet-kubeconfig-dir=" + dir}, "--fleet-secrets-namespace"},
		{[]string{"--fleet-kubeconfig-dir=" + filepath.Join(dir, "missing")}, "--fleet-kubeconfig-dir"},
		{[]string{"--fleet-secrets-namespace=fleet", "--fleet-secrets-selector=a=(b"}, "--fleet-secrets-selector"},
		{[]string{"--fleet-secrets-namespace=fleet", "--mode=companion"}, "--mode"},
		{[]string{"--fleet-cluster-api-namespace=capi", "--fleet-member-workers=0"}, "--fleet-member-workers"},
		{[]string{"--fleet-secrets-namespace=fleet", "--fleet-member-qps=0"}, "--fleet-member-qps"},
	} {
		o := NewOptions()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		errs := o.Validate()
		got := ""
		for _, e := range errs {
			if strings.HasPrefix(e.Field, "--fleet") || e.Field == "--mode" {
				got = e.Field
			}
		}
		if got != tt.bad {
			t.Errorf("%v: error on %q (%v), want on %q", tt.args, got, errs, tt.bad)
		}
	}
}

// writeGuard refuses every request that writes while the shard may not be written, as the
// request leaves (after the client's rate limiter), and lets reads (lists and watches too)
// through; once writable, writes go.
func TestWriteGuard(t *testing.T) {
	var sent []string
	rt := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		sent = append(sent, req.Method)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	})
	var allowed error = errors.New("shard 2 not held")
	g := writeGuard{rt: rt, writable: func() error { return allowed }}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		req := httptest.NewRequest(method, "https://member.example/api/v1/namespaces/a/configmaps/b", nil)
		if _, err := g.RoundTrip(req); !errors.Is(err, client.ErrNotWritable) {
			t.Errorf("%s while not writable: %v, want ErrNotWritable", method, err)
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		req := httptest.NewRequest(method, "https://member.example/api/v1/configmaps?watch=true", nil)
		if _, err := g.RoundTrip(req); err != nil {
			t.Errorf("%s while not writable: %v, want it sent", method, err)
		}
	}
	if !slices.Equal(sent, []string{http.MethodGet, http.MethodHead, http.MethodOptions}) {
		t.Errorf("sent %v while not writable, want the reads only", sent)
	}
	allowed = nil
	req := httptest.NewRequest(http.MethodDelete, "https://member.example/api/v1/namespaces/a/configmaps/b", nil)
	if _, err := g.RoundTrip(req); err != nil || sent[len(sent)-1] != http.MethodDelete {
		t.Errorf("DELETE while writable: %v, sent %v", err, sent)
	}
}

// TestRemovedMemberClosesItsConnections: a member's HTTP client, built as runMemberOnce builds it
// (its dialer, the request counter and the write guard wrapped around client-go's transport),
// lets utilnet.CloseIdleConnectionsFor reach the transport under every wrapper, so the idle
// connection a stopped member leaves is closed at once (a wrapper that hid it kept the
// connection, its buffers and its transport for the transport's 90 s idle timeout).
func TestRemovedMemberClosesItsConnections(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") }))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return writeGuard{rt: rt, writable: func() error { return nil }}
	})
	cfg.Wrap(countRequests(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"method", "code"})))
	dialer := newMemberDialer()
	cfg.Dial = dialer.DialContext
	cs, err := newClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cs.hc.Get(srv.URL + "/version")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n := dialer.open(); n != 1 {
		t.Fatalf("%d connections open after a request, want 1", n)
	}
	utilnet.CloseIdleConnectionsFor(cs.hc.Transport)
	if n := dialer.open(); n != 0 {
		t.Errorf("%d connections open after closing the idle ones, want 0: a wrapper hides the transport", n)
	}
}
