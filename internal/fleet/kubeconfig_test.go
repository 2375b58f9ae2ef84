package fleet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Secrets the test kubeconfigs carry: no error may hold any of them.
const (
	secretToken    = "SECRET-TOKEN-5f2a"
	secretPassword = "SECRET-PASSWORD-9c1e"
	secretUserinfo = "alice:SECRET-URLPASS-77b3"
	secretKeyData  = "SECRET-KEY-DATA-0d4c"
	secretArg      = "SECRET-ARG-61aa"
	secretEnvValue = "SECRET-ENV-3e90"
)

var secrets = []string{secretToken, secretPassword, secretUserinfo, "SECRET-URLPASS", secretKeyData, secretArg, secretEnvValue}

// baseConfig is a kubeconfig that RESTConfig accepts: current context "member", cluster "c",
// user "u" with a token and client certificate data.
func baseConfig() *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{
		Server:                   "https://member.example:6443/prefix",
		CertificateAuthorityData: []byte("CA DATA"),
		TLSServerName:            "api.member.example",
	}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{
		Token:                 secretToken,
		ClientCertificateData: []byte("CERT DATA"),
		ClientKeyData:         []byte(secretKeyData),
	}
	kc.Contexts["member"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: "ignored"}
	kc.CurrentContext = "member"
	return kc
}

func write(t *testing.T, kc *clientcmdapi.Config) []byte {
	t.Helper()
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func assertNoSecret(t *testing.T, err error) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q holds the secret %q", err, s)
		}
	}
}

