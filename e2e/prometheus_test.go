//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/deploy/monitoring"
	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// snapshotEnv names the file TestMonitoringOnPrometheus writes the dashboard's key panels to
// (make dashboard-snapshot), with a longer scenario; unset, nothing is written.
const snapshotEnv = "CASCADE_DASHBOARD_SNAPSHOT"

// cascadeRound is one step of the scenario: owners with dependents each, deleted half in the
// background and half in the foreground, plus one owner deleted with orphan.
type cascadeRound struct{ owners, dependents int }

// TestMonitoringOnPrometheus (issue 12.2 and 12.3): a real Prometheus (Debian's package) scrapes
// a cascade every second, with deploy/monitoring/alerts.yaml loaded, while it collects a few
// rounds of owners deleted in the background, in the foreground and with orphan. Then every
// dashboard query and every alert expression is evaluated through /api/v1/query: each parses
// and evaluates without error, the key panels (graph size, collection latency, throughput, queue
// depth, API requests) return data, every rule is loaded and evaluated without error, and
// CascadeDown and CascadeNoLeader are quiet. With $CASCADE_DASHBOARD_SNAPSHOT set it runs a
// longer scenario and writes the key panels, read back with query_range, to that file
// (make dashboard-snapshot draws them into docs/).
func TestMonitoringOnPrometheus(t *testing.T) {
	snapshotPath := os.Getenv(snapshotEnv)
	rounds := []cascadeRound{{4, 100}, {4, 100}}
	if snapshotPath != "" {
		rounds = []cascadeRound{{4, 100}, {6, 200}, {4, 400}}
	}
	promBin := framework.RequirePrometheus(t) // before anything starts: it may skip
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	ctx := context.Background()
	// A client budget of 40 QPS (the default is none), so that the queues fill and drain
	// visibly on the dashboard's panels.
	c := suite.StartCascade(t, "--kube-api-qps=40", "--kube-api-burst=60")

	// Warm-up: one small cascade of each propagation before the first scrape, so that the
	// labelled series they create (collected, collection latency per propagation, finalizers
	// removed, requests by verb and code) exist when Prometheus first sees them: it takes a
	// series' first sample as its start, and would not count the increase that created it.
	runRound(t, cs, c, nil, ns, "warmup", cascadeRound{2, 1}, nil)

	const scrape = time.Second
	prom := suite.StartPrometheus(t, harness.PrometheusOptions{
		Bin:            promBin,
		ScrapeInterval: scrape,
		Jobs:           map[string][]string{"cascade": {c.MetricsURL}},
		Rules:          [][]byte{monitoring.AlertsYAML()},
	})
	framework.Eventually(t, 30*time.Second, "three scrapes of cascade", func() (bool, error) {
		v, err := prom.Query(ctx, `count_over_time(up{job="cascade"}[1m]) >= 3 and min_over_time(up{job="cascade"}[1m]) == 1`, time.Now())
		if err != nil {
			return false, err
		}
		return len(v.(model.Vector)) == 1, nil
	})
	start := time.Now().Add(-2 * scrape) // the first scrape (Prometheus starts scraping a few seconds after it is ready)

	var events []monitoring.Event
	event := func(format string, args ...any) {
		events = append(events, monitoring.Event{Time: time.Now(), Text: fmt.Sprintf(format, args...)})
	}
	for i, r := range rounds {
		runRound(t, cs, c, prom, ns, fmt.Sprintf("r%d", i), r, event)
		scrapedSince(t, prom, time.Now(), 3)
	}
	scrapedSince(t, prom, time.Now(), 3) // the last values scraped
	end := time.Now()
	t.Logf("scenario: %d rounds in %s", len(rounds), end.Sub(start).Round(time.Second))

	// Instant queries at the end, rate() over the whole run: what the scenario did is in them.
	window := end.Sub(start).Truncate(time.Second) + time.Second
	dash, err := monitoring.LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		key := slices.Contains(monitoring.KeyPanels, p.Title)
		for _, tg := range p.Targets {
			q := tg.Query(window)
			v, err := prom.Query(ctx, q, end)
			if err != nil {
				t.Errorf("panel %q: %s: %v", p.Title, q, err)
				continue
			}
			vec, _ := v.(model.Vector)
			t.Logf("panel %q: %s: %s", p.Title, q, describe(tg, vec))
			if key && !hasValue(vec) {
				t.Errorf("key panel %q returns no data for %s", p.Title, q)
			}
		}
	}
	// The queue depth panel showed the backlog during the run, not only its end (0).
	queue, _ := dash.Panel(monitoring.PanelQueueDepth)
	q := fmt.Sprintf("max_over_time((%s)[%s:%s])", queue.Targets[0].Query(window), model.Duration(window), model.Duration(scrape))
	if v, err := prom.Query(ctx, q, end); err != nil {
		t.Errorf("%s: %v", q, err)
	} else if d := depthOf(v.(model.Vector), "attempt_to_delete"); d < 1 {
		t.Errorf("the attempt_to_delete queue never held an item at a scrape (%s: %v)", q, v)
	} else {
		t.Logf("deepest attempt_to_delete queue seen: %g", d)
	}
	// The latency panel shows each propagation the scenario used.
	lat, _ := dash.Panel(monitoring.PanelLatency)
	v, err := prom.Query(ctx, lat.Targets[0].Query(window), end)
	if err == nil {
		var got []string
		for _, s := range v.(model.Vector) {
			if !math.IsNaN(float64(s.Value)) {
				got = append(got, string(s.Metric["propagation"]))
			}
		}
		for _, want := range []string{"Background", "Foreground", "Orphan"} {
			if !slices.Contains(got, want) {
				t.Errorf("collection latency has no %s series (has %v)", want, got)
			}
		}
	}

	rules, err := monitoring.Alerts()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		v, err := prom.Query(ctx, r.Expr, end)
		if err != nil {
			t.Errorf("alert %s: %s: %v", r.Alert, r.Expr, err)
			continue
		}
		vec, _ := v.(model.Vector)
		t.Logf("alert %s: %d series", r.Alert, len(vec))
		// This cascade is up and leads; the other alerts may see what earlier tests left in
		// the shared control plane (unknown kinds, held finalizers).
		if (r.Alert == "CascadeDown" || r.Alert == "CascadeNoLeader") && len(vec) != 0 {
			t.Errorf("alert %s's expression holds on a healthy cascade: %v", r.Alert, vec)
		}
	}
	framework.Eventually(t, 30*time.Second, "every rule of alerts.yaml loaded and evaluated without error", func() (bool, error) {
		loaded, err := prom.AlertingRules(ctx)
		if err != nil {
			return false, err
		}
		health := map[string]harness.AlertingRule{}
		for _, r := range loaded {
			health[r.Name] = r
		}
		for _, r := range rules {
			got, ok := health[r.Alert]
			if !ok {
				return false, fmt.Errorf("%s not loaded", r.Alert)
			}
			if got.Health != "ok" {
				return false, fmt.Errorf("%s: health %q %s", r.Alert, got.Health, got.LastError)
			}
		}
		return len(loaded) == len(rules), fmt.Errorf("%d rules loaded, want %d", len(loaded), len(rules))
	})

	if snapshotPath != "" {
		writeSnapshot(t, prom, dash, c, rounds, events, start, end, snapshotPath)
	}
}

