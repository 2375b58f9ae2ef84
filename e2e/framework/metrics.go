package framework

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a Prometheus text exposition, by metric family name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses the Prometheus text format.
func ParseMetrics(text string) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return Metrics(fams), nil
}

// Sample is one sample of a counter, gauge or untyped family.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Samples returns the samples of family name; none for a missing family, a histogram or a
// summary.
func (m Metrics) Samples(name string) []Sample {
	mf := m[name]
	if mf == nil {
		return nil
	}
	var out []Sample
	for _, metric := range mf.GetMetric() {
		var v float64
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			v = metric.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = metric.GetGauge().GetValue()
		case dto.MetricType_UNTYPED:
			v = metric.GetUntyped().GetValue()
		default:
			return nil
		}
		labels := make(map[string]string, len(metric.GetLabel()))
		for _, lp := range metric.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		out = append(out, Sample{Labels: labels, Value: v})
	}
	return out
}

// Value is the sum of the samples that sel selects, and whether there was any. sel is written
// as a sample is exposed, without its value: a family name, or `name{label="value",...}`
// naming some of its labels in any order (a label a sample lacks has the empty value), such as
// `cascade_collected_total{action="delete"}`. A malformed sel panics: it is a test's constant.
func (m Metrics) Value(sel string) (float64, bool) {
	name, want := parseSelector(sel)
	var sum float64
	found := false
samples:
	for _, s := range m.Samples(name) {
		for k, v := range want {
			if s.Labels[k] != v {
				continue samples
			}
		}
		sum += s.Value
		found = true
	}
	return sum, found
}

// parseSelector reads sel as the one sample of an exposition, so that it is quoted and escaped
// exactly as /metrics is.
func parseSelector(sel string) (string, map[string]string) {
	m, err := ParseMetrics(sel + " 0\n")
	if err != nil || len(m) != 1 {
		panic(fmt.Sprintf("framework: metric selector %q is not name{label=\"value\",...}: %v", sel, err))
	}
	for name := range m {
		return name, m.Samples(name)[0].Labels
	}
	panic("unreachable")
}

// Server is a process under test that serves /metrics: harness.Cascade and
// harness.KubeControllerManager.
type Server interface {
	Metrics() (string, error)
	// Tail is the end of the process's log, shown when a wait on its metrics fails.
	Tail(n int) string
}

// ReadMetrics reads and parses s's /metrics.
func ReadMetrics(s Server) (Metrics, error) {
	text, err := s.Metrics()
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	return ParseMetrics(text)
}

