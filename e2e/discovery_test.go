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
)

// TestCRDChurnLeavesNothingBehind: 20 CRDs created and deleted; cascade watches each while it
// exists, and afterwards its monitors and goroutines return to their baseline (the in-tree GC
// leaks an event handler and its goroutines per removed resource: kubernetes#114066).
func TestCRDChurnLeavesNothingBehind(t *testing.T) {
	const period = 2 * time.Second
	cs := newClients(t)
	c := startCascade(t, "--discovery-period="+period.String())
	monitorsRunning := func() float64 { return metricValue(t, c, `cascade_monitors{state="running"}`) }
	goroutines := func() float64 { return metricValue(t, c, "go_goroutines") }
	time.Sleep(2 * period) // let start-up settle
	baseMonitors, baseGoroutines := monitorsRunning(), goroutines()

	var names []string
	var gvrs []schema.GroupVersionResource
	for i := range 20 {
		gvr := createCRD(t, cs, "churn.e2e.cascade.dev", fmt.Sprintf("Churn%d", i), "Namespaced")
		gvrs = append(gvrs, gvr)
		names = append(names, gvr.Resource+"."+gvr.Group)
	}
	eventually(t, 3*period+10*time.Second, "all 20 CRDs watched", func() (bool, error) {
		return monitorsRunning() == baseMonitors+20, nil
	})
	peak := goroutines()
	for _, n := range names {
		deleteCRD(t, cs, n)
	}
	eventually(t, 3*period+20*time.Second, "monitors back to baseline", func() (bool, error) {
		return monitorsRunning() == baseMonitors, nil
	})
	m, _ := c.Metrics()
	for _, gvr := range gvrs {
		if strings.Contains(m, metricLine(gvr)) {
			t.Errorf("deleted CRD still watched: %v", gvr)
		}
	}
	// Goroutines: allow a small margin for HTTP connections that come and go.
	eventually(t, 30*time.Second, "goroutines back to baseline", func() (bool, error) {
		return goroutines() <= baseGoroutines+5, nil
	})
	t.Logf("goroutines: baseline %.0f, with 20 CRDs %.0f, after deleting them %.0f; monitors %.0f → %.0f → %.0f",
		baseGoroutines, peak, goroutines(), baseMonitors, baseMonitors+20, monitorsRunning())
}

// TestBrokenAPIGroup: an APIService that points at a service that does not exist makes its
// group fail discovery. cascade reports it (log and metric) and keeps collecting everything
// else.
func TestBrokenAPIGroup(t *testing.T) {
	cs := newClients(t)
	ns := newNamespace(t, cs)
	apiSvcGVR := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	port := int64(443)
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": "v1.broken.e2e.cascade.dev"},
		"spec": map[string]any{
			"group": "broken.e2e.cascade.dev", "version": "v1",
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"namespace": "no-such-namespace", "name": "no-such-service", "port": port},
		},
	}}
	if _, err := cs.dyn.Resource(apiSvcGVR).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.dyn.Resource(apiSvcGVR).Delete(context.Background(), svc.GetName(), metav1.DeleteOptions{})
	})
	c := startCascade(t, "--discovery-period=2s")
	sample := fmt.Sprintf(`cascade_discovery_errors_total{group_version=%s}`, strconv.Quote("broken.e2e.cascade.dev/v1"))
	eventually(t, 30*time.Second, "the broken group reported in metrics", func() (bool, error) {
		return metricValue(t, c, sample) > 0, nil
	})
	owner := createCM(t, cs, ns, "owner")
	createCMs(t, cs, ns, "dep", 20, cmRef(owner))
	deleteCM(t, cs, ns, "owner", metav1.DeletePropagationBackground)
	waitCMCount(t, cs, ns, "dep-", 0, collectTimeout)
	if !strings.Contains(c.Tail(400), "broken.e2e.cascade.dev/v1") {
		t.Errorf("the broken group is not named in cascade's log")
	}
}
