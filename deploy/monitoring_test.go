package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/finalizers"
	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/work"
)

// describing records the name of every metric a collector describes, whether or not it has
// samples yet (the per-kind graph gauges only appear once the graph holds objects).
type describing struct{ names map[string]bool }

var fqNameRE = regexp.MustCompile(`fqName: "([a-z_:]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqNameRE.FindStringSubmatch(desc.String()); m != nil {
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				d.names[m[1]+suffix] = true
			}
		}
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describing) Unregister(prometheus.Collector) bool { return false }

// registeredNames returns every metric cascade's code registers.
func registeredNames() map[string]bool {
	d := &describing{names: map[string]bool{
		"cascade_api_requests_total": true, // registered in cmd/cascade
	}}
	gc.New(gc.Deps{Metrics: gc.NewMetrics(d)}) // with the scrape-time graph collector
	work.NewQueueMetrics(d)
	work.NewMetrics(d)
	finalizers.NewMetrics(d)
	return d.names
}

var metricRE = regexp.MustCompile(`cascade_[a-z_]+`)

// TestMonitoringUsesRealMetrics: every cascade_* metric in the alert rules and the dashboard
// is one the code registers, so a rename cannot silently break them.
func TestMonitoringUsesRealMetrics(t *testing.T) {
	names := registeredNames()
	var exprs []string

	data, err := os.ReadFile("monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
				For         string
			}
		}
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	if len(rules.Groups) == 0 || len(rules.Groups[0].Rules) == 0 {
		t.Fatal("alerts.yaml has no rules")
	}
	for _, r := range rules.Groups[0].Rules {
		if r.Alert == "" || r.Expr == "" || r.For == "" {
			t.Errorf("rule %+v lacks alert, expr or for", r)
		}
		exprs = append(exprs, r.Expr)
	}

	data, err = os.ReadFile("monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	used := 0
	for _, e := range exprs {
		for _, name := range metricRE.FindAllString(e, -1) {
			used++
			if !names[name] {
				t.Errorf("monitoring uses %s, which cascade does not export (expr: %s)", name, strings.TrimSpace(e))
			}
		}
	}
	if used < 10 {
		t.Errorf("only %d cascade metric references found; the parser is probably broken", used)
	}
}
