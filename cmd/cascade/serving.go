package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/work"
)

// shutdownGrace bounds how long a server finishes its requests once cascade stops.
const shutdownGrace = 10 * time.Second

// server is one HTTP listener; it listens when built, so a taken port is an error before any
// work starts, and Run serves until ctx ends. With tls set it serves HTTPS only.
type server struct {
	flag string
	l    net.Listener
	s    *http.Server
	tls  *servingCert
	// background runs beside the server until ctx ends (the access gate's front-proxy
	// configuration, kept current from the API server).
	background []func(context.Context)
}

// newServer listens on addr for the flag named flagName; nil for "0" (disabled).
func newServer(flagName, addr string, h http.Handler) (*server, error) {
	if addr == "0" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s=%s: %v", flagName, addr, err)
	}
	return &server{flag: flagName, l: l, s: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: serverTimeouts.readHeader,
		ReadTimeout:       serverTimeouts.read,
		IdleTimeout:       serverTimeouts.idle,
		ErrorLog:          log.New(&throttledLog{flag: flagName, every: time.Minute}, "", 0),
	}}, nil
}

// serverTimeouts bound what a client of the serving ports may hold (issue 32.6): a request's
// headers and whole body must arrive within readHeader and read, and a keep-alive connection
// idle for idle is closed, as kube-controller-manager's, metrics-server's and
// controller-runtime's servers do (90 s). Without them an idle connection was held for ever
// (about 26 KiB each), so any pod the NetworkPolicy admits could fill cascade's memory limit.
// No write timeout: /debug/pprof/profile streams for as long as it is asked to. A variable for
// tests.
var serverTimeouts = struct{ readHeader, read, idle time.Duration }{10 * time.Second, 30 * time.Second, 90 * time.Second}

// throttledLog is the servers' error log (net/http's: failed TLS handshakes, broken
// connections, one line each): it logs the first line, then at most one line every `every`
// with the count of the lines it left out, so that a scanner or a flood of bad handshakes
// cannot flood cascade's log.
type throttledLog struct {
	flag    string
	every   time.Duration
	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (l *throttledLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.dropped++
		l.mu.Unlock()
		return len(p), nil
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	l.mu.Unlock()
	klog.Background().Info("HTTP server error", "flag", l.flag, "err", strings.TrimSpace(string(p)), "omittedSinceLast", dropped)
	return len(p), nil
}

// Run serves until ctx ends, then lets requests in flight finish (at most shutdownGrace).
func (s *server) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		_ = s.s.Shutdown(shutdownCtx)
	}()
	for _, f := range s.background {
		go f(ctx)
	}
	var err error
	if s.tls != nil {
		if s.tls.files != nil {
			go s.tls.files.Run(ctx, 1) // reloads the certificate when its files change
		}
		logger.Info("Serving HTTPS, every request authenticated and authorized by the API server", "flag", s.flag, "address", s.l.Addr().String(), "certificate", s.tls.source)
		err = s.s.ServeTLS(s.l, "", "")
	} else {
		logger.Info("Serving", "flag", s.flag, "address", s.l.Addr().String())
		err = s.s.Serve(s.l)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error(err, "Server failed", "flag", s.flag)
	}
	<-stopped
	return nil
}

