package deploy

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/deploy/monitoring"
)

// exported maps every metric name cascade exports (with a histogram's _bucket, _sum and _count
// series) to its labels. It reads docs/metrics.md, which is generated from the registry that
// cmd/cascade builds (newMetricSet, the graph's scrape-time collector and the dry-run counter)
// and which TestMetricsDoc keeps current, so no registration is listed here by hand.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(cascade_[a-z_]+)` \\| (counter|gauge|histogram) \\| ([a-z_, ]*) \\|")
	names := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		var labels []string
		for l := range strings.SplitSeq(m[3], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		names[m[1]] = labels
		if m[2] == "histogram" {
			names[m[1]+"_bucket"] = append(slices.Clone(labels), "le")
			names[m[1]+"_sum"] = labels
			names[m[1]+"_count"] = labels
		}
	}
	if len(names) < 20 {
		t.Fatalf("read only %d metrics from docs/metrics.md; its table format changed", len(names))
	}
	return names
}

// monitoringExprs returns every expression of the alert rules and the dashboard, each with
// where it comes from.
func monitoringExprs(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	rules, err := monitoring.Alerts()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		exprs["alert "+r.Alert] = r.Expr
	}
	dash, err := monitoring.LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			exprs["panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	return exprs
}

var (
	metricRE = regexp.MustCompile(`cascade_[a-z_]+`)
	// selectorRE is a metric name with its label matchers, matcherRE one matcher.
	selectorRE = regexp.MustCompile(`(cascade_[a-z_]+)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	variableRE = regexp.MustCompile(`\$\{?[a-zA-Z_]+\}?`)
)

// targetLabels are the labels a scrape adds to every series: Prometheus' own, those of the
// Prometheus Operator's ServiceMonitor targets, and the cluster label of a multi-cluster store.
var targetLabels = []string{"job", "instance", "namespace", "service", "endpoint", "pod", "container", "cluster"}

// TestMonitoringUsesRealMetrics: every cascade_* metric in the alert rules and the dashboard is
// one cascade exports (docs/metrics.md), every label they match on is one of its labels, and the
// only Grafana variables a query uses are the dashboard's own and $__rate_interval (which the
// e2e test and the snapshot replace as Grafana does), so a rename cannot silently break them.
func TestMonitoringUsesRealMetrics(t *testing.T) {
	names := exported(t)
	used := 0
	for where, e := range monitoringExprs(t) {
		for _, name := range metricRE.FindAllString(e, -1) {
			used++
			if _, ok := names[name]; !ok {
				t.Errorf("%s uses %s, which cascade does not export (expr: %s)", where, name, strings.TrimSpace(e))
			}
		}
		for _, sel := range selectorRE.FindAllStringSubmatch(e, -1) {
			labels, ok := names[sel[1]]
			if !ok {
				continue
			}
			for _, m := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
				if !slices.Contains(labels, m[1]) && !slices.Contains(targetLabels, m[1]) {
					t.Errorf("%s matches label %q of %s, which has labels %v (expr: %s)", where, m[1], sel[1], labels, strings.TrimSpace(e))
				}
			}
		}
		for _, v := range variableRE.FindAllString(e, -1) {
			if !slices.Contains(monitoring.Variables, v) {
				t.Errorf("%s uses the Grafana variable %s; only %v are defined and replaced for Prometheus (expr: %s)", where, v, monitoring.Variables, e)
			}
		}
	}
	if used < 25 {
		t.Errorf("only %d cascade metric references found; the parser is probably broken", used)
	}
}

// TestAlertRules: the alerts the issue asks for exist, each rule has a `for`, a severity and a
// summary, and alerts-test.yaml shows every alert both firing and not firing (promtool runs it:
// make test-rules).
func TestAlertRules(t *testing.T) {
	rules, err := monitoring.Alerts()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
		if r.Alert == "" || r.Expr == "" || r.For == "" {
			t.Errorf("rule %+v lacks alert, expr or for", r)
		}
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		for _, a := range []string{"summary", "description"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s has no %s", r.Alert, a)
			}
		}
		if want := runbookURL + "#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q (its section of docs/runbooks.md)", r.Alert, r.Annotations["runbook_url"], want)
		}
		// No job name: a plain scrape config and a ServiceMonitor name the job differently.
		if m := jobMatcherRE.FindString(r.Expr); m != "" {
			t.Errorf("%s matches on the job (%s): the rules must hold however cascade is scraped", r.Alert, m)
		}
	}
	for _, want := range []string{"CascadeDown", "CascadeNoLeader", "CascadeOwnerWaitingLong", "CascadeResourceUnsynced", "CascadeAPIErrors"} {
		if !slices.Contains(names, want) {
			t.Errorf("alerts.yaml lacks %s", want)
		}
	}

	data, err := os.ReadFile("monitoring/" + monitoring.AlertsTest)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			Name          string `json:"name"`
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatalf("alerts-test.yaml: %v", err)
	}
	if !slices.Equal(tests.RuleFiles, []string{monitoring.AlertsFile}) {
		t.Errorf("alerts-test.yaml tests %v, want [%s]", tests.RuleFiles, monitoring.AlertsFile)
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if !slices.Contains(names, a.Alertname) {
				t.Errorf("test %q checks %s, which alerts.yaml does not have", tc.Name, a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, n := range names {
		if !firing[n] || !quiet[n] {
			t.Errorf("alerts-test.yaml must show %s firing (%v) and not firing (%v)", n, firing[n], quiet[n])
		}
	}
}

// TestDashboard: every panel has a title and queries, the key panels the e2e test and the
// snapshot read exist, and the panels the issue asks for are there.
func TestDashboard(t *testing.T) {
	dash, err := monitoring.LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %+v has no title or no query", p)
		}
		if seen[p.Title] {
			t.Errorf("two panels are titled %q", p.Title)
		}
		seen[p.Title] = true
	}
	for _, k := range monitoring.KeyPanels {
		if !seen[k] {
			t.Errorf("key panel %q is not in the dashboard", k)
		}
	}
	exprs := monitoringExprs(t)
	var all strings.Builder
	for where, e := range exprs {
		if strings.HasPrefix(where, "panel ") {
			all.WriteString(e + "\n")
		}
	}
	for _, m := range []string{
		"cascade_graph_nodes", "cascade_graph_objects", "cascade_collection_duration_seconds_bucket",
		"cascade_collected_total", "cascade_workqueue_depth", "cascade_api_requests_total",
		"cascade_worker_errors_total", "cascade_resource_unsynced", "cascade_oldest_waiting_owner_seconds",
		"cascade_leader",
		// Fleet mode: every per-member series, and the members by state.
		"cascade_member_up", "cascade_member_graph_objects", "cascade_member_delete_queue_depth",
		"cascade_member_owners_waiting", "cascade_fleet_members",
	} {
		if !strings.Contains(all.String(), m) {
			t.Errorf("no dashboard panel shows %s", m)
		}
	}
}

// runbookURL is where the alerts' runbooks are published: docs/runbooks.md on the main branch.
const runbookURL = "https://github.com/cascade-gc/cascade/blob/main/docs/runbooks.md"

// jobMatcherRE is a matcher on the job label.
var jobMatcherRE = regexp.MustCompile(`\bjob\s*(=~|!~|!=|=)\s*"[^"]*"`)

// TestRunbooks: docs/runbooks.md has one section per alert, the target of its runbook_url (a
// level-2 heading that is the alert's name: GitHub's anchor is its lower case), each with the
// meaning, the impact, the diagnosis (which names the tools it uses) and the fix; and no section
// for an alert that does not exist.
func TestRunbooks(t *testing.T) {
	rules, err := monitoring.Alerts()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]map[string]string{} // alert → subsection → text
	var alert, sub string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			alert, sub = strings.TrimPrefix(line, "## "), ""
			if strings.HasPrefix(alert, "Cascade") {
				sections[alert] = map[string]string{}
			}
		case strings.HasPrefix(line, "### "):
			sub = strings.TrimPrefix(line, "### ")
		case sections[alert] != nil && sub != "":
			sections[alert][sub] += line + "\n"
		}
	}
	names := map[string]bool{}
	for _, r := range rules {
		names[r.Alert] = true
		s, ok := sections[r.Alert]
		if !ok {
			t.Errorf("docs/runbooks.md has no section \"## %s\"", r.Alert)
			continue
		}
		for _, sub := range []string{"Meaning", "Impact", "Diagnosis", "Fix"} {
			if strings.TrimSpace(s[sub]) == "" {
				t.Errorf("docs/runbooks.md, %s: no \"### %s\" or it is empty", r.Alert, sub)
			}
		}
		if !strings.Contains(s["Diagnosis"], "`") {
			t.Errorf("docs/runbooks.md, %s: the diagnosis names no command, metric or endpoint", r.Alert)
		}
	}
	for a := range sections {
		if !names[a] {
			t.Errorf("docs/runbooks.md has a section for %s, which alerts.yaml does not have", a)
		}
	}
}

