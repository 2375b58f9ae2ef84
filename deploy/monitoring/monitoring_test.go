package monitoring

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func TestTargetQueryAndLegend(t *testing.T) {
	tg := Target{Expr: "sum by (code) (rate(x_total[$__rate_interval]))", LegendFormat: "{{code}} {{ verb }}"}
	if got, want := tg.Query(90*time.Second), "sum by (code) (rate(x_total[1m30s]))"; got != want {
		t.Errorf("Query = %q, want %q", got, want)
	}
	if got, want := tg.Legend(model.Metric{"code": "200", "verb": "GET"}), "200 GET"; got != want {
		t.Errorf("Legend = %q, want %q", got, want)
	}
	fleet := Target{Expr: `min by (member) (up_total{job=~"$job", cluster=~"$cluster"} * on () group_left z{member=~"$member"})`}
	if got, want := fleet.Query(time.Minute), `min by (member) (up_total{job=~".+", cluster=~".*"} * on () group_left z{member=~".+"})`; got != want {
		t.Errorf("Query = %q, want %q", got, want)
	}
	plain := Target{Expr: "max(y)"}
	if got := plain.Legend(model.Metric{}); got != "max(y)" {
		t.Errorf("Legend without format or labels = %q, want the expression", got)
	}
	if got := plain.Legend(model.Metric{"__name__": "y", "job": "cascade"}); got != `{job="cascade"}` {
		t.Errorf("Legend without format = %q", got)
	}
	if got := GrafanaRateInterval(time.Second, time.Second); got != 4*time.Second {
		t.Errorf("GrafanaRateInterval(1s, 1s) = %s, want 4s", got)
	}
	if got := GrafanaRateInterval(15*time.Second, time.Minute); got != 75*time.Second {
		t.Errorf("GrafanaRateInterval(15s, 1m) = %s, want 1m15s", got)
	}
}

func TestEmbeddedFilesLoad(t *testing.T) {
	rules, err := Alerts()
	if err != nil || len(rules) == 0 {
		t.Fatalf("Alerts: %d rules, %v", len(rules), err)
	}
	d, err := LoadDashboard()
	if err != nil || len(d.Panels) == 0 {
		t.Fatalf("LoadDashboard: %d panels, %v", len(d.Panels), err)
	}
	if p, ok := d.Panel(PanelLatency); !ok || p.Unit() != "s" {
		t.Errorf("latency panel %+v (found %v): want unit s", p, ok)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	start := time.Date(2026, 11, 23, 1, 2, 3, 0, time.UTC)
	s := Snapshot{Scenario: "x", Start: start, End: start.Add(time.Minute), Panels: []SnapshotPanel{{
		Title: PanelLatency, Unit: "s",
		Series: []SnapshotSeries{{Legend: "p50 Background", Values: []model.SamplePair{
			{Timestamp: model.TimeFromUnixNano(start.UnixNano()), Value: 1.5},
			{Timestamp: model.TimeFromUnixNano(start.Add(time.Second).UnixNano()), Value: model.SampleValue(math.NaN())},
		}}},
	}}}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := WriteSnapshot(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := got.Panel(PanelLatency)
	if !ok || len(p.Series) != 1 || len(p.Series[0].Values) != 2 {
		t.Fatalf("read back %+v", got)
	}
	if v := p.Series[0].Values; v[0].Value != 1.5 || !math.IsNaN(float64(v[1].Value)) || !got.Start.Equal(start) {
		t.Errorf("values %v, start %s", v, got.Start)
	}
}