// TestRESTConfigRefuses proves each refused field is refused, by an error that wraps ErrRefused,
// names the field and holds none of the kubeconfig's secrets.
func TestRESTConfigRefuses(t *testing.T) {
	exec := func(command string, env ...clientcmdapi.ExecEnvVar) *clientcmdapi.ExecConfig {
		return &clientcmdapi.ExecConfig{
			Command:    command,
			Args:       []string{"--token", secretArg},
			Env:        append([]clientcmdapi.ExecEnvVar{{Name: "TOKEN", Value: secretEnvValue}}, env...),
			APIVersion: "client.authentication.k8s.io/v1",
		}
	}
	cases := []struct {
		name   string
		opts   KubeconfigOptions
		mutate func(kc *clientcmdapi.Config)
		want   string // in the error
	}{
		{"exec", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].Exec = exec("kubelogin")
		}, `user "u": exec would run the command "kubelogin" on cascade's host (allowed only with --fleet-insecure-kubeconfig-exec)`},
		{"exec not in the list", KubeconfigOptions{ExecCommands: []string{"kubelogin"}}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].Exec = exec("/bin/sh")
		}, `user "u": exec would run the command "/bin/sh" on cascade's host; it is not one of --fleet-insecure-kubeconfig-exec`},
		{"exec not exactly in the list", KubeconfigOptions{ExecCommands: []string{"kubelogin"}}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].Exec = exec("./kubelogin")
		}, `exec would run the command "./kubelogin"`},
		{"exec env LD_", KubeconfigOptions{ExecCommands: []string{"kubelogin"}}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].Exec = exec("kubelogin", clientcmdapi.ExecEnvVar{Name: "LD_PRELOAD", Value: "/tmp/" + secretEnvValue + ".so"})
		}, `user "u": exec env "LD_PRELOAD" would make the dynamic loader load other code into the plugin`},
		{"exec env DYLD_", KubeconfigOptions{ExecCommands: []string{"kubelogin"}}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].Exec = exec("kubelogin", clientcmdapi.ExecEnvVar{Name: "DYLD_INSERT_LIBRARIES", Value: secretEnvValue})
		}, `exec env "DYLD_INSERT_LIBRARIES"`},
		{"auth-provider", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": secretToken}}
		}, `user "u": auth-provider "oidc" would run an auth provider plugin`},
		{"tokenFile", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		}, `kubeconfig refused: user "u": tokenFile is a file path; only token data is accepted`},
		{"client-certificate", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].ClientCertificate = "/etc/kubernetes/pki/apiserver-kubelet-client.crt"
		}, `user "u": client-certificate is a file path; only client-certificate-data is accepted`},
		{"client-key", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].ClientKey = "/etc/kubernetes/pki/apiserver-kubelet-client.key"
		}, `user "u": client-key is a file path; only client-key-data is accepted`},
		{"certificate-authority", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].CertificateAuthority = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
		}, `cluster "c": certificate-authority is a file path; only certificate-authority-data is accepted`},
		{"proxy-url", KubeconfigOptions{InsecureTLS: true, ExecCommands: []string{"kubelogin"}}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].ProxyURL = "http://" + secretUserinfo + "@proxy.example:3128"
		}, `cluster "c": proxy-url would send the member's requests through another server`},
		{"insecure-skip-tls-verify", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].InsecureSkipTLSVerify = true
		}, `cluster "c": insecure-skip-tls-verify would trust any server certificate (allowed only with --fleet-insecure-kubeconfig-tls)`},
		{"username", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].Username = "admin"
		}, `user "u": username/password (basic auth) is not accepted`},
		{"password", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.AuthInfos["u"].Password = secretPassword
		}, `user "u": username/password (basic auth) is not accepted`},
		{"server userinfo", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = "https://" + secretUserinfo + "@member.example:6443"
		}, `cluster "c": server has credentials in its URL (userinfo)`},
		{"server userinfo, unparsable", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = "https://" + secretUserinfo + "@member.example:%zz"
		}, `cluster "c": server is not a URL`},
		{"server http", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = "http://member.example:8080"
		}, `cluster "c": server http://member.example:8080 is http://, its requests would go unencrypted (allowed only with --fleet-insecure-kubeconfig-tls)`},
		{"server scheme", KubeconfigOptions{InsecureTLS: true}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = "unix:///var/run/apiserver.sock"
		}, `scheme "unix": only https:// is accepted`},
		{"server without scheme", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = "member.example:6443"
		}, `only https:// is accepted`},
		{"server without host", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = "https:///prefix"
		}, `cluster "c": server https:///prefix has no host`},
		{"server query", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = "https://member.example/?token=" + secretToken
		}, `cluster "c": server https://member.example/ has a query or fragment`},
		{"server fragment", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = "https://member.example/#" + secretToken
		}, `has a query or fragment`},
		{"empty server", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = ""
		}, `cluster "c": no server`},
		{"credentials over http", KubeconfigOptions{InsecureTLS: true}, func(kc *clientcmdapi.Config) {
			kc.Clusters["c"].Server = "http://member.example:8080"
		}, `user "u": credentials for an http:// server would be sent unencrypted`},
		{"no current-context", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.CurrentContext = ""
		}, `kubeconfig refused: no current-context`},
		{"unknown current-context", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.CurrentContext = "other"
		}, `current-context "other": no such context`},
		{"context without cluster", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Contexts["member"].Cluster = ""
		}, `context "member": names no cluster`},
		{"context with a missing cluster", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Contexts["member"].Cluster = "gone"
		}, `context "member": cluster "gone": no such cluster`},
		{"context with a missing user", KubeconfigOptions{}, func(kc *clientcmdapi.Config) {
			kc.Contexts["member"].AuthInfo = "gone"
		}, `context "member": user "gone": no such user`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kc := baseConfig()
			tc.mutate(kc)
			cfg, err := RESTConfig(write(t, kc), tc.opts)
			if err == nil {
				t.Fatalf("RESTConfig accepted it: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("RESTConfig returned a config with its error")
			}
			if !errors.Is(err, ErrRefused) {
				t.Errorf("error %q does not wrap ErrRefused", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\ndoes not hold %q", err, tc.want)
			}
			assertNoSecret(t, err)
			t.Log(err)
		})
	}
}

func TestRESTConfigRefusesTooLarge(t *testing.T) {
	kc := baseConfig()
	kc.AuthInfos["u"].ClientCertificateData = make([]byte, MaxKubeconfigBytes)
	_, err := RESTConfig(write(t, kc), KubeconfigOptions{})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "more than the 1048576 (1 MiB) accepted") {
		t.Fatalf("error %v, want a refusal of its size", err)
	}
	assertNoSecret(t, err)
}