// runRound creates r.owners owners with r.dependents dependents each (blocking references),
// and one owner with 10 dependents, then deletes half the owners in the background, the
// others in the foreground and the last with orphan, and waits until cascade (c) is done.
// Before the deletions, the graph's growth shows: c observed every object, and prom (unless
// nil) scraped c twice since.
func runRound(t *testing.T, cs framework.Clients, c *harness.Cascade, prom *harness.Prometheus, ns, prefix string, r cascadeRound, event func(string, ...any)) {
	t.Helper()
	if event == nil {
		event = func(string, ...any) {}
	}
	owners := make([]*corev1.ConfigMap, r.owners)
	for i := range owners {
		owners[i] = cs.CreateCM(t, ns, fmt.Sprintf("%s-owner-%d", prefix, i))
	}
	orphanOwner := cs.CreateCM(t, ns, prefix+"-orphan-owner")
	total := r.owners * r.dependents
	created := cs.CreateConfigMaps(t, ns, total+10, 8, func(i int) *corev1.ConfigMap {
		if i >= total {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-kept-%d", prefix, i-total),
				OwnerReferences: []metav1.OwnerReference{framework.CMRef(orphanOwner)}}}
		}
		o := owners[i/r.dependents]
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-dep-%d", prefix, i),
			OwnerReferences: []metav1.OwnerReference{framework.RefTo("v1", "ConfigMap", o.Name, o.UID, true)}}}
	})
	event("%s: %d owners × %d dependents created", prefix, r.owners, r.dependents)
	// The graph's growth shows before the cascade.
	waitInGraph(t, c, prefix+": the objects created", created)
	if prom != nil {
		scrapedSince(t, prom, time.Now(), 2)
	}
	half := r.owners / 2
	for i, o := range owners {
		policy := metav1.DeletePropagationBackground
		if i >= half {
			policy = metav1.DeletePropagationForeground
		}
		cs.DeleteCM(t, ns, o.Name, policy)
	}
	cs.DeleteCM(t, ns, orphanOwner.Name, metav1.DeletePropagationOrphan)
	event("%s: %d owners deleted in the background, %d in the foreground, 1 with orphan", prefix, half, r.owners-half)
	cs.WaitCMCount(t, ns, prefix+"-dep-", 0, collectTimeout+time.Duration(total)*50*time.Millisecond)
	cs.WaitCMCount(t, ns, prefix+"-owner-", 0, collectTimeout)
	cs.WaitCMGone(t, ns, orphanOwner.Name, collectTimeout)
	cm := cs.MustExistCM(t, ns, prefix+"-kept-0")
	if len(cm.OwnerReferences) != 0 {
		t.Errorf("orphaned dependent %s still references %v", cm.Name, cm.OwnerReferences)
	}
	event("%s: collected", prefix)
}