// newServers builds the /metrics (and /debug, and the aggregated API debug.cascade.dev) server
// and the /healthz,/readyz server on their own ports (either may be disabled with "0"). With
// --metrics-secure (the default) the first serves HTTPS only and lets a request through only
// when it is authenticated (a bearer token the API server's TokenReview accepts, or the API
// server's own front-proxy client certificate carrying the user it forwards a request of) and,
// but for the aggregated API's discovery documents, authorized (the API server's answer to a
// SubjectAccessReview); the reviews are sent with cascade's own credentials. g answers
// /debug/graph and the explanations, a fleet member's only to a user who may get it (graphs.go).
// The health server stays plain HTTP and reveals nothing but whether cascade is alive and synced.
func newServers(ctx context.Context, opts *Options, reg *prometheus.Registry, ready readiness, alive func() error, g graphs, reviews kubernetes.Interface) ([]*server, error) {
	var (
		gate       *accessGate
		cert       *servingCert
		background []func(context.Context)
	)
	if opts.MetricsBindAddress != "0" {
		if opts.MetricsSecure {
			var err error
			if gate, err = newAccessGate(ctx, reviews); err != nil {
				return nil, err
			}
			gate.refused = newRefusedRequests(reg)
			background = append(background, gate.run)
			if cert, err = newServingCert(opts.TLSCertFile, opts.TLSPrivateKeyFile); err != nil {
				return nil, err
			}
		} else {
			klog.FromContext(ctx).Info("WARNING: --metrics-secure=false: /metrics and /debug are served over plain HTTP to anyone who can reach " +
				opts.MetricsBindAddress + ", with no authentication; for local runs only")
		}
	}
	access := explainAccess{graphs: g, gate: gate}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	metricsMux.HandleFunc("/debug/graph", debugGraph(access))
	api := aggregatedAPI(access)
	metricsMux.Handle("/apis", api)
	metricsMux.Handle("/apis/", api)
	if opts.EnableProfiling {
		metricsMux.HandleFunc("/debug/pprof/", pprof.Index)
		metricsMux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		metricsMux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		metricsMux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	var metricsHandler http.Handler = metricsMux
	if gate != nil {
		metricsHandler = gate.wrap(metricsMux)
	}
	healthMux := http.NewServeMux()
	healthMux.HandleFunc("/healthz", healthz(alive))
	healthMux.HandleFunc("/readyz", readyz(ready))
	var servers []*server
	for _, s := range []struct {
		flag, addr string
		h          http.Handler
		tls        *servingCert
		background []func(context.Context)
	}{
		{"--metrics-bind-address", opts.MetricsBindAddress, metricsHandler, cert, background},
		{"--health-probe-bind-address", opts.HealthProbeBindAddress, healthMux, nil, nil},
	} {
		srv, err := newServer(s.flag, s.addr, s.h)
		if err != nil {
			for _, o := range servers {
				_ = o.l.Close()
			}
			return nil, err
		}
		if srv != nil {
			srv.background = s.background
			if s.tls != nil {
				srv.tls = s.tls
				srv.s.TLSConfig = s.tls.config()
				// HTTP/1.1 only: scrapes and debug requests gain nothing from HTTP/2, whose
				// stream handling is the larger surface (the 2023 rapid-reset attacks).
				srv.s.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
			}
			servers = append(servers, srv)
		}
	}
	return servers, nil
}

// reviewCacheTTL is how long the API server's answer about a token (TokenReview) and about a
// user's access to a path (SubjectAccessReview), allowed or denied, is reused: as
// kube-controller-manager and kube-scheduler do for their secure port. A variable for tests.
var reviewCacheTTL = 10 * time.Second

// The ConfigMap in which kube-apiserver publishes how it authenticates as a front proxy (its
// --requestheader-* flags): the CA of its --proxy-client-cert-file, the names that certificate
// may have, and the headers that carry the user of a request it forwards to an aggregated API.
const (
	authenticationConfigMap          = "extension-apiserver-authentication"
	authenticationConfigMapNamespace = metav1.NamespaceSystem
)

// accessGate lets a request through when the API server vouches for its user and says that
// user may do what it asks. The pieces are k8s.io/apiserver's delegating authenticator and
// authorizer, the ones every Kubernetes component serves its secure port with and every
// aggregated API server (metrics-server) serves its API with:
//   - authentication, first of the request-header (front-proxy) authenticator: a client
//     certificate signed by the API server's front-proxy CA, with one of the allowed names,
//     whose X-Remote-User (and group, extra) headers name the user the API server
//     authenticated, read live from kube-system/extension-apiserver-authentication; then of a
//     client certificate of the cluster's client CA (from the same ConfigMap, when published);
//     then of a bearer token, reviewed by TokenReview; cached;
//   - authorization by SubjectAccessReview, cached: the resource attributes of an aggregated
//     API request as the API server parsed them, or the non-resource URL (/metrics,
//     /debug/graph) and its verb; the aggregated API's discovery documents need none.
type accessGate struct {
	authn authenticator.Request
	authz authorizer.Authorizer
	// refused counts the requests answered 401, 403 or 500 (nil: not counted).
	refused *prometheus.CounterVec
	// frontProxy keep the front-proxy CA and header names current (run).
	frontProxy []dynamiccertificates.ControllerRunner
}

func newAccessGate(ctx context.Context, kube kubernetes.Interface) (*accessGate, error) {
	// The API server's retry schedule for its own webhooks (k8s.io/apiserver's
	// DefaultAuthWebhookRetryBackoff): 5 tries over about 4 s.
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("front-proxy-client-ca", authenticationConfigMapNamespace,
		authenticationConfigMap, "requestheader-client-ca-file", kube)
	if err != nil {
		return nil, fmt.Errorf("front-proxy authentication: %w", err)
	}
	headers := headerrequest.NewRequestHeaderAuthRequestController(authenticationConfigMap, authenticationConfigMapNamespace, kube,
		"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers",
		"requestheader-extra-headers-prefix", "requestheader-allowed-names")
	if err := headers.RunOnce(ctx); err != nil {
		// Not fatal: bearer tokens still work, and run keeps trying.
		klog.FromContext(ctx).Info("WARNING: cannot read the API server's front-proxy configuration; requests it forwards to the aggregated API "+
			debugGroup+" (cascade explain) are refused until cascade can (deploy/base's RoleBinding cascade-authentication-reader grants it)",
			"configMap", authenticationConfigMapNamespace+"/"+authenticationConfigMap, "err", err)
	}
	runners := []dynamiccertificates.ControllerRunner{ca, headers}
	// Client certificates of the cluster's own client CA (the API server's --client-ca-file, in
	// the same ConfigMap): a kubeconfig user with a certificate (kind's and kubeadm's admin) is
	// authenticated by it when `cascade explain` reaches cascade through a port-forward instead
	// of the API server (forward.go). A cluster that publishes none (every client uses tokens)
	// has no such authenticator, and no log of the missing key every few seconds.
	var clientCA dynamiccertificates.CAContentProvider
	if c, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", authenticationConfigMapNamespace,
		authenticationConfigMap, "client-ca-file", kube); err == nil && c.RunOnce(ctx) == nil {
		clientCA = c
		runners = append(runners, c)
	} else {
		klog.FromContext(ctx).V(2).Info("No client CA published by the API server: client certificates are not accepted, bearer tokens are",
			"configMap", authenticationConfigMapNamespace+"/"+authenticationConfigMap)
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          nil, // no anonymous requests: no token, no answer
		ClientCertificateCAContentProvider: clientCA,
		TokenAccessReviewClient:            kube.AuthenticationV1(),
		TokenAccessReviewTimeout:           10 * time.Second,
		WebhookRetryBackoff:                &backoff,
		CacheTTL:                           reviewCacheTTL,
		RequestHeaderConfig: &authenticatorfactory.RequestHeaderConfig{
			CAContentProvider:   ca,
			AllowedClientNames:  headerrequest.StringSliceProviderFunc(headers.AllowedClientNames),
			UsernameHeaders:     headerrequest.StringSliceProviderFunc(headers.UsernameHeaders),
			UIDHeaders:          headerrequest.StringSliceProviderFunc(headers.UIDHeaders),
			GroupHeaders:        headerrequest.StringSliceProviderFunc(headers.GroupHeaders),
			ExtraHeaderPrefixes: headerrequest.StringSliceProviderFunc(headers.ExtraHeaderPrefixes),
		},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("delegated authentication (TokenReview): %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             reviewCacheTTL,
		DenyCacheTTL:              reviewCacheTTL,
		WebhookRetryBackoff:       &backoff,
		Compiler:                  noMatchConditions{},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("delegated authorization (SubjectAccessReview): %w", err)
	}
	return &accessGate{authn: authn, authz: authz, frontProxy: runners}, nil
}

// run keeps the front-proxy configuration current (an informer on the one ConfigMap) until ctx
// ends.
func (g *accessGate) run(ctx context.Context) {
	for _, c := range g.frontProxy {
		go c.Run(ctx, 1)
	}
}

// noMatchConditions is the CEL compiler of an authorizer without match conditions: it is never
// asked to compile, and spares cascade the default compiler's environment, built at start.
type noMatchConditions struct{}

func (noMatchConditions) CompileCELExpression(authorizationcel.ExpressionAccessor) (authorizationcel.CompilationResult, error) {
	return authorizationcel.CompilationResult{}, errors.New("cascade's authorizer has no match conditions")
}

// wrap answers 401 to a request that is not authenticated, 403 to one whose user may not do
// what it asks (for a non-resource URL, verb get for GET and HEAD, as kube-apiserver names
// them), 500 when the API server could not say, and passes the others to h, with the user in
// their context (k8s.io/apiserver's request.UserFrom).
func (g *accessGate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context()).WithValues("path", r.URL.Path, "remote", r.RemoteAddr)
		res, ok, err := g.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			if err != nil {
				logger.V(2).Info("Request not authenticated", "err", err)
			}
			g.refuse(http.StatusUnauthorized)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if !isDiscoveryPath(r.URL.Path) {
			if refused := g.authorize(r.Context(), logger, requestAttributes(r, res.User)); refused != nil {
				http.Error(w, refused.msg, refused.code)
				return
			}
		}
		r.Header.Del("Authorization") // the handlers never need the token
		h.ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), res.User)))
	})
}