// Scrape is ReadMetrics failing the test on error.
func Scrape(t testing.TB, s Server) Metrics {
	t.Helper()
	m, err := ReadMetrics(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// MetricValue is Scrape(t, s).Value(sel), a missing sample counting as 0.
func MetricValue(t testing.TB, s Server, sel string) float64 {
	t.Helper()
	v, _ := Scrape(t, s).Value(sel)
	return v
}

// WaitForMetric polls s's /metrics every 20 ms (fine enough to time a benchmark by) until sel
// is at least want, and fails the test with the process's last log lines if timeout passes
// first.
func WaitForMetric(t testing.TB, s Server, sel string, want float64, timeout time.Duration) {
	t.Helper()
	var v float64
	if err := Poll(timeout, 20*time.Millisecond, func() (bool, error) {
		v = MetricValue(t, s, sel)
		return v >= want, nil
	}); err != nil {
		t.Fatalf("timed out waiting for %s >= %g (at %g)\n%s", sel, want, v, s.Tail(20))
	}
}

// Settled polls s's /metrics every 100 ms until the values of sels (each read as Value reads
// it) have held still for quiet, and returns the last scrape; it fails the test with the
// process's last log lines if timeout passes first. The scrape is a baseline for deltas that
// count only what the test does next: a process on a control plane that earlier tests used
// first works through what they left behind (a collector finishes their owners and garbage as
// soon as its graph has synced), and its counters move until it is done. Counters that move
// for ever (retries with backoff) cannot settle: assert on the test's own objects instead.
func Settled(t testing.TB, s Server, quiet, timeout time.Duration, sels ...string) Metrics {
	t.Helper()
	var (
		m     Metrics
		last  []float64
		since time.Time
	)
	if err := Poll(timeout, 100*time.Millisecond, func() (bool, error) {
		m = Scrape(t, s)
		vals := make([]float64, len(sels))
		for i, sel := range sels {
			vals[i], _ = m.Value(sel)
		}
		if last == nil || !slices.Equal(vals, last) {
			last, since = vals, time.Now()
			return false, nil
		}
		return time.Since(since) >= quiet, nil
	}); err != nil {
		t.Fatalf("%v did not hold still for %s within %s (last %v)\n%s", sels, quiet, timeout, last, s.Tail(20))
	}
	return m
}

// RequestCounts maps "VERB resource" (or "VERB resource/subresource") to kube-apiserver's
// apiserver_request_total summed over its other labels (codes, scopes, versions).
type RequestCounts map[string]float64

// APIServerRequests scrapes kube-apiserver's /metrics with cs's credentials.
func APIServerRequests(t testing.TB, cs Clients) RequestCounts {
	t.Helper()
	raw, err := cs.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("scrape kube-apiserver's metrics: %v", err)
	}
	m, err := ParseMetrics(string(raw))
	if err != nil {
		t.Fatalf("kube-apiserver's metrics: %v", err)
	}
	out := RequestCounts{}
	for _, s := range m.Samples("apiserver_request_total") {
		resource := s.Labels["resource"]
		if sub := s.Labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		out[s.Labels["verb"]+" "+resource] += s.Value
	}
	return out
}

// ObjectRequests returns the requests on resource between two scrapes that act on single
// objects (every verb but LIST and WATCH, which informers spend once, not per object), and
// their count by verb ("DELETE=10 GET=2").
func ObjectRequests(before, after RequestCounts, resource string) (float64, string) {
	var total float64
	var parts []string
	for key, v := range after {
		verb, res, _ := strings.Cut(key, " ")
		if res != resource || verb == "LIST" || verb == "WATCH" {
			continue
		}
		if d := v - before[key]; d > 0 {
			total += d
			parts = append(parts, fmt.Sprintf("%s=%.0f", verb, d))
		}
	}
	sort.Strings(parts)
	return total, strings.Join(parts, " ")
}

// GoroutineDescriptorBytes estimates, from a heap profile in text form (debug=1), the in-use
// bytes allocated by runtime.malg and runtime.allgadd: goroutine descriptors, which Go never
// frees once their goroutine ended (golang/go#9869) and keeps at the process's high-water mark
// of goroutines; and the in-use bytes of every record (the live heap as of the last collection).
// Each record is scaled by its sampling probability, as pprof does.
func GoroutineDescriptorBytes(profile string) (descriptors, live float64, err error) {
	lines := strings.Split(profile, "\n")
	// "heap profile: N: B [N: B] @ heap/R", R twice the sampling rate
	i := strings.LastIndex(lines[0], "@ heap/")
	if !strings.HasPrefix(lines[0], "heap profile:") || i < 0 {
		return 0, 0, fmt.Errorf("not a heap profile in text form: %.80q", profile)
	}
	twice, err := strconv.ParseFloat(strings.TrimSpace(lines[0][i+len("@ heap/"):]), 64)
	if err != nil || twice <= 0 {
		return 0, 0, fmt.Errorf("no sampling rate in %q", lines[0])
	}
	rate := twice / 2
	var count, size float64
	descriptor := false
	flush := func() {
		if count > 0 {
			scaled := size / (1 - math.Exp(-size/count/rate))
			live += scaled
			if descriptor {
				descriptors += scaled
			}
		}
		descriptor, count, size = false, 0, 0
	}
	for _, l := range lines[1:] {
		switch {
		case strings.HasPrefix(l, "#"):
			if strings.Contains(l, "runtime.malg+") || strings.Contains(l, "runtime.allgadd+") {
				descriptor = true
			}
		case strings.Contains(l, " @ "):
			flush()
			// "inuse_objects: inuse_bytes [alloc_objects: alloc_bytes] @ addresses"
			if _, err := fmt.Sscanf(l, "%g: %g [", &count, &size); err != nil {
				return 0, 0, fmt.Errorf("record %q: %w", l, err)
			}
		}
	}
	flush()
	return descriptors, live, nil
}