func TestRESTConfigUnparsableHidesContent(t *testing.T) {
	for _, kubeconfig := range []string{
		"users:\n- name: u\n  user:\n    token: [" + secretToken + "]\n",
		"users:\n- name: u\n  user:\n    client-key-data: " + secretKeyData + "!!\n",
		"users:\n- name: u\n  user:\n    token: \"" + secretToken + "\n",
		"users: " + secretToken + "\n",
	} {
		_, err := RESTConfig([]byte(kubeconfig), KubeconfigOptions{})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "cannot be parsed") {
			t.Errorf("error %v, want a refusal that it cannot be parsed", err)
			continue
		}
		assertNoSecret(t, err)
	}
}

// TestRESTConfigTokenFileReachesNothing: a kubeconfig naming cascade's own service account
// token is refused before anything is built, so its server receives no request.
func TestRESTConfigTokenFileReachesNothing(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
	}))
	defer srv.Close()
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + srv.URL + `
users:
- name: u
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
contexts:
- name: member
  context: {cluster: c, user: u}
current-context: member
`
	cfg, err := RESTConfig([]byte(kubeconfig), KubeconfigOptions{InsecureTLS: true})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "tokenFile") {
		t.Fatalf("RESTConfig = %v, %v; want tokenFile refused", cfg, err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the server received %d requests", n)
	}
}

// TestRESTConfigCopiesOnlyAllowed: the allowed fields are copied, nothing else is set.
func TestRESTConfigCopiesOnlyAllowed(t *testing.T) {
	kc := baseConfig()
	kc.Clusters["c"].DisableCompression = true
	kc.AuthInfos["u"].Impersonate = "bob"
	kc.AuthInfos["u"].ImpersonateUID = "1234"
	kc.AuthInfos["u"].ImpersonateGroups = []string{"team-a"}
	kc.AuthInfos["u"].ImpersonateUserExtra = map[string][]string{"scopes": {"view"}}
	cfg, err := RESTConfig(write(t, kc), KubeconfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := &rest.Config{
		Host:        "https://member.example:6443/prefix",
		BearerToken: secretToken,
		Impersonate: rest.ImpersonationConfig{
			UserName: "bob",
			UID:      "1234",
			Groups:   []string{"team-a"},
			Extra:    map[string][]string{"scopes": {"view"}},
		},
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: "api.member.example",
			CAData:     []byte("CA DATA"),
			CertData:   []byte("CERT DATA"),
			KeyData:    []byte(secretKeyData),
		},
		DisableCompression: true,
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("RESTConfig =\n%#v\nwant\n%#v", cfg, want)
	}
}

