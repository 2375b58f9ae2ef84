package monitoring

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Labeling is one way a Prometheus labels the series it scrapes from cascade. The rules must
// hold for each: alerts-test.yaml is written for a plain scrape config (PlainTarget), and
// RelabelTests rewrites it for the others.
type Labeling struct {
	// Name makes the file name: alerts-test-NAME.yaml.
	Name string
	// About says which setup labels series this way, for the file's header.
	About string
	// Target are the target labels that replace PlainTarget in each series of cascade's.
	Target string
	// Routing are the labels that every alert on cascade's series keeps: namespace, cluster.
	Routing map[string]string
}

// PlainTarget is the target label of cascade's series in alerts-test.yaml: a plain scrape
// config with job_name cascade (instance is left as it is).
const PlainTarget = `job="cascade"`

// Labelings are the labelings besides the plain scrape config that the rules are tested under.
var Labelings = []Labeling{
	{
		Name: "servicemonitor",
		About: "a ServiceMonitor on the cascade-metrics Service without a jobLabel (the job is the " +
			"Service's name) in namespace cascade-system, as the Prometheus Operator labels targets",
		Target: `job="cascade-metrics", namespace="cascade-system", service="cascade-metrics", ` +
			`endpoint="metrics", container="cascade"`,
		Routing: map[string]string{"namespace": "cascade-system"},
	},
	{
		Name: "cluster",
		About: "the ServiceMonitor of deploy/components/monitoring and of the Helm chart (jobLabel " +
			"app.kubernetes.io/name: the job is cascade) in namespace gc, in a multi-cluster store " +
			"that adds a cluster label (Thanos, Mimir)",
		Target: `job="cascade", namespace="gc", service="cascade-metrics", endpoint="metrics", ` +
			`container="cascade", cluster="east-1"`,
		Routing: map[string]string{"namespace": "gc", "cluster": "east-1"},
	},
}

// File is the name of the labeling's test file.
func (l Labeling) File() string { return "alerts-test-" + l.Name + ".yaml" }

// RelabelTests rewrites promtool rule tests written for the plain labeling (tests, the content
// of alerts-test.yaml) for the labeling l: every input series with PlainTarget gets l's target
// labels instead, and in every test that has such a series each expected alert gets l's routing
// labels. A test without cascade's series (no cascade scraped at all) is left as it is: its
// alerts have no namespace to keep.
func RelabelTests(tests []byte, l Labeling) ([]byte, error) {
	var f map[string]any
	if err := yaml.Unmarshal(tests, &f); err != nil {
		return nil, err
	}
	cases, _ := f["tests"].([]any)
	if len(cases) == 0 {
		return nil, fmt.Errorf("no tests")
	}
	relabelled := 0
	for _, c := range cases {
		tc, _ := c.(map[string]any)
		series, _ := tc["input_series"].([]any)
		ours := false
		for _, s := range series {
			in, _ := s.(map[string]any)
			sel, _ := in["series"].(string)
			if strings.Contains(sel, PlainTarget) {
				in["series"] = strings.Replace(sel, PlainTarget, l.Target, 1)
				ours = true
			}
		}
		if !ours {
			continue
		}
		relabelled++
		checks, _ := tc["alert_rule_test"].([]any)
		for _, ch := range checks {
			art, _ := ch.(map[string]any)
			alerts, _ := art["exp_alerts"].([]any)
			for _, a := range alerts {
				exp, _ := a.(map[string]any)
				labels, _ := exp["exp_labels"].(map[string]any)
				if labels == nil {
					labels = map[string]any{}
					exp["exp_labels"] = labels
				}
				for k, v := range l.Routing {
					labels[k] = v
				}
			}
		}
	}
	if relabelled == 0 {
		return nil, fmt.Errorf("no series labelled %s", PlainTarget)
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# Generated from %s by `make generate` (monitoring.RelabelTests): DO NOT EDIT.\n"+
		"# The same tests, with cascade's series labelled as by %s.\n"+
		"# Alerts on cascade's series keep %s.\n", AlertsTest, l.About, routingList(l.Routing))
	return append([]byte(header), out...), nil
}

func routingList(m map[string]string) string {
	var parts []string
	for _, k := range []string{"namespace", "cluster"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%q", k, v))
		}
	}
	return strings.Join(parts, " and ")
}

// PrometheusRule is alerts.yaml as the Prometheus Operator's PrometheusRule named name in
// namespace, labelled app.kubernetes.io/name: cascade: the file's groups, byte for byte, under
// spec (its header comment is left out).
func PrometheusRule(name, namespace string) ([]byte, error) {
	i := bytes.Index(alertsYAML, []byte("\ngroups:\n"))
	if i < 0 {
		return nil, fmt.Errorf("%s: no top-level groups", AlertsFile)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Generated from deploy/monitoring/%s by `make generate`: DO NOT EDIT (edit that file).\n", AlertsFile)
	fmt.Fprintf(&b, "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: %s\n  namespace: %s\n"+
		"  labels:\n    app.kubernetes.io/name: cascade\nspec:\n", name, namespace)
	for line := range strings.SplitSeq(strings.TrimRight(string(alertsYAML[i+1:]), "\n"), "\n") {
		if line == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString("  " + line + "\n")
	}
	return b.Bytes(), nil
}

// AlertsTestYAML is alerts-test.yaml itself.
func AlertsTestYAML() []byte { return append([]byte(nil), alertsTestYAML...) }

// DashboardJSON is dashboard.json itself.
func DashboardJSON() []byte { return append([]byte(nil), dashboardJSON...) }
