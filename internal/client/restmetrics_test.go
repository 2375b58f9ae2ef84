package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestRESTMetricsHook: once hooked, a request of a client built by client-go is counted by
// code, method and host, and its latency and its wait for the rate limiter observed (issue
// 25.4: client-go's metrics through its hooks).
func TestRESTMetricsHook(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/api/v1/namespaces/a/configmaps/x" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"a"}}`))
	}))
	defer srv.Close()
	reg := prometheus.NewPedanticRegistry()
	m := NewRESTMetrics(reg)
	m.Hook()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 100, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps("a").Get(ctx, "x", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _ = cs.CoreV1().ConfigMaps("a").Get(ctx, "missing", metav1.GetOptions{})
	u, _ := url.Parse(srv.URL)
	if got := testutil.ToFloat64(m.Results.WithLabelValues("200", "GET", u.Host)); got != 1 {
		t.Errorf("rest_client_requests_total{code=200} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.Results.WithLabelValues("404", "GET", u.Host)); got != 1 {
		t.Errorf("rest_client_requests_total{code=404} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.Latency); n != 1 {
		t.Errorf("rest_client_request_duration_seconds has %d series, want 1 (verb GET, this host)", n)
	}
	if n := testutil.CollectAndCount(m.RateLimiter); n != 1 {
		t.Errorf("rest_client_rate_limiter_duration_seconds has %d series, want 1", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestForgetHost: Forget deletes every series of one host, and only its.
func TestForgetHost(t *testing.T) {
	m := NewRESTMetrics(prometheus.NewRegistry())
	for _, h := range []string{"a:6443", "b:6443"} {
		m.Latency.WithLabelValues("GET", h).Observe(1)
		m.RateLimiter.WithLabelValues("GET", h).Observe(1)
		m.Results.WithLabelValues("200", "GET", h).Inc()
	}
	m.Forget("a:6443")
	for name, c := range map[string]prometheus.Collector{"latency": m.Latency, "rate limiter": m.RateLimiter, "results": m.Results} {
		if n := testutil.CollectAndCount(c); n != 1 {
			t.Errorf("%s: %d series after forgetting a, want b's only", name, n)
		}
	}
}
