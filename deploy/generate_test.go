package deploy

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/cascade-gc/cascade/deploy/monitoring"
)

var update = flag.Bool("update", false, "rewrite the generated monitoring files (make generate)")

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