// TestDashboardVariables: the dashboard has the datasource, job, cluster and member variables,
// the job comes from cascade's own metric (no job name written anywhere), the member from the
// member label of cascade_member_up (several at once, All as every member), and every selector
// of every query narrows to the chosen job and cluster; a fleet's per-member series (those with
// a member label, docs/metrics.md) narrow to the chosen members too, and some panel shows them.
func TestDashboardVariables(t *testing.T) {
	dash, err := monitoring.LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]monitoring.Variable{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v
	}
	if v := vars["datasource"]; v.Type != "datasource" {
		t.Errorf("variable datasource %+v, want a datasource variable", v)
	}
	if v := vars["job"]; v.Type != "query" || !strings.Contains(v.Definition, "cascade_") || !v.IncludeAll || v.AllValue != "" {
		t.Errorf("variable job %+v: want label_values of a cascade metric, with All as the jobs found", v)
	}
	if v := vars["cluster"]; v.Type != "query" || !strings.Contains(v.Definition, "cluster") || !v.IncludeAll || v.AllValue != monitoring.AllClusters {
		t.Errorf("variable cluster %+v: want label_values(..., cluster), All as %s (series without a cluster label too)", v, monitoring.AllClusters)
	}
	if v := vars["member"]; v.Type != "query" || v.Definition != `label_values(cascade_member_up{job=~"`+monitoring.JobVariable+`", cluster=~"`+monitoring.ClusterVariable+`"}, member)` ||
		!v.Multi || !v.IncludeAll || v.AllValue != monitoring.AllMembers {
		t.Errorf("variable member %+v: want label_values of cascade_member_up's member in the chosen jobs and cluster, several at once, All as %s", v, monitoring.AllMembers)
	}
	names := exported(t)
	perMember := 0
	sel := regexp.MustCompile(`\b((?:cascade|process|go)_[a-z_]+|up)(\{[^}]*\})?`)
	for where, e := range monitoringExprs(t) {
		if !strings.HasPrefix(where, "panel ") {
			continue
		}
		for _, m := range sel.FindAllStringSubmatch(e, -1) {
			job := strings.Contains(m[2], `job=~"`+monitoring.JobVariable+`"`)
			cluster := strings.Contains(m[2], `cluster=~"`+monitoring.ClusterVariable+`"`)
			member := strings.Contains(m[2], `member=~"`+monitoring.MemberVariable+`"`)
			if slices.Contains(names[m[1]], "member") {
				perMember++
				if !job || !cluster || !member {
					t.Errorf("%s: %s%s is a member's series: it must select the dashboard's job, cluster and members (member=~%q) (expr: %s)", where, m[1], m[2], monitoring.MemberVariable, e)
				}
				continue
			}
			if !job || !cluster || member {
				t.Errorf("%s: %s%s does not select the dashboard's job and cluster (expr: %s)", where, m[1], m[2], e)
			}
		}
	}
	if perMember == 0 {
		t.Errorf("no panel shows a member's series: the member variable %s is used nowhere", monitoring.MemberVariable)
	}
}
