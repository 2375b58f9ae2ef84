package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
)

// shutdownGrace bounds how long a server finishes its requests once cascade stops.
const shutdownGrace = 10 * time.Second

// server is one HTTP listener; it listens when built, so a taken port is an error before any
// work starts, and Run serves until ctx ends.
type server struct {
	flag string
	l    net.Listener
	s    *http.Server
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
	return &server{flag: flagName, l: l, s: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Run serves until ctx ends, then lets requests in flight finish (at most shutdownGrace).
func (s *server) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.Info("Serving", "flag", s.flag, "address", s.l.Addr().String())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		_ = s.s.Shutdown(shutdownCtx)
	}()
	if err := s.s.Serve(s.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error(err, "Server failed", "flag", s.flag)
	}
	<-stopped
	return nil
}

// newServers builds the /metrics (and /debug) server and the /healthz,/readyz server on their
// own ports (either may be disabled with "0").
func newServers(opts *Options, reg *prometheus.Registry, ready readiness, debugGraph http.HandlerFunc) ([]*server, error) {
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	metricsMux.HandleFunc("/debug/graph", debugGraph)
	if opts.EnableProfiling {
		metricsMux.HandleFunc("/debug/pprof/", pprof.Index)
		metricsMux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		metricsMux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		metricsMux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	healthMux := http.NewServeMux()
	healthMux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	healthMux.HandleFunc("/readyz", readyz(ready))
	var servers []*server
	for _, s := range []struct {
		flag, addr string
		h          http.Handler
	}{
		{"--metrics-bind-address", opts.MetricsBindAddress, metricsMux},
		{"--health-probe-bind-address", opts.HealthProbeBindAddress, healthMux},
	} {
		srv, err := newServer(s.flag, s.addr, s.h)
		if err != nil {
			for _, o := range servers {
				_ = o.l.Close()
			}
			return nil, err
		}
		if srv != nil {
			servers = append(servers, srv)
		}
	}
	return servers, nil
}

// readiness is what /readyz reports on (gc.Controller).
type readiness interface {
	Synced() bool
	Unsynced() []gc.Unsynced
}

// readyz answers 503 until the graph counts as synced (every initial list in, or
// --sync-timeout passed), then 200. Either way it names the resources whose view is
// incomplete, with their last error.
func readyz(r readiness) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		var names []string
		for _, u := range r.Unsynced() {
			name := gc.GVRString(u.Resource.GVR)
			if u.Err != "" {
				name += " (" + u.Err + ")"
			}
			names = append(names, name)
		}
		if !r.Synced() {
			msg := "not ready: the dependency graph has not synced"
			if len(names) > 0 {
				msg += "; waiting for: " + strings.Join(names, "; ")
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		if len(names) > 0 {
			_, _ = fmt.Fprintf(w, "ok; unsynced resources (decisions that need them wait): %s\n", strings.Join(names, "; "))
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// countRequests wraps the client transport to count every request by verb and status code.
func countRequests(c *prometheus.CounterVec) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			code := "error"
			if err == nil {
				code = strconv.Itoa(resp.StatusCode)
			}
			c.WithLabelValues(req.Method, code).Inc()
			return resp, err
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
