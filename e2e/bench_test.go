//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// benchWorkers is the concurrency of both cascade (--workers) and the raw client.
const benchWorkers = 20

// BenchmarkBackgroundCascade: 10 owners × 1,000 dependent ConfigMaps deleted in the background,
// collected by cascade (unthrottled client, 20 workers), next to the raw rate of a client that
// deletes the same number of objects itself with the same concurrency, in the same run.
// Reports objects/s, API requests per collected object (from kube-apiserver's
// apiserver_request_total) and the ratio to the raw rate.
func BenchmarkBackgroundCascade(b *testing.B) {
	owners, perOwner := 10, 1000
	if os.Getenv("QUICK") != "" {
		owners, perOwner = 10, 200
	}
	total := owners * perOwner
	cs := suite.Clients(b)
	for range b.N {
		ns := cs.NewNamespace(b)
		c := suite.StartCascade(b, "--kube-api-qps=0", "--workers="+strconv.Itoa(benchWorkers), "--enable-profiling")
		// Counted from once cascade has collected what earlier tests and iterations left: the
		// graph's ConfigMaps and the collected objects are the benchmark's from here.
		base, _ := settled(b, c).Value(cmObjectsSample)
		ownerNames := make([]string, owners)
		for i := range owners {
			o := cs.CreateCM(b, ns, fmt.Sprintf("owner-%d", i))
			ownerNames[i] = o.Name
			cs.CreateCMs(b, ns, fmt.Sprintf("dep-%d", i), perOwner, framework.CMRef(o))
		}
		// Wait until cascade's graph holds every dependent, so the measurement is collection only.
		framework.WaitForMetric(b, c, cmObjectsSample, base+float64(total+owners), time.Minute)
		before := framework.APIServerRequests(b, cs)
		collectedBefore := framework.MetricValue(b, c, `cascade_collected_total{action="delete"}`)
		stopProfile := profileCascade(b, c, "background")
		start := time.Now()
		for _, name := range ownerNames {
			cs.DeleteCM(b, ns, name, metav1.DeletePropagationBackground)
		}
		framework.WaitForMetric(b, c, `cascade_collected_total{action="delete"}`, collectedBefore+float64(total), 10*time.Minute)
		elapsed := time.Since(start)
		stopProfile()
		after := framework.APIServerRequests(b, cs)
		if n, err := cs.CountCMs(ns, "dep-"); err != nil || n != 0 {
			b.Fatalf("%d dependents left after cascade reported completion (%v)", n, err)
		}
		reqs, detail := framework.ObjectRequests(before, after, "configmaps")
		reqs -= float64(owners) // the benchmark's own owner DELETEs
		rate := float64(total) / elapsed.Seconds()

		cs.CreateCMs(b, ns, "raw", total)
		rawElapsed := rawDelete(b, cs, ns, "raw", total)
		rawRate := float64(total) / rawElapsed.Seconds()

		b.ReportMetric(rate, "objects/s")
		b.ReportMetric(reqs/float64(total), "requests/object")
		b.ReportMetric(rawRate, "raw-objects/s")
		b.ReportMetric(rate/rawRate, "ratio-to-raw")
		b.Logf("background %d×%d: cascade %.0f objects/s (%s), %.3f requests/object (%s); raw %.0f objects/s (%s); cascade/raw %.2f",
			owners, perOwner, rate, elapsed.Round(time.Millisecond), reqs/float64(total), detail, rawRate, rawElapsed.Round(time.Millisecond), rate/rawRate)
		b.Logf("target requests/object <= 1.05: %s; target throughput >= 90%% of raw: %s",
			met(reqs/float64(total) <= 1.05), met(rate/rawRate >= 0.9))
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// rawDelete deletes prefix-0..n-1 with benchWorkers concurrent requests (unthrottled), the way
// a client with cascade's concurrency would, and returns the time it took.
func rawDelete(b testing.TB, cs framework.Clients, ns, prefix string, n int) time.Duration {
	b.Helper()
	return rawParallel(b, n, func(i int) error {
		return cs.Kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), fmt.Sprintf("%s-%d", prefix, i), metav1.DeleteOptions{})
	})
}

// rawParallel runs f(0..n-1) with benchWorkers concurrent requests and returns the time it
// took. A failed request fails the benchmark once the others are done.
func rawParallel(b testing.TB, n int, f func(i int) error) time.Duration {
	b.Helper()
	start := time.Now()
	err := framework.Parallel(n, benchWorkers, f)
	elapsed := time.Since(start)
	if err != nil {
		b.Errorf("raw requests: %v", err)
	}
	return elapsed
}

// profileCascade, when CASCADE_PROFILE_DIR is set, records a 15-second CPU profile of cascade
// from now into that directory, <name>.pprof. The returned function marks the end of the
// measured window; the profile goes on in the background for its 15 seconds.
func profileCascade(b testing.TB, c *harness.Cascade, name string) func() {
	dir := os.Getenv("CASCADE_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		url := strings.TrimSuffix(c.MetricsURL, "/metrics") + "/debug/pprof/profile?seconds=15"
		resp, err := http.Get(url) //nolint:noctx
		if err != nil {
			b.Logf("profile: %v", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			b.Logf("profile: %v", err)
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Logf("profile: %v", err)
		}
	}()
	return func() {}
}
