// Package monitoring holds cascade's Prometheus alert rules (alerts.yaml, unit tested by
// alerts-test.yaml with promtool) and Grafana dashboard (dashboard.json), embedded, with the one
// reader of both that the tests and the dashboard snapshot share: deploy's test checks every
// metric they name against docs/metrics.md, the e2e test TestMonitoringOnPrometheus evaluates
// every expression on a real Prometheus scraping cascade, and e2e/benchreport draws a Snapshot
// of the dashboard's key panels (docs/dashboard-*.png).
package monitoring

import (
	_ "embed" // the rule and dashboard files
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

var (
	//go:embed alerts.yaml
	alertsYAML []byte
	//go:embed alerts-test.yaml
	alertsTestYAML []byte
	//go:embed dashboard.json
	dashboardJSON []byte
)

// AlertsFile and DashboardFile are the files' names in this directory.
const (
	AlertsFile    = "alerts.yaml"
	AlertsTest    = "alerts-test.yaml"
	DashboardFile = "dashboard.json"
)

// AlertsYAML is alerts.yaml itself, to load into a Prometheus as a rule file.
func AlertsYAML() []byte { return append([]byte(nil), alertsYAML...) }

// Rule is one alerting rule of alerts.yaml.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Alerts returns every rule of alerts.yaml, in file order.
func Alerts() ([]Rule, error) {
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(alertsYAML, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", AlertsFile, err)
	}
	var rules []Rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules, nil
}

// Dashboard is the part of the Grafana dashboard that queries Prometheus.
type Dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
	Panels []Panel `json:"panels"`
}

// Variable is one of the dashboard's template variables.
type Variable struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Definition is a query variable's query (label_values(...)).
	Definition string `json:"definition"`
	IncludeAll bool   `json:"includeAll"`
	AllValue   string `json:"allValue"`
	// Multi lets several values be chosen at once.
	Multi bool `json:"multi"`
}

// Panel is one dashboard panel.
type Panel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []Target `json:"targets"`
}

// Unit is the panel's Grafana unit ("s", "bytes", "percentunit"; empty for plain numbers).
func (p Panel) Unit() string { return p.FieldConfig.Defaults.Unit }

// Target is one query of a panel.
type Target struct {
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
}

// RateInterval is the Grafana variable for the range of rate(), which Grafana sets to max(4 ×
// the scrape interval, the query step + the scrape interval).
const RateInterval = "$__rate_interval"

// JobVariable and ClusterVariable are the dashboard's own variables, which every query's
// selectors use: the scrape jobs that export cascade's metrics (label_values of cascade_leader:
// no job name is written in the dashboard) and the cluster label of a multi-cluster store.
// MemberVariable is the fleet's members chosen (label_values of cascade_member_up's member
// label), which the per-member series' selectors use besides JobVariable and ClusterVariable.
const (
	JobVariable     = "$job"
	ClusterVariable = "$cluster"
	MemberVariable  = "$member"
)

// Variables are every Grafana variable a query may use.
var Variables = []string{RateInterval, JobVariable, ClusterVariable, MemberVariable}

// AllJobs, AllClusters and AllMembers are the values Query gives JobVariable, ClusterVariable
// and MemberVariable: every job, every cluster (also series without a cluster label: the
// dashboard's "All" for cluster is .*; for job Grafana sends the alternation of the jobs it
// found, which .+ stands for here), and every member (the dashboard's "All" for member is .+:
// a per-member series always names its member).
const (
	AllJobs     = ".+"
	AllClusters = ".*"
	AllMembers  = ".+"
)

// GrafanaRateInterval is the value Grafana gives RateInterval for a scrape interval and a step.
func GrafanaRateInterval(scrape, step time.Duration) time.Duration {
	return max(4*scrape, step+scrape)
}

