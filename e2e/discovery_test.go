//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestCRDChurnLeavesNothingBehind: 20 CRDs created and deleted; cascade watches each while it
// exists, and afterwards its monitors and goroutines return to their baseline (the in-tree GC
// leaks an event handler and its goroutines per removed resource: kubernetes#114066).
func TestCRDChurnLeavesNothingBehind(t *testing.T) {
	const period = 2 * time.Second
	cs := suite.Clients(t)
	c := suite.StartCascade(t, "--discovery-period="+period.String())
	monitorsRunning := func() float64 { return framework.MetricValue(t, c, `cascade_monitors{state="running"}`) }
	goroutines := func() float64 { return framework.MetricValue(t, c, "go_goroutines") }
	// Start-up settled: every monitor synced, and the goroutines and the monitors as many as a
	// discovery period earlier (polled once a period). The monitors too, since a CRD an earlier
	// test deleted may still be going: its objects waited on a GC finalizer for a collector,
	// this one, which finishes them as it starts.
	lastGoroutines, lastMonitors := -1.0, -1.0
	framework.EventuallyEvery(t, period, 30*time.Second, "start-up settled", func() (bool, error) {
		g, running := goroutines(), monitorsRunning()
		settled := g == lastGoroutines && running == lastMonitors && framework.MetricValue(t, c, `cascade_monitors{state="synced"}`) == running
		lastGoroutines, lastMonitors = g, running
		return settled, nil
	})
	baseMonitors, baseGoroutines := monitorsRunning(), goroutines()

	var names []string
	var gvrs []schema.GroupVersionResource
	for i := range 20 {
		gvr := createCRD(t, cs, "churn.e2e.cascade.dev", fmt.Sprintf("Churn%d", i), "Namespaced")
		gvrs = append(gvrs, gvr)
		names = append(names, gvr.Resource+"."+gvr.Group)
	}
	framework.Eventually(t, 3*period+10*time.Second, "all 20 CRDs watched", func() (bool, error) {
		m := framework.Scrape(t, c)
		for _, gvr := range gvrs {
			if !watched(m, gvr) {
				return false, nil
			}
		}
		running, _ := m.Value(`cascade_monitors{state="running"}`)
		return running == baseMonitors+20, nil
	})
	peak := goroutines()
	for _, n := range names {
		deleteCRD(t, cs, n)
	}
	framework.Eventually(t, 3*period+20*time.Second, "monitors back to baseline", func() (bool, error) {
		return monitorsRunning() == baseMonitors, nil
	})
	m := framework.Scrape(t, c)
	for _, gvr := range gvrs {
		if watched(m, gvr) {
			t.Errorf("deleted CRD still watched: %v", gvr)
		}
	}
	// Goroutines: allow a small margin for HTTP connections that come and go.
	framework.Eventually(t, 30*time.Second, "goroutines back to baseline", func() (bool, error) {
		return goroutines() <= baseGoroutines+5, nil
	})
	t.Logf("goroutines: baseline %.0f, with 20 CRDs %.0f, after deleting them %.0f; monitors %.0f → %.0f → %.0f",
		baseGoroutines, peak, goroutines(), baseMonitors, baseMonitors+20, monitorsRunning())
}

// TestBrokenAPIGroup: an APIService that points at a service that does not exist makes its
// group fail discovery. cascade reports it (log and metric) and keeps collecting everything
// else.
func TestBrokenAPIGroup(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	svc := brokenAPIService("broken.e2e.cascade.dev", "v1")
	if _, err := cs.Dyn.Resource(apiServiceGVR).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Dyn.Resource(apiServiceGVR).Delete(context.Background(), svc.GetName(), metav1.DeleteOptions{})
	})
	c := suite.StartCascade(t, "--discovery-period=2s")
	sample := fmt.Sprintf(`cascade_discovery_errors_total{group_version=%s}`, strconv.Quote("broken.e2e.cascade.dev/v1"))
	framework.Eventually(t, 30*time.Second, "the broken group reported in metrics", func() (bool, error) {
		return framework.MetricValue(t, c, sample) > 0, nil
	})
	owner := cs.CreateCM(t, ns, "owner")
	cs.CreateCMs(t, ns, "dep", 20, framework.CMRef(owner))
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationBackground)
	cs.WaitCMCount(t, ns, "dep-", 0, collectTimeout)
	if !strings.Contains(c.Tail(400), "broken.e2e.cascade.dev/v1") {
		t.Errorf("the broken group is not named in cascade's log")
	}
}

// brokenAPIService is the APIService of group's version, served by a Service that does not
// exist: discovery of that group version fails for as long as it is registered.
func brokenAPIService(group, version string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": version + "." + group},
		"spec": map[string]any{
			"group": group, "version": version,
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"namespace": "no-such-namespace", "name": "no-such-service", "port": int64(443)},
		},
	}}
}