// TestRESTConfigIgnoresOtherContexts: what the current context does not name is not read.
func TestRESTConfigIgnoresOtherContexts(t *testing.T) {
	kc := baseConfig()
	kc.Clusters["other"] = &clientcmdapi.Cluster{Server: "http://x", CertificateAuthority: "/etc/ca", ProxyURL: "http://p"}
	kc.AuthInfos["other"] = &clientcmdapi.AuthInfo{TokenFile: "/etc/token", Exec: &clientcmdapi.ExecConfig{Command: "sh"}}
	kc.Contexts["other"] = &clientcmdapi.Context{Cluster: "other", AuthInfo: "other"}
	if _, err := RESTConfig(write(t, kc), KubeconfigOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRESTConfigAnonymous(t *testing.T) {
	kc := baseConfig()
	kc.Contexts["member"].AuthInfo = ""
	cfg, err := RESTConfig(write(t, kc), KubeconfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken != "" || cfg.CertData != nil || cfg.ExecProvider != nil {
		t.Errorf("an anonymous context got credentials: %#v", cfg)
	}
}

// TestRESTConfigInsecureTLS: the TLS opt-in allows insecure-skip-tls-verify and an http://
// server (without credentials), and nothing else.
func TestRESTConfigInsecureTLS(t *testing.T) {
	kc := baseConfig()
	kc.Clusters["c"].InsecureSkipTLSVerify = true
	kc.Clusters["c"].CertificateAuthorityData = nil
	cfg, err := RESTConfig(write(t, kc), KubeconfigOptions{InsecureTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Insecure {
		t.Errorf("Insecure = false, want true")
	}

	kc = baseConfig()
	kc.Clusters["c"].Server = "http://member.example:8080"
	kc.Contexts["member"].AuthInfo = ""
	cfg, err = RESTConfig(write(t, kc), KubeconfigOptions{InsecureTLS: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "http://member.example:8080" {
		t.Errorf("Host = %q", cfg.Host)
	}
}

// TestRESTConfigExecAllowed: an allowed exec plugin is copied with cascade's constraints and
// client-go's plugin policy set to the same allowlist.
func TestRESTConfigExecAllowed(t *testing.T) {
	kc := baseConfig()
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		Command:            "kubelogin",
		Args:               []string{"get-token", "--server-id", "x"},
		Env:                []clientcmdapi.ExecEnvVar{{Name: "AZURE_ENVIRONMENT", Value: "AzurePublicCloud"}},
		APIVersion:         "client.authentication.k8s.io/v1",
		InstallHint:        "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07",
		ProvideClusterInfo: true,
		InteractiveMode:    clientcmdapi.AlwaysExecInteractiveMode,
	}}
	kc.Clusters["c"].Extensions = map[string]runtime.Object{
		execExtension: &runtime.Unknown{Raw: []byte(`{"audience":"member"}`), ContentType: runtime.ContentTypeJSON},
	}
	cfg, err := RESTConfig(write(t, kc), KubeconfigOptions{ExecCommands: []string{"", "aws", "kubelogin"}})
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.ExecProvider
	if e == nil {
		t.Fatal("no ExecProvider")
	}
	if e.Command != "kubelogin" || !slices.Equal(e.Args, []string{"get-token", "--server-id", "x"}) ||
		len(e.Env) != 1 || e.Env[0].Name != "AZURE_ENVIRONMENT" || e.APIVersion != "client.authentication.k8s.io/v1" ||
		!e.ProvideClusterInfo {
		t.Errorf("ExecProvider = %#v: not the kubeconfig's", e)
	}
	if e.InteractiveMode != clientcmdapi.NeverExecInteractiveMode || !e.StdinUnavailable {
		t.Errorf("InteractiveMode = %q, StdinUnavailable = %v; want Never, true", e.InteractiveMode, e.StdinUnavailable)
	}
	if e.InstallHint != "" {
		t.Errorf("InstallHint = %q, want it dropped", e.InstallHint)
	}
	wantPolicy := clientcmdapi.PluginPolicy{
		PolicyType: clientcmdapi.PluginPolicyAllowlist,
		Allowlist:  []clientcmdapi.AllowlistEntry{{Command: "aws"}, {Command: "kubelogin"}},
	}
	if !reflect.DeepEqual(e.PluginPolicy, wantPolicy) {
		t.Errorf("PluginPolicy = %#v, want %#v", e.PluginPolicy, wantPolicy)
	}
	if u, ok := e.Config.(*runtime.Unknown); !ok || string(u.Raw) != `{"audience":"member"}` {
		t.Errorf("Config = %#v, want the cluster's exec extension", e.Config)
	}
}

// TestRESTConfigExecRuns: client-go runs an allowed plugin under the plugin policy RESTConfig
// sets, and sends the token it prints.
func TestRESTConfigExecRuns(t *testing.T) {
	plugin := filepath.Join(t.TempDir(), "plugin")
	writeFile(t, plugin, "#!/bin/sh\n"+
		`echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"PLUGIN-TOKEN"}}'`+"\n")
	if err := os.Chmod(plugin, 0o700); err != nil {
		t.Fatal(err)
	}
	var auth atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
	}))
	defer srv.Close()

	kc := baseConfig()
	kc.Clusters["c"].Server = srv.URL
	kc.Clusters["c"].CertificateAuthorityData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc.Clusters["c"].TLSServerName = ""
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		Command:    plugin,
		APIVersion: "client.authentication.k8s.io/v1",
	}}
	cfg, err := RESTConfig(write(t, kc), KubeconfigOptions{ExecCommands: []string{plugin}})
	if err != nil {
		t.Fatal(err)
	}
	getVersion(t, cfg, srv.URL)
	if got := auth.Load(); got != "Bearer PLUGIN-TOKEN" {
		t.Errorf("Authorization = %q, want the plugin's token", got)
	}
}

