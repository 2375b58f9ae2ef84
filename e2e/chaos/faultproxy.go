//go:build e2e

package chaos

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// faultProxy is an HTTPS reverse proxy in front of a member's kube-apiserver for cascade (the
// driver talks to the apiserver directly). It passes every request on, with the client's own
// bearer token (the audit log still names cascade), until told to answer every request with a
// 500 (an API server, or a load balancer before it, failing), or to drop every connection.
type faultProxy struct {
	srv      *httptest.Server
	failing  atomic.Bool
	answered atomic.Int64 // requests answered with a 500
	// closing ends every request in flight when the proxy closes: httptest's Close waits for
	// them, and a watch a replica opened through the proxy would otherwise hold it until
	// kube-apiserver ends the watch (up to an hour).
	closing context.Context
	stop    context.CancelFunc
}

// startFaultProxy proxies to the API server of cfg (its address and CA only: no credential
// of cfg is sent).
func startFaultProxy(cfg *rest.Config) (*faultProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: cfg.CAFile, CAData: cfg.CAData}})
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64}
	rp.FlushInterval = -1 // watches stream
	// Requests cut, cancelled or refused by a stopped API server are the point: not logged
	// (the proxy answers 502 to what it could not forward, as a load balancer does).
	quiet := log.New(io.Discard, "", 0)
	rp.ErrorLog = quiet
	p := &faultProxy{}
	p.closing, p.stop = context.WithCancel(context.Background())
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.failing.Load() {
			p.answered.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","message":"chaos: the member answers 500","code":500}`))
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(p.closing, cancel)()
		rp.ServeHTTP(w, r.WithContext(ctx))
	}))
	p.srv.EnableHTTP2 = true
	p.srv.Config.ErrorLog = quiet
	p.srv.StartTLS()
	return p, nil
}

// url is the proxy's address (its certificate: srv.Certificate).
func (p *faultProxy) url() string { return p.srv.URL }

// fail500 makes every request answer 500 (on) or pass again (off); either way the connections
// open now are dropped, so that watches open meet it too.
func (p *faultProxy) fail500(on bool) {
	p.failing.Store(on)
	p.srv.CloseClientConnections()
}

// close stops the proxy: no new connection, every request in flight ended, and never more
// than a few seconds' wait (the replicas behind it are still running and dial again at once).
func (p *faultProxy) close() {
	p.stop()
	_ = p.srv.Listener.Close()
	p.srv.CloseClientConnections()
	done := make(chan struct{})
	go func() { p.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}