// authorize asks the API server whether attrs' user may do what attrs say: nil when it may,
// else a 403 naming the user and what it asked, or a 500 when the API server could not say.
func (g *accessGate) authorize(ctx context.Context, logger klog.Logger, attrs authorizer.AttributesRecord) *refusal {
	decision, reason, err := g.authz.Authorize(ctx, attrs)
	if err != nil {
		logger.Error(err, "Cannot authorize a request", "user", attrs.User.GetName())
		g.refuse(http.StatusInternalServerError)
		return &refusal{http.StatusInternalServerError, "Internal Server Error: authorization failed"}
	}
	if decision != authorizer.DecisionAllow {
		logger.V(2).Info("Request forbidden", "user", attrs.User.GetName(), "verb", attrs.Verb, "reason", reason)
		g.refuse(http.StatusForbidden)
		msg := fmt.Sprintf("Forbidden: user %q cannot %s", attrs.User.GetName(), describeAccess(attrs))
		if reason != "" {
			msg += ": " + reason
		}
		return &refusal{http.StatusForbidden, msg}
	}
	return nil
}

func (g *accessGate) refuse(code int) {
	if g.refused != nil {
		g.refused.WithLabelValues(strconv.Itoa(code)).Inc()
	}
}

// newRefusedRequests registers cascade_serving_refused_requests_total on reg.
func newRefusedRequests(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cascade",
		Name:      "serving_refused_requests_total",
		Help:      "Requests to the metrics port refused, by HTTP code: 401 (no credentials, a token the API server does not accept, or too many reviews in flight), 403 (the user may not), 500 (the API server could not say).",
	}, []string{"code"})
	for _, code := range []string{"401", "403", "500"} {
		c.WithLabelValues(code)
	}
	reg.MustRegister(c)
	return c
}

