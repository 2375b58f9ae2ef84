// Package harness starts a real local control plane (etcd and kube-apiserver built from pinned
// Go modules into bin/) for cascade's e2e tests, benchmarks and `make run`.
//
// Start picks free loopback ports, generates a service-account key, a token file for an
// admin user and a front proxy's CA and client certificate (for aggregated APIs), runs etcd and
// kube-apiserver (RBAC authorization, the default admission plugins)
// in a temporary directory, waits for /readyz and writes a kubeconfig. Stop ends every child
// and removes the directory unless asked to keep it. Children die with the harness process
// (see Process), so a panicking or killed test leaves nothing behind.
package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AdminUser is the user the generated token authenticates as; it is in system:masters.
const AdminUser = "cascade-admin"

// Options configures Start.
type Options struct {
	// BinDir holds etcd and kube-apiserver. Default: $CASCADE_BIN_DIR, else bin/ at the
	// repository root found by walking up from the working directory.
	BinDir string
	// Dir is the working directory for data, certificates, logs and the kubeconfig. Default: a
	// new temporary directory, removed by Stop unless KeepDir is set.
	Dir     string
	KeepDir bool
	// ReadyTimeout bounds the wait for /readyz. Default 90 s (the apiserver is usually ready
	// in about 5 s; the margin is for busy 2-core CI machines).
	ReadyTimeout time.Duration
	// ExtraAPIServerArgs are appended to kube-apiserver's flags.
	ExtraAPIServerArgs []string
	// SharedEtcd, when set, is the client URL of another control plane's etcd: no etcd is
	// started, and kube-apiserver keeps its data under EtcdPrefix there (a fleet's members on
	// one etcd, as hosted control planes run them). The etcd is the other's to stop.
	SharedEtcd string
	EtcdPrefix string
}

// ControlPlane is a running etcd plus kube-apiserver.
type ControlPlane struct {
	Dir            string
	BinDir         string
	KubeconfigPath string
	// URL is the apiserver's https address; Token the admin bearer token.
	URL   string
	Token string
	// CAFile holds the apiserver's self-signed serving certificate chain.
	CAFile string
	// SAKeyFile is the service-account signing key (also what kube-controller-manager needs).
	SAKeyFile string
	// The front proxy: kube-apiserver forwards requests to aggregated APIs with the client
	// certificate ProxyClientCertFile (ProxyClientKeyFile; common name FrontProxyClientName),
	// signed by FrontProxyCAFile, and the user in X-Remote-User, X-Remote-Group and
	// X-Remote-Extra-* headers; it publishes the CA, the name and the headers in
	// kube-system/extension-apiserver-authentication for aggregated API servers to read.
	FrontProxyCAFile, ProxyClientCertFile, ProxyClientKeyFile string
	// EtcdURL is etcd's client address (plain HTTP on loopback).
	EtcdURL string

	Etcd      *Process
	APIServer *Process

	keepDir bool
	extra   []*Process
	// The flags etcd and kube-apiserver were started with, for RestartEtcd and
	// RestartAPIServer (same ports, same data, same certificates).
	etcdArgs, apiArgs []string
	// baseAPIArgs are apiArgs without Options.ExtraAPIServerArgs (RestartAPIServerWith).
	baseAPIArgs []string
}

