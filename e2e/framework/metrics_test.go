package framework

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"
)

const exposition = `# HELP cascade_collected_total Garbage collected.
# TYPE cascade_collected_total counter
cascade_collected_total{action="delete"} 12
cascade_collected_total{action="remove_refs"} 3
# HELP cascade_resource_watched 1 for every watched resource.
# TYPE cascade_resource_watched gauge
cascade_resource_watched{group="",resource="configmaps",version="v1"} 1
cascade_resource_watched{group="apps",resource="deployments",version="v1"} 1
# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
# HELP apiserver_request_total Requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="configmaps",scope="resource",subresource="",verb="DELETE",version="v1"} 5
apiserver_request_total{code="404",resource="configmaps",scope="resource",subresource="",verb="DELETE",version="v1"} 2
apiserver_request_total{code="200",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 7
apiserver_request_total{code="201",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 1
# HELP weird_total Label values that need escaping.
# TYPE weird_total counter
weird_total{path="a,b=\"c\"\\d"} 4
# TYPE latency_seconds histogram
latency_seconds_bucket{le="1"} 1
latency_seconds_bucket{le="+Inf"} 1
latency_seconds_sum 0.5
latency_seconds_count 1
`

func TestMetricsValue(t *testing.T) {
	m, err := ParseMetrics(exposition)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sel   string
		want  float64
		found bool
	}{
		{`cascade_collected_total{action="delete"}`, 12, true},
		{`cascade_collected_total`, 15, true}, // every sample of the family
		{`cascade_collected_total{action="nothing"}`, 0, false},
		{`cascade_resource_watched{version="v1",resource="configmaps",group=""}`, 1, true}, // any label order
		{`cascade_resource_watched{group="",resource="deployments",version="v1"}`, 0, false},
		{`go_goroutines`, 42, true},
		{`apiserver_request_total{resource="configmaps",verb="DELETE"}`, 7, true},
		{`weird_total{path="a,b=\"c\"\\d"}`, 4, true},
		{`latency_seconds`, 0, false}, // histograms are not read
		{`no_such_metric`, 0, false},
	} {
		got, found := m.Value(tc.sel)
		if got != tc.want || found != tc.found {
			t.Errorf("Value(%s) = %g, %t; want %g, %t", tc.sel, got, found, tc.want, tc.found)
		}
	}
}

func TestMetricsValuePanicsOnBadSelector(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "not name{") {
			t.Errorf("recover() = %v, want a panic naming the selector", r)
		}
	}()
	Metrics{}.Value(`cascade_collected_total{action=delete}`)
}

func TestParseMetricsRejectsGarbage(t *testing.T) {
	if _, err := ParseMetrics("this is { not metrics\n"); err == nil {
		t.Error("no error for text that is not an exposition")
	}
}

func TestObjectRequests(t *testing.T) {
	before := RequestCounts{"DELETE configmaps": 2, "GET configmaps": 1, "LIST configmaps": 5}
	after := RequestCounts{"DELETE configmaps": 12, "GET configmaps": 1, "LIST configmaps": 9, "PATCH configmaps": 3,
		"WATCH configmaps": 4, "DELETE pods": 100}
	total, detail := ObjectRequests(before, after, "configmaps")
	if total != 13 || detail != "DELETE=10 PATCH=3" {
		t.Errorf("ObjectRequests = %g, %q; want 13, \"DELETE=10 PATCH=3\"", total, detail)
	}
}

// countingServer serves cascade_collected_total rising by one on each of its first scrapes up
// to top, then staying there: a process working through a backlog, then idle.
type countingServer struct {
	mu     sync.Mutex
	n, top int
}

func (s *countingServer) Metrics() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n = min(s.n+1, s.top)
	return fmt.Sprintf("# TYPE cascade_collected_total counter\ncascade_collected_total{action=\"delete\"} %d\n", s.n), nil
}

func (s *countingServer) Tail(int) string { return "" }

func TestSettledWaitsForTheBacklog(t *testing.T) {
	s := &countingServer{top: 5}
	start := time.Now()
	m := Settled(t, s, 300*time.Millisecond, 10*time.Second, `cascade_collected_total{action="delete"}`)
	if v, _ := m.Value("cascade_collected_total"); v != 5 {
		t.Errorf("Settled returned a scrape at %g, want 5 (the backlog done)", v)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("Settled returned after %s, before the value held still for 300ms", d)
	}
}

// TestGoroutineDescriptorBytes: 2,000 goroutines ended, their descriptors are still in this
// process's heap profile, about 480 bytes each; a profile that is not one is an error.
func TestGoroutineDescriptorBytes(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 512
	const n = 2000
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() { <-start })
	}
	close(start)
	wg.Wait()
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	got, live, err := GoroutineDescriptorBytes(buf.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("goroutine descriptors after %d goroutines ended: %.0f bytes", n, got)
	// At least the 2,000 descriptors; at most twice as many (the test binary's own goroutines,
	// sampling).
	if got < n*400 || got > 2*n*600 {
		t.Errorf("goroutine descriptors: %.0f bytes, want about %d x 480", got, n)
	}
	if live < got {
		t.Errorf("live heap %.0f bytes, less than its goroutine descriptors (%.0f)", live, got)
	}
	if _, _, err := GoroutineDescriptorBytes("goroutine profile: total 3\n"); err == nil {
		t.Error("no error for a profile of another kind")
	}
}