// describeAccess says what a request asked, as kube-apiserver's Forbidden messages do.
func describeAccess(a authorizer.AttributesRecord) string {
	if !a.ResourceRequest {
		return fmt.Sprintf("%s path %q", a.Verb, a.Path)
	}
	what := a.Resource
	if a.APIGroup != "" {
		what += "." + a.APIGroup
	}
	if a.Subresource != "" {
		what += "/" + a.Subresource
	}
	if a.Name != "" {
		what += fmt.Sprintf(" %q", a.Name)
	}
	if a.Namespace != "" {
		return fmt.Sprintf("%s %s in namespace %q", a.Verb, what, a.Namespace)
	}
	return fmt.Sprintf("%s %s at the cluster scope", a.Verb, what)
}

// nonResourceVerb is the verb kube-apiserver authorizes an HTTP method on a non-resource URL
// with (k8s.io/apiserver's RequestInfoFactory).
func nonResourceVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodPut:
		return "put"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(method)
}

// servingCert is the metrics address's certificate: from --tls-cert-file and
// --tls-private-key-file, reloaded when they change (k8s.io/apiserver's dynamic serving
// content, as kube-apiserver's own), or self-signed at start and held in memory only.
type servingCert struct {
	source string // for the log: the files, or "self-signed"
	files  *dynamiccertificates.DynamicCertKeyPairContent

	mu              sync.Mutex
	certPEM, keyPEM []byte
	cert            *tls.Certificate
}

func newServingCert(certFile, keyFile string) (*servingCert, error) {
	if certFile != "" {
		files, err := dynamiccertificates.NewDynamicServingContentFromFiles("metrics serving certificate", certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file, --tls-private-key-file: %w", err)
		}
		c := &servingCert{source: certFile, files: files}
		if _, err := c.current(); err != nil {
			return nil, fmt.Errorf("--tls-cert-file, --tls-private-key-file: %w", err)
		}
		return c, nil
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("self-signed serving certificate: %w", err)
	}
	return &servingCert{source: "self-signed", cert: &pair}, nil
}

// current is the certificate to serve: the files' content as last loaded, parsed again only
// when it changed.
func (c *servingCert) current() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		return c.cert, nil
	}
	certPEM, keyPEM := c.files.CurrentCertKeyContent()
	if c.cert != nil && bytes.Equal(certPEM, c.certPEM) && bytes.Equal(keyPEM, c.keyPEM) {
		return c.cert, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	c.cert, c.certPEM, c.keyPEM = &pair, certPEM, keyPEM
	return c.cert, nil
}

// config asks clients for a certificate but requires none and verifies none in the handshake:
// the API server presents its front-proxy client certificate when it forwards a request to
// the aggregated API, and the request-header authenticator verifies it against the front-proxy
// CA as it stands when the request comes; scrapers and operators send a bearer token instead.
func (c *servingCert) config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.current() },
		ClientAuth:     tls.RequestClientCert,
	}
}

