package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestPrometheusConfig(t *testing.T) {
	dir := t.TempDir()
	b, err := prometheusConfig(dir, PrometheusOptions{
		ScrapeInterval: 2 * time.Second,
		Jobs:           map[string][]string{"cascade": {"http://127.0.0.1:1234/metrics", "http://127.0.0.1:1235/metrics"}},
		Rules:          [][]byte{[]byte("groups: []\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Global        map[string]string `json:"global"`
		RuleFiles     []string          `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			MetricsPath   string `json:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if cfg.Global["scrape_interval"] != "2s" || cfg.Global["scrape_timeout"] != "2s" || cfg.Global["evaluation_interval"] != "2s" {
		t.Errorf("global %v", cfg.Global)
	}
	if len(cfg.RuleFiles) != 1 || filepath.Dir(cfg.RuleFiles[0]) != dir {
		t.Errorf("rule files %v", cfg.RuleFiles)
	} else if r, err := os.ReadFile(cfg.RuleFiles[0]); err != nil || string(r) != "groups: []\n" {
		t.Errorf("rule file: %q, %v", r, err)
	}
	if len(cfg.ScrapeConfigs) != 1 {
		t.Fatalf("scrape configs %+v", cfg.ScrapeConfigs)
	}
	sc := cfg.ScrapeConfigs[0]
	if sc.JobName != "cascade" || sc.MetricsPath != "/metrics" || strings.Join(sc.StaticConfigs[0].Targets, ",") != "127.0.0.1:1234,127.0.0.1:1235" {
		t.Errorf("scrape config %+v", sc)
	}

	if _, err := prometheusConfig(dir, PrometheusOptions{Jobs: map[string][]string{"x": {"127.0.0.1:1234"}}}); err == nil {
		t.Error("a target without a scheme was accepted")
	}
}