// Query is the target's expression as Grafana sends it to Prometheus, with RateInterval
// replaced by rateInterval and the job, cluster and member variables by AllJobs, AllClusters
// and AllMembers.
func (t Target) Query(rateInterval time.Duration) string {
	return strings.NewReplacer(
		RateInterval, model.Duration(rateInterval).String(),
		JobVariable, AllJobs,
		ClusterVariable, AllClusters,
		MemberVariable, AllMembers,
	).Replace(t.Expr)
}

var legendRE = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// Legend is the series' name as Grafana shows it: the legend format with {{label}} replaced by
// the series' label values, or the series' labels without the metric name when the format is
// empty.
func (t Target) Legend(m model.Metric) string {
	if t.LegendFormat == "" {
		c := m.Clone()
		delete(c, model.MetricNameLabel)
		if len(c) == 0 {
			return t.Expr
		}
		return c.String()
	}
	return legendRE.ReplaceAllStringFunc(t.LegendFormat, func(s string) string {
		return string(m[model.LabelName(legendRE.FindStringSubmatch(s)[1])])
	})
}

// LoadDashboard returns the dashboard.
func LoadDashboard() (Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return d, fmt.Errorf("%s: %w", DashboardFile, err)
	}
	return d, nil
}

// Panel returns the panel titled title.
func (d Dashboard) Panel(title string) (Panel, bool) {
	for _, p := range d.Panels {
		if p.Title == title {
			return p, true
		}
	}
	return Panel{}, false
}

// The key panels: the ones the e2e test requires data from after a cascade, and the ones the
// snapshot draws.
const (
	PanelGraphSize  = "Graph size"
	PanelLatency    = "Collection latency by propagation, p50 / p99"
	PanelThroughput = "Collected per second"
	PanelQueueDepth = "Work queue depth"
	PanelAPI        = "API requests per second by code"
)

// KeyPanels are the key panels' titles, in the order the snapshot draws them.
var KeyPanels = []string{PanelGraphSize, PanelLatency, PanelThroughput, PanelQueueDepth, PanelAPI}

// Snapshot is what the dashboard showed over one real run: each panel's series read back from
// Prometheus with query_range, as Grafana would have drawn them. TestMonitoringOnPrometheus
// writes it (make dashboard-snapshot); e2e/benchreport draws it.
type Snapshot struct {
	// Scenario says what ran; Prometheus and Cascade are their versions.
	Scenario   string `json:"scenario"`
	Prometheus string `json:"prometheus"`
	Cascade    string `json:"cascade"`
	// Machine is the host the run was on (CPUs, OS).
	Machine string    `json:"machine"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	// Step is the query_range step, ScrapeInterval Prometheus' scrape interval and RateInterval
	// the value given to $__rate_interval, as Prometheus durations.
	Step           string `json:"step"`
	ScrapeInterval string `json:"scrape_interval"`
	RateInterval   string `json:"rate_interval"`
	// Events are what the scenario did when, for the charts to mark.
	Events []Event         `json:"events"`
	Panels []SnapshotPanel `json:"panels"`
}

// Event is one step of the scenario.
type Event struct {
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}

// SnapshotPanel is one panel's series.
type SnapshotPanel struct {
	Title  string           `json:"title"`
	Unit   string           `json:"unit,omitempty"`
	Series []SnapshotSeries `json:"series"`
}

// SnapshotSeries is one series: its legend, the query it came from, and its values (Prometheus'
// [unix seconds, "value"] pairs; "NaN" where the query had no value, as a histogram quantile
// between collections).
type SnapshotSeries struct {
	Legend string             `json:"legend"`
	Expr   string             `json:"expr"`
	Values []model.SamplePair `json:"values"`
}

// Panel returns the snapshot's panel titled title.
func (s Snapshot) Panel(title string) (SnapshotPanel, bool) {
	for _, p := range s.Panels {
		if p.Title == title {
			return p, true
		}
	}
	return SnapshotPanel{}, false
}

// WriteSnapshot writes s to path as indented JSON.
func WriteSnapshot(path string, s Snapshot) error {
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadSnapshot reads a snapshot written by WriteSnapshot.
func ReadSnapshot(path string) (Snapshot, error) {
	var s Snapshot
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