// livenessStallAfter is how long work may be ready with no worker finishing an item before the
// liveness probe fails (work.Liveness): far above any request's time (client-go's and the API
// server's timeouts are a minute), so only workers that no longer move fail it.
const livenessStallAfter = 5 * time.Minute

// leaseRenewalSlack is how long past its Lease's expiry a leader that stopped renewing still
// answers alive (client-go's HealthzAdaptor; kube-controller-manager's value): normally it
// notices first and exits (internal/leader.ErrLostLease), so this catches a leader stuck in
// a way that keeps it from noticing.
const leaseRenewalSlack = 20 * time.Second

// liveness is what /healthz checks: the leader still renews its Lease (with leader election),
// and the workers still make progress when work is due.
type liveness struct {
	lease   *leaderelection.HealthzAdaptor // nil without leader election
	workers *work.Liveness
	// fleet, in fleet mode, is the fleet machinery's own check (internal/fleet: Fleet.Check);
	// the members' queues are not the process's workers: each member has its own liveness.
	fleet func() error
}

func (l liveness) check() error {
	if l.lease != nil {
		if err := l.lease.Check(nil); err != nil {
			return err
		}
	}
	if l.fleet != nil {
		if err := l.fleet(); err != nil {
			return err
		}
	}
	return l.workers.Check()
}

// healthz is the liveness probe: 200 "ok", or 500 with what failed (a Lease no longer renewed,
// queues that stopped moving: names and counts, never an object), so that the kubelet restarts
// a replica that no longer works. Idle is healthy; so is a standby.
func healthz(alive func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if err := alive(); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// readiness is what /readyz reports on (gc.Controller, and the feature levels).
type readiness interface {
	Synced() bool
	Unsynced() []gc.Unsynced
	// Features is the feature levels in use (features.Set.Summary): "" for none.
	Features() string
}

// readyz answers 503 until the graph counts as synced (every initial list in, or
// --sync-timeout passed), then 200. Either way it counts the resources whose view is
// incomplete, but never names them nor says why: the health port answers anyone who reaches
// it, unauthenticated, and the names (the APIs the cluster serves) and errors (text of the API
// server, of conversion webhooks) are for cascade_resource_unsynced on the authenticated
// metrics port and the log. A second line says the feature levels in use (such as
// "features in use: admission_policy=v1 list=watch_list", docs/compatibility.md): what any
// client of the API server can learn from its discovery.
func readyz(r readiness) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		n := len(r.Unsynced())
		features := ""
		if f := r.Features(); f != "" {
			features = "features in use: " + f + "\n"
		}
		if m, ok := r.(interface{ Members() string }); ok {
			features += m.Members() + "\n"
		}
		if !r.Synced() {
			msg := "not ready: the dependency graph has not synced"
			if n > 0 {
				msg += fmt.Sprintf("; waiting for %d resources (cascade_resource_unsynced names them)", n)
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "%s\n%s", msg, features)
			return
		}
		if n > 0 {
			_, _ = fmt.Fprintf(w, "ok; %d resources unsynced, decisions that need them wait (cascade_resource_unsynced names them)\n%s", n, features)
			return
		}
		if features != "" {
			_, _ = fmt.Fprintf(w, "ok\n%s", features)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// countRequests wraps the client transport to count every request by verb and status code.
func countRequests(c *prometheus.CounterVec) func(http.RoundTripper) http.RoundTripper {
	counters := &requestCounters{vec: c}
	return func(rt http.RoundTripper) http.RoundTripper { return countingRoundTripper{rt: rt, c: counters} }
}

// requestCounters keeps the counter of each verb and code once looked up: one request per
// collected object made the vector's lookup (label hashing and checks) a measurable part of
// cascade's CPU (issue 41). Verbs and codes are few; their series are never deleted.
type requestCounters struct {
	vec   *prometheus.CounterVec
	known sync.Map // [2]string{method, code} → prometheus.Counter
}

func (r *requestCounters) inc(method, code string) {
	key := [2]string{method, code}
	if c, ok := r.known.Load(key); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c := r.vec.WithLabelValues(method, code)
	r.known.Store(key, c)
	c.Inc()
}

type countingRoundTripper struct {
	rt http.RoundTripper
	c  *requestCounters
}

func (t countingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.c.inc(req.Method, code)
	return resp, err
}

// WrappedRoundTripper lets client-go reach the transport under it (utilnet.CloseIdleConnectionsFor).
func (t countingRoundTripper) WrappedRoundTripper() http.RoundTripper { return t.rt }