// scrapedSince waits until prom has scraped cascade n times since mark, so that what cascade's
// metrics said at mark is in prom.
func scrapedSince(t *testing.T, prom *harness.Prometheus, mark time.Time, n int) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("%d scrapes of cascade", n), func() (bool, error) {
		now := time.Now()
		window := now.Sub(mark).Truncate(time.Second) // whole seconds: no scrape before mark counts
		if window == 0 {
			return false, nil
		}
		v, err := prom.Query(context.Background(), fmt.Sprintf(`count_over_time(up{job="cascade"}[%s])`, model.Duration(window)), now)
		if err != nil {
			return false, err
		}
		vec, _ := v.(model.Vector)
		return len(vec) == 1 && int(vec[0].Value) >= n, nil
	})
}

// depthOf is the value of the series of vec whose name label is name.
func depthOf(vec model.Vector, name string) float64 {
	for _, s := range vec {
		if string(s.Metric["name"]) == name {
			return float64(s.Value)
		}
	}
	return 0
}

// hasValue reports whether vec has a sample that is a number.
func hasValue(vec model.Vector) bool {
	for _, s := range vec {
		if !math.IsNaN(float64(s.Value)) {
			return true
		}
	}
	return false
}

// describe is vec as the panel's legend shows it, for the log.
func describe(tg monitoring.Target, vec model.Vector) string {
	if len(vec) == 0 {
		return "no data"
	}
	var parts []string
	for _, s := range vec {
		parts = append(parts, fmt.Sprintf("%s=%.4g", tg.Legend(s.Metric), float64(s.Value)))
	}
	slices.Sort(parts)
	if len(parts) > 8 {
		parts = append(parts[:8], fmt.Sprintf("... (%d series)", len(vec)))
	}
	return strings.Join(parts, " ")
}

// writeSnapshot reads the key panels back with query_range, as Grafana would draw them over
// the run, and writes them to path.
func writeSnapshot(t *testing.T, prom *harness.Prometheus, dash monitoring.Dashboard, c *harness.Cascade,
	rounds []cascadeRound, events []monitoring.Event, start, end time.Time, path string) {
	t.Helper()
	ctx := context.Background()
	step := time.Second
	rate := monitoring.GrafanaRateInterval(prom.ScrapeInterval, step)
	promVersion, err := prom.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cascadeVersion, err := exec.Command(suite.CascadeBin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for _, r := range rounds {
		sizes = append(sizes, fmt.Sprintf("%d×%d", r.owners, r.dependents))
	}
	snap := monitoring.Snapshot{
		Scenario: fmt.Sprintf("cascade with --kube-api-qps 40 (burst 60) and --workers 20 on the local control plane; %d rounds of owners (%s dependents) deleted half in the background, half in the foreground, plus one owner with 10 dependents deleted with orphan",
			len(rounds), strings.Join(sizes, ", ")),
		Prometheus:     promVersion,
		Cascade:        strings.TrimSpace(string(cascadeVersion)),
		Machine:        fmt.Sprintf("%d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH),
		Start:          start.UTC().Truncate(time.Second),
		End:            end.UTC(),
		Step:           model.Duration(step).String(),
		ScrapeInterval: model.Duration(prom.ScrapeInterval).String(),
		RateInterval:   model.Duration(rate).String(),
		Events:         events,
	}
	for i := range snap.Events {
		snap.Events[i].Time = snap.Events[i].Time.UTC()
	}
	for _, title := range monitoring.KeyPanels {
		p, ok := dash.Panel(title)
		if !ok {
			t.Fatalf("no panel %q", title)
		}
		sp := monitoring.SnapshotPanel{Title: p.Title, Unit: p.Unit()}
		for _, tg := range p.Targets {
			q := tg.Query(rate)
			m, err := prom.QueryRange(ctx, q, snap.Start, snap.End, step)
			if err != nil {
				t.Fatalf("panel %q: %s: %v", p.Title, q, err)
			}
			for _, s := range m {
				sp.Series = append(sp.Series, monitoring.SnapshotSeries{Legend: tg.Legend(s.Metric), Expr: q, Values: s.Values})
			}
		}
		snap.Panels = append(snap.Panels, sp)
	}
	if err := monitoring.WriteSnapshot(path, snap); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the dashboard snapshot to %s", path)
}
