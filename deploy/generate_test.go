package deploy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/cascade-gc/cascade/deploy/chartdoc"
	"github.com/cascade-gc/cascade/deploy/monitoring"
)

var update = flag.Bool("update", false, "rewrite the generated files: the monitoring copies and rule tests, the chart README (make generate)")

// generatedFiles are the files made from deploy/monitoring's alert rules, their tests and the
// dashboard, which stay the one source: the Helm chart and the kustomize component read copies
// of them (neither can read files outside its own directory), and the rule tests are written
// again for each labeling the rules must hold for. Paths are from deploy/.
func generatedFiles(t *testing.T) map[string][]byte {
	t.Helper()
	rule, err := monitoring.PrometheusRule("cascade", "cascade-system")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"chart/files/" + monitoring.AlertsFile:              monitoring.AlertsYAML(),
		"chart/files/" + monitoring.DashboardFile:           monitoring.DashboardJSON(),
		"components/monitoring/" + monitoring.DashboardFile: monitoring.DashboardJSON(),
		"components/monitoring/prometheusrule.yaml":         rule,
	}
	for _, l := range monitoring.Labelings {
		b, err := monitoring.RelabelTests(monitoring.AlertsTestYAML(), l)
		if err != nil {
			t.Fatalf("%s: %v", l.File(), err)
		}
		files["monitoring/"+l.File()] = b
	}
	return files
}

// TestGeneratedMonitoring: the generated monitoring files are what their sources make (run with
// -update, make generate, to rewrite them; make verify runs this test).
func TestGeneratedMonitoring(t *testing.T) {
	for path, want := range generatedFiles(t) {
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v: run make generate", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/%s differs from what deploy/monitoring makes: run make generate (and edit deploy/monitoring, not the copy)", path)
		}
	}
}

// chartReadmeIntro opens deploy/chart/README.md, before what values.yaml says.
const chartReadmeIntro = `# cascade's Helm chart

<!-- Generated from values.yaml by make generate (deploy's TestChartReadme); do not edit: make verify fails when it is stale. -->

cascade, an out-of-tree Kubernetes garbage collector, in one of three modes: ` + "`collector`" + ` (the
cluster's garbage collector), ` + "`companion`" + ` (beside kube-controller-manager's collector, as on
managed clusters) or ` + "`dry-run`" + ` (shadow mode). The chart renders what the kustomize base and
overlays in deploy/ create, mode for mode. From a clone of the repository:

    kubectl apply -f deploy/base/namespace.yaml    # cascade-system, restricted Pod Security
    helm install cascade deploy/chart -n cascade-system -f values.yaml
    helm test cascade -n cascade-system            # /readyz and /metrics, with a token

- Installing, upgrading, removing: [docs/install.md](../../docs/install.md), [docs/uninstall.md](../../docs/uninstall.md)
- Which mode: [docs/modes.md](../../docs/modes.md); GKE, EKS, AKS, OpenShift: [docs/platforms.md](../../docs/platforms.md)
- Monitoring, and verifying cascade's certificate: [docs/operations.md](../../docs/operations.md)

## Values

`

// TestChartReadme: deploy/chart/README.md is what values.yaml's comments say, every value has a
// comment (make generate rewrites the file with -update; make verify runs this test).
func TestChartReadme(t *testing.T) {
	src, err := os.ReadFile("chart/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	header, values, err := chartdoc.Parse(src)
	if err != nil {
		t.Fatalf("chart/values.yaml: %v", err)
	}
	want := []byte(chartReadmeIntro + chartdoc.Paragraphs(header) + "\n" + chartdoc.Table(values))
	const path = "chart/README.md"
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run make generate", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("deploy/%s differs from what chart/values.yaml's comments make: run make generate (and edit values.yaml, not the README)", path)
	}
}