// Start builds nothing: it expects the binaries to exist (`make tools`).
func Start(ctx context.Context, opts Options) (cp *ControlPlane, err error) {
	binDir, err := resolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make tools` first", b, binDir)
		}
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cascade-cp-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 90 * time.Second
	}
	cp = &ControlPlane{Dir: dir, BinDir: binDir, keepDir: opts.KeepDir || opts.Dir != ""}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, cp.LogTails(30))
			cp.keepDir = true // keep the logs of a failed start
			_ = cp.Stop()
			err = fmt.Errorf("%w\n(logs kept in %s)", err, dir)
			cp = nil
		}
	}()

	ports, err := freePorts(3)
	if err != nil {
		return cp, err
	}
	etcdClient, etcdPeer, securePort := ports[0], ports[1], ports[2]

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	if opts.SharedEtcd != "" {
		etcdURL = opts.SharedEtcd
	}
	cp.EtcdURL = etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	cp.etcdArgs = []string{
		"--name=cascade",
		"--data-dir=" + filepath.Join(dir, "etcd-data"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=cascade=" + peerURL,
		"--unsafe-no-fsync=true", // test data only; fsync dominates on small CI disks
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	}
	if opts.SharedEtcd == "" {
		cp.Etcd, err = StartProcess(dir, "etcd", filepath.Join(binDir, "etcd"), cp.etcdArgs, ProcessOptions{})
		if err != nil {
			return cp, err
		}
	}

	cp.Token, err = randomHex(24)
	if err != nil {
		return cp, err
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", cp.Token, AdminUser, AdminUser)), 0o600); err != nil {
		return cp, err
	}
	cp.SAKeyFile = filepath.Join(dir, "sa.key")
	saPub := filepath.Join(dir, "sa.pub")
	if err := writeServiceAccountKey(cp.SAKeyFile, saPub); err != nil {
		return cp, err
	}
	cp.FrontProxyCAFile = filepath.Join(dir, "front-proxy-ca.crt")
	cp.ProxyClientCertFile = filepath.Join(dir, "front-proxy-client.crt")
	cp.ProxyClientKeyFile = filepath.Join(dir, "front-proxy-client.key")
	if err := writeFrontProxyCerts(cp.FrontProxyCAFile, cp.ProxyClientCertFile, cp.ProxyClientKeyFile); err != nil {
		return cp, fmt.Errorf("front-proxy certificates: %w", err)
	}
	certDir := filepath.Join(dir, "certs")
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(securePort),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + cp.SAKeyFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--enable-garbage-collector=true", // the apiserver sets orphan/foregroundDeletion finalizers
		"--allow-privileged=true",
		// The front proxy, for aggregated APIs (APIServices served by a test's process, cascade's
		// debug.cascade.dev); with no kube-proxy here, the API server dials an APIService's
		// endpoint itself rather than its Service's cluster IP.
		"--requestheader-client-ca-file=" + cp.FrontProxyCAFile,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + cp.ProxyClientCertFile,
		"--proxy-client-key-file=" + cp.ProxyClientKeyFile,
		"--enable-aggregator-routing=true",
		"--profiling=false",
		"--v=1",
	}
	// From Kubernetes 1.37 on, kube-apiserver refuses a loopback --advertise-address while it
	// reconciles the kubernetes Service's endpoints ("may not be in the loopback range"); a
	// local control plane has nothing to reconcile them to, so that reconciler is off there.
	if loopbackRefused(filepath.Join(binDir, "kube-apiserver")) {
		args = append(args, "--endpoint-reconciler-type=none")
	}
	if opts.EtcdPrefix != "" {
		args = append(args, "--etcd-prefix="+opts.EtcdPrefix)
	}
	cp.baseAPIArgs = args
	args = append(slices.Clone(args), opts.ExtraAPIServerArgs...)
	cp.apiArgs = args
	cp.APIServer, err = StartProcess(dir, "kube-apiserver", filepath.Join(binDir, "kube-apiserver"), args, ProcessOptions{})
	if err != nil {
		return cp, err
	}
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(securePort)
	cp.CAFile = filepath.Join(certDir, "apiserver.crt")

	readyCtx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if err := cp.waitReady(readyCtx); err != nil {
		return cp, err
	}
	cp.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := cp.WriteKubeconfig(cp.KubeconfigPath, AdminUser, cp.Token); err != nil {
		return cp, err
	}
	return cp, nil
}

// RestConfig returns a client config for the admin user.
func (cp *ControlPlane) RestConfig() *rest.Config {
	return &rest.Config{
		Host:            cp.URL,
		BearerToken:     cp.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile},
		QPS:             -1, // tests and benchmarks measure cascade, not client-side throttling
	}
}

// Track registers another process (cascade, kube-controller-manager) to be stopped by Stop.
func (cp *ControlPlane) Track(p *Process) { cp.extra = append(cp.extra, p) }

// Stop ends tracked processes, then kube-apiserver, then etcd, and removes the directory unless
// it is kept. Safe to call more than once.
func (cp *ControlPlane) Stop() error {
	if cp == nil {
		return nil
	}
	for i := len(cp.extra) - 1; i >= 0; i-- {
		_ = cp.extra[i].Stop(10 * time.Second)
	}
	if cp.APIServer != nil {
		_ = cp.APIServer.Stop(15 * time.Second)
	}
	if cp.Etcd != nil {
		_ = cp.Etcd.Stop(10 * time.Second)
	}
	if !cp.keepDir {
		return os.RemoveAll(cp.Dir)
	}
	return nil
}

// RestartAPIServer ends kube-apiserver with sig (SIGTERM: graceful, SIGKILL: a crash), starts
// it again with the same flags (same port, certificates, token file and etcd), and waits for
// /readyz. Clients keep working across it: the serving certificate stays in the cert directory.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, sig syscall.Signal) error {
	if err := stopWith(cp.APIServer, sig); err != nil {
		return err
	}
	p, err := StartProcess(cp.Dir, "kube-apiserver", filepath.Join(cp.BinDir, "kube-apiserver"), cp.apiArgs, ProcessOptions{})
	if err != nil {
		return err
	}
	cp.APIServer = p
	return cp.waitReady(ctx)
}

// RestartAPIServerAfter is RestartAPIServer with down run while kube-apiserver is down (a
// test's checks of what happens meanwhile).
func (cp *ControlPlane) RestartAPIServerAfter(ctx context.Context, sig syscall.Signal, down func()) error {
	if err := stopWith(cp.APIServer, sig); err != nil {
		return err
	}
	down()
	p, err := StartProcess(cp.Dir, "kube-apiserver", filepath.Join(cp.BinDir, "kube-apiserver"), cp.apiArgs, ProcessOptions{})
	if err != nil {
		return err
	}
	cp.APIServer = p
	return cp.waitReady(ctx)
}

// RestartAPIServerWith is RestartAPIServer with extra in place of the ExtraAPIServerArgs the
// control plane was started with (or last restarted with): the same server reconfigured, as an
// upgrade turns on a feature (--runtime-config, --feature-gates).
func (cp *ControlPlane) RestartAPIServerWith(ctx context.Context, sig syscall.Signal, extra []string) error {
	cp.apiArgs = append(slices.Clone(cp.baseAPIArgs), extra...)
	return cp.RestartAPIServer(ctx, sig)
}

// RestartEtcd ends etcd with sig, starts it again on the same ports and data directory, and
// waits until kube-apiserver answers /readyz again (it reconnects by itself).
func (cp *ControlPlane) RestartEtcd(ctx context.Context, sig syscall.Signal) error {
	if err := stopWith(cp.Etcd, sig); err != nil {
		return err
	}
	p, err := StartProcess(cp.Dir, "etcd", filepath.Join(cp.BinDir, "etcd"), cp.etcdArgs, ProcessOptions{})
	if err != nil {
		return err
	}
	cp.Etcd = p
	return cp.waitReady(ctx)
}

// stopWith sends sig to p's process group and waits for it to exit (SIGKILL after 15 s).
func stopWith(p *Process, sig syscall.Signal) error {
	p.stopMu.Lock()
	p.stopped = true
	p.stopMu.Unlock()
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("signal %s: %w", p.Name, err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.Signal(syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// LogTails returns the last n lines of every child's log, each under a header.
func (cp *ControlPlane) LogTails(n int) string {
	var b strings.Builder
	for _, p := range append([]*Process{cp.Etcd, cp.APIServer}, cp.extra...) {
		if p == nil {
			continue
		}
		fmt.Fprintf(&b, "----- last %d lines of %s -----\n%s\n", n, p.LogPath, p.Tail(n))
	}
	return b.String()
}

func (cp *ControlPlane) waitReady(ctx context.Context) error {
	client := &http.Client{
		Timeout: 5 * time.Second,
		// The serving certificate is generated by the apiserver as it starts, so the CA is not
		// known before /readyz first answers; readiness is all this client checks.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec
	}
	var last string
	for {
		for _, p := range []*Process{cp.Etcd, cp.APIServer} {
			if p == nil {
				continue // a shared etcd (SharedEtcd) is another control plane's
			}
			if exited, werr := p.Exited(); exited {
				return fmt.Errorf("%s exited while waiting for /readyz: %v", p.Name, werr)
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.Token)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready at %s/readyz (last answer: %s): %w", cp.URL, last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WriteKubeconfig writes a kubeconfig for this control plane that authenticates user with a
// bearer token (the admin's, or a service account's from the TokenRequest API).
func (cp *ControlPlane) WriteKubeconfig(path, user, token string) error {
	ca, err := os.ReadFile(cp.CAFile)
	if err != nil {
		return fmt.Errorf("read apiserver certificate: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("CASCADE_BIN_DIR")
	}
	if dir != "" {
		return filepath.Abs(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// RepoRoot walks up from the working directory to the directory holding cascade's go.mod.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			strings.HasPrefix(string(data), "module github.com/cascade-gc/cascade\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("cannot find cascade's repository root (go.mod) above " + wd + "; set CASCADE_BIN_DIR")
		}
	}
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreePorts returns n distinct loopback ports that were free a moment ago.
func FreePorts(n int) ([]int, error) { return freePorts(n) }

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	p, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// FrontProxyClientName is the common name of kube-apiserver's front-proxy client certificate,
// the one name an aggregated API server accepts it with (--requestheader-allowed-names).
const FrontProxyClientName = "front-proxy-client"

// writeFrontProxyCerts writes a new CA (caPath) and a client certificate it signs for
// FrontProxyClientName (certPath, keyPath), valid for a day: a control plane lives for a test run.
func writeFrontProxyCerts(caPath, certPath, keyPath string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cascade-e2e-front-proxy-ca"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: FrontProxyClientName},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	for path, block := range map[string]*pem.Block{
		caPath:   {Type: "CERTIFICATE", Bytes: caDER},
		certPath: {Type: "CERTIFICATE", Bytes: der},
		keyPath:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func writeServiceAccountKey(keyPath, pubPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubPath, pubPEM, 0o644)
}
