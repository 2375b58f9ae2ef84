package client

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// RESTMetrics are client-go's own request metrics, under the names every Kubernetes component
// exports them with (kube-controller-manager's rest_client_*), fed through client-go's metrics
// hooks: how long requests take, how long they wait for the client-side rate limiter, and
// their results. They cover every client cascade builds, discovery and leader election
// included.
type RESTMetrics struct {
	Latency     *prometheus.HistogramVec
	RateLimiter *prometheus.HistogramVec
	Results     *prometheus.CounterVec
}

// restBuckets are kube-controller-manager's buckets for both latencies (5 ms to 60 s).
var restBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}

// NewRESTMetrics creates the metrics and registers them on reg; Hook makes client-go feed them.
func NewRESTMetrics(reg prometheus.Registerer) *RESTMetrics {
	m := &RESTMetrics{
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rest_client_request_duration_seconds",
			Help:    "Request latency of client-go in seconds, by verb and host (client-go's metrics hook).",
			Buckets: restBuckets,
		}, []string{"verb", "host"}),
		RateLimiter: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rest_client_rate_limiter_duration_seconds",
			Help:    "Time requests waited for client-go's client-side rate limiter (--kube-api-qps), in seconds, by verb and host.",
			Buckets: restBuckets,
		}, []string{"verb", "host"}),
		Results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total",
			Help: "Requests client-go made, by status code, method and host (client-go's metrics hook).",
		}, []string{"code", "method", "host"}),
	}
	reg.MustRegister(m.Latency, m.RateLimiter, m.Results)
	return m
}

// Forget deletes every series of host (host:port, as the hooks label them): a fleet member's
// API server once the member is gone, so that the series follow the members, not every member
// there ever was.
func (m *RESTMetrics) Forget(host string) {
	l := prometheus.Labels{"host": host}
	m.Latency.DeletePartialMatch(l)
	m.RateLimiter.DeletePartialMatch(l)
	m.Results.DeletePartialMatch(l)
}

var hookOnce sync.Once

// Hook makes client-go report to m. client-go takes one set of hooks per process: the first
// call wins, later ones do nothing.
func (m *RESTMetrics) Hook() {
	hookOnce.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency:     latencyHook{m.Latency},
			RateLimiterLatency: latencyHook{m.RateLimiter},
			RequestResult:      resultHook{m.Results},
		})
	})
}

type latencyHook struct{ h *prometheus.HistogramVec }

func (l latencyHook) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	l.h.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type resultHook struct{ c *prometheus.CounterVec }

func (r resultHook) Increment(_ context.Context, code, method, host string) {
	r.c.WithLabelValues(code, method, host).Inc()
}

// The hooks' signatures are client-go's.
var (
	_ clientmetrics.LatencyMetric = latencyHook{}
	_ clientmetrics.ResultMetric  = resultHook{}
)
