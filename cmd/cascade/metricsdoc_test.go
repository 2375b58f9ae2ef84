package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md, docs/flags.md and the policy schema (make generate)")

// recorder is a Registerer that keeps what is registered, to describe it.
type recorder struct{ cs []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error { r.cs = append(r.cs, c); return nil }
func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.cs = append(r.cs, cs...)
}
func (r *recorder) Unregister(prometheus.Collector) bool { return false }

type metricDoc struct {
	name, typ, help string
	labels          []string
}

var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), .*variableLabels: \{([^}]*)\}\}$`)

// cascadeMetrics describes every cascade_* metric the binary can register.
func cascadeMetrics(t *testing.T) []metricDoc {
	t.Helper()
	r := &recorder{}
	ms := newMetricSet(r)
	gc.New(gc.Options{Metrics: ms.gc})    // the graph's scrape-time collector
	client.NewDryRun(nil, r)              // --dry-run only
	client.Edge{}.Companion(r)            // --mode=companion only
	newRefusedRequests(r)                 // secure serving only
	r.MustRegister(fleetCollectors(t)...) // fleet mode only: Describe reads no member
	var out []metricDoc
	for _, c := range r.cs {
		typ := "gauge" // scrape-time collectors (the graph's) export gauges
		switch c.(type) {
		case *prometheus.CounterVec:
			typ = "counter"
		case *prometheus.GaugeVec:
			typ = "gauge"
		case *prometheus.HistogramVec:
			typ = "histogram"
		case prometheus.Gauge: // before Counter: a Gauge has Inc and Add too
			typ = "gauge"
		case prometheus.Counter:
			typ = "counter"
		case prometheus.Histogram:
			typ = "histogram"
		}
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descRE.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			name, _ := strconv.Unquote(m[1])
			help, _ := strconv.Unquote(m[2])
			var labels []string
			if m[3] != "" {
				labels = strings.Split(m[3], ",")
			}
			out = append(out, metricDoc{name: name, typ: typ, help: help, labels: labels})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// TestMetricsLint: every metric passes client_golang's promlint (names, units, help).
func TestMetricsLint(t *testing.T) {
	var mfs []*dto.MetricFamily
	for _, m := range cascadeMetrics(t) {
		typ := map[string]dto.MetricType{"counter": dto.MetricType_COUNTER, "gauge": dto.MetricType_GAUGE, "histogram": dto.MetricType_HISTOGRAM}[m.typ]
		metric := &dto.Metric{}
		for _, l := range m.labels {
			metric.Label = append(metric.Label, &dto.LabelPair{Name: new(l), Value: new("x")})
		}
		switch typ {
		case dto.MetricType_COUNTER:
			metric.Counter = &dto.Counter{Value: new(0.0)}
		case dto.MetricType_HISTOGRAM:
			metric.Histogram = &dto.Histogram{SampleCount: new(uint64(0)), SampleSum: new(0.0)}
		default:
			metric.Gauge = &dto.Gauge{Value: new(0.0)}
		}
		mfs = append(mfs, &dto.MetricFamily{Name: new(m.name), Help: new(m.help), Type: &typ, Metric: []*dto.Metric{metric}})
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if len(mfs) < 20 {
		t.Errorf("only %d metrics described; the set is incomplete", len(mfs))
	}
}

// TestMetricsDoc: docs/metrics.md is what the registry says (run with -update to rewrite it).
func TestMetricsDoc(t *testing.T) {
	var b strings.Builder
	b.WriteString("# cascade's metrics\n\nGenerated from the registry by `make generate`; do not edit\n" +
		"(`make verify` fails when this file is stale). Served on `--metrics-bind-address` at `/metrics`,\n" +
		"next to Go's and the process's collectors.\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, m := range cascadeMetrics(t) {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.typ, strings.Join(m.labels, ", "), strings.ReplaceAll(m.help, "|", `\|`))
	}
	generated(t, "docs/metrics.md", b.String())
}

// generated writes doc (a path from the repository's root) with -update (make generate), and
// otherwise fails when the file differs from it.
func generated(t *testing.T, doc, content string) {
	t.Helper()
	path := "../../" + doc
	if *update {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != content {
		t.Errorf("%s is stale (%v): run make generate", doc, err)
	}
}