// TestRESTConfigWorks: a config RESTConfig builds reaches a TLS server it has the CA of, by the
// tls-server-name, with the token, the client certificate and the impersonation headers.
func TestRESTConfigWorks(t *testing.T) {
	clientCert, clientKey := selfSigned(t)
	var got atomic.Pointer[http.Request]
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	kc := baseConfig()
	kc.Clusters["c"].Server = srv.URL
	kc.Clusters["c"].CertificateAuthorityData = ca
	kc.Clusters["c"].TLSServerName = "example.com" // httptest's certificate names it
	kc.AuthInfos["u"].ClientCertificateData = clientCert
	kc.AuthInfos["u"].ClientKeyData = clientKey
	kc.AuthInfos["u"].Impersonate = "bob"
	cfg, err := RESTConfig(write(t, kc), KubeconfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp := getVersion(t, cfg, srv.URL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := got.Load()
	if h := r.Header.Get("Authorization"); h != "Bearer "+secretToken {
		t.Errorf("Authorization = %q, want the token", h)
	}
	if h := r.Header.Get("Impersonate-User"); h != "bob" {
		t.Errorf("Impersonate-User = %q, want bob", h)
	}
	if len(r.TLS.PeerCertificates) != 1 || r.TLS.PeerCertificates[0].Subject.CommonName != "member-client" {
		t.Errorf("the client certificate did not reach the server")
	}
	if r.TLS.ServerName != "example.com" {
		t.Errorf("SNI = %q, want example.com", r.TLS.ServerName)
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "member-client"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// TestLoadReadsNoFiles: clientcmd.Load only parses. The paths stay paths, no file is read
// (even when it exists), and a missing one is no error.
func TestLoadReadsNoFiles(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("FILE-TOKEN"), 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load([]byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://member.example
    certificate-authority: ` + filepath.Join(dir, "missing-ca.crt") + `
users:
- name: u
  user:
    tokenFile: ` + token + `
    client-certificate: relative.crt
contexts:
- name: member
  context: {cluster: c, user: u}
current-context: member
`))
	if err != nil {
		t.Fatal(err)
	}
	c, u := kc.Clusters["c"], kc.AuthInfos["u"]
	if c.CertificateAuthorityData != nil || u.Token != "" || u.ClientCertificateData != nil {
		t.Errorf("Load read a file: %#v %#v", c, u)
	}
	if u.TokenFile != token || u.ClientCertificate != "relative.crt" || c.LocationOfOrigin != "" {
		t.Errorf("Load changed a path: %#v %#v", c, u)
	}
}

// TestEveryFieldDecided fails when client-go adds a field to a kubeconfig's cluster, user or
// exec config: RESTConfig must then decide whether to copy, refuse or ignore it.
func TestEveryFieldDecided(t *testing.T) {
	decided := map[reflect.Type][]string{
		reflect.TypeFor[clientcmdapi.Cluster](): {
			"LocationOfOrigin", "Server", "TLSServerName", "InsecureSkipTLSVerify", "CertificateAuthority",
			"CertificateAuthorityData", "ProxyURL", "DisableCompression", "Extensions",
		},
		reflect.TypeFor[clientcmdapi.AuthInfo](): {
			"LocationOfOrigin", "ClientCertificate", "ClientCertificateData", "ClientKey", "ClientKeyData",
			"Token", "TokenFile", "Impersonate", "ImpersonateUID", "ImpersonateGroups", "ImpersonateUserExtra",
			"Username", "Password", "AuthProvider", "Exec", "Extensions",
		},
		reflect.TypeFor[clientcmdapi.ExecConfig](): {
			"Command", "Args", "Env", "APIVersion", "InstallHint", "ProvideClusterInfo", "Config",
			"InteractiveMode", "StdinUnavailable", "StdinUnavailableMessage", "PluginPolicy",
		},
		reflect.TypeFor[clientcmdapi.Context](): {"LocationOfOrigin", "Cluster", "AuthInfo", "Namespace", "Extensions"},
	}
	for typ, names := range decided {
		for i := range typ.NumField() {
			if f := typ.Field(i); !slices.Contains(names, f.Name) {
				t.Errorf("%s.%s: a field RESTConfig does not know", typ, f.Name)
			}
		}
	}
}

// inlineDir is a directory for InlineFiles tests and another one beside it, outside it.
func inlineDir(t *testing.T) (dir, outside string) {
	t.Helper()
	base := t.TempDir()
	dir, outside = filepath.Join(base, "fleet"), filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir, outside
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// fileConfig is a kubeconfig that names its CA, client certificate, key and token by path.
func fileConfig(t *testing.T, ca, cert, key, token string) []byte {
	t.Helper()
	kc := baseConfig()
	kc.Clusters["c"].CertificateAuthorityData = nil
	kc.Clusters["c"].CertificateAuthority = ca
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key, TokenFile: token}
	return write(t, kc)
}

func TestInlineFilesRelativeInside(t *testing.T) {
	dir, _ := inlineDir(t)
	writeFile(t, filepath.Join(dir, "ca.crt"), "CA FILE")
	writeFile(t, filepath.Join(dir, "certs", "client.crt"), "CERT FILE")
	writeFile(t, filepath.Join(dir, "certs", "client.key"), "KEY FILE")
	writeFile(t, filepath.Join(dir, "token"), "FILE-TOKEN\n")

	out, err := InlineFiles(fileConfig(t, "ca.crt", "certs/client.crt", "./certs/../certs/client.key", filepath.Join(dir, "token")), dir)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	c, u := kc.Clusters["c"], kc.AuthInfos["u"]
	if string(c.CertificateAuthorityData) != "CA FILE" || c.CertificateAuthority != "" {
		t.Errorf("cluster = %#v, want the CA inlined", c)
	}
	if string(u.ClientCertificateData) != "CERT FILE" || string(u.ClientKeyData) != "KEY FILE" ||
		u.Token != "FILE-TOKEN" || u.ClientCertificate != "" || u.ClientKey != "" || u.TokenFile != "" {
		t.Errorf("user = %#v, want its files inlined (the token trimmed)", u)
	}
	if _, err := RESTConfig(out, KubeconfigOptions{}); err != nil {
		t.Errorf("RESTConfig refused InlineFiles' output: %v", err)
	}

	// A rotated file is another kubeconfig.
	writeFile(t, filepath.Join(dir, "token"), "ROTATED-TOKEN")
	again, err := InlineFiles(fileConfig(t, "ca.crt", "certs/client.crt", "certs/client.key", "token"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) == string(out) {
		t.Errorf("a rotated token file left the output as it was")
	}
}

func TestInlineFilesAbsoluteOutside(t *testing.T) {
	dir, outside := inlineDir(t)
	writeFile(t, filepath.Join(outside, "ca.crt"), "CA FILE")
	_, err := InlineFiles(fileConfig(t, filepath.Join(outside, "ca.crt"), "", "", ""), dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `cluster "c": certificate-authority`) ||
		!strings.Contains(err.Error(), "is outside the directory") {
		t.Fatalf("error %v, want certificate-authority refused as outside", err)
	}
	_, err = InlineFiles(fileConfig(t, "", "", "", "/var/run/secrets/kubernetes.io/serviceaccount/token"), dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `user "u": tokenFile`) {
		t.Fatalf("error %v, want tokenFile refused as outside", err)
	}
}

func TestInlineFilesDotDotEscape(t *testing.T) {
	dir, outside := inlineDir(t)
	writeFile(t, filepath.Join(outside, "client.key"), "KEY FILE")
	_, err := InlineFiles(fileConfig(t, "", "", "../outside/client.key", ""), dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `user "u": client-key "../outside/client.key" is outside the directory`) {
		t.Fatalf("error %v, want client-key refused as outside", err)
	}
	_, err = InlineFiles(fileConfig(t, "", filepath.Join(dir, "..", "outside", "client.key"), "", ""), dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `client-certificate`) {
		t.Fatalf("error %v, want client-certificate refused as outside", err)
	}
}

func TestInlineFilesSymlinkOutside(t *testing.T) {
	dir, outside := inlineDir(t)
	writeFile(t, filepath.Join(outside, "token"), "OUTSIDE-TOKEN")
	symlink(t, filepath.Join(outside, "token"), filepath.Join(dir, "token"))
	symlink(t, "../outside", filepath.Join(dir, "certs"))
	writeFile(t, filepath.Join(outside, "ca.crt"), "CA FILE")

	out, err := InlineFiles(fileConfig(t, "", "", "", "token"), dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `user "u": tokenFile "token" is a link to`) {
		t.Fatalf("InlineFiles = %q, %v; want tokenFile refused as a link outside", out, err)
	}
	if strings.Contains(err.Error(), "OUTSIDE-TOKEN") {
		t.Errorf("error %q holds the file's content", err)
	}
	_, err = InlineFiles(fileConfig(t, "certs/ca.crt", "", "", ""), dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `cluster "c": certificate-authority "certs/ca.crt" is a link to`) {
		t.Fatalf("error %v; want certificate-authority refused as a link outside", err)
	}
}

// TestInlineFilesSecretMount: a mounted Secret's layout, whose files are links through ..data
// to a timestamped directory, all inside the mount, is read; and so is a directory that is
// itself reached through a link.
func TestInlineFilesSecretMount(t *testing.T) {
	dir, outside := inlineDir(t)
	writeFile(t, filepath.Join(dir, "..2026_01_02_03_04_05.123", "ca.crt"), "CA FILE")
	writeFile(t, filepath.Join(dir, "..2026_01_02_03_04_05.123", "token"), "FILE-TOKEN")
	symlink(t, "..2026_01_02_03_04_05.123", filepath.Join(dir, "..data"))
	symlink(t, "..data/ca.crt", filepath.Join(dir, "ca.crt"))
	symlink(t, "..data/token", filepath.Join(dir, "token"))

	for _, d := range []string{dir, filepath.Join(outside, "link")} {
		if d != dir {
			symlink(t, dir, d)
		}
		out, err := InlineFiles(fileConfig(t, "ca.crt", "", "", filepath.Join(d, "token")), d)
		if err != nil {
			t.Fatalf("InlineFiles(%s): %v", d, err)
		}
		kc, err := clientcmd.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		if string(kc.Clusters["c"].CertificateAuthorityData) != "CA FILE" || kc.AuthInfos["u"].Token != "FILE-TOKEN" {
			t.Errorf("InlineFiles(%s) = %s", d, out)
		}
	}
}

func TestInlineFilesBothPathAndData(t *testing.T) {
	dir, _ := inlineDir(t)
	writeFile(t, filepath.Join(dir, "token"), "FILE-TOKEN")
	kc := baseConfig()
	kc.AuthInfos["u"].TokenFile = "token"
	_, err := InlineFiles(write(t, kc), dir)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `user "u": both tokenFile and token`) {
		t.Fatalf("error %v, want tokenFile and token refused together", err)
	}
	assertNoSecret(t, err)
}

func TestInlineFilesMissingFile(t *testing.T) {
	dir, _ := inlineDir(t)
	_, err := InlineFiles(fileConfig(t, "ca.crt", "", "", ""), dir)
	if err == nil || !strings.Contains(err.Error(), `cluster "c": certificate-authority "ca.crt"`) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v, want the missing certificate-authority named", err)
	}
}

// TestInlineFilesKeepsTheRest: a kubeconfig without paths comes out as it went in.
func TestInlineFilesKeepsTheRest(t *testing.T) {
	dir, _ := inlineDir(t)
	kc := baseConfig()
	kc.Clusters["c"].Extensions = map[string]runtime.Object{
		execExtension: &runtime.Unknown{Raw: []byte(`{"audience":"member"}`), ContentType: runtime.ContentTypeJSON},
	}
	in := write(t, kc)
	out, err := InlineFiles(in, dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(in) {
		t.Errorf("InlineFiles =\n%s\nwant\n%s", out, in)
	}
}

// getVersion sends GET server/version with a client built on cfg and returns its answer, the
// body closed.
func getVersion(t *testing.T, cfg *rest.Config, server string) *http.Response {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(server + "/version")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp
}
