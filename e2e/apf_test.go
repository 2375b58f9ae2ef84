//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestFlowSchema (issue 25.5): with deploy/base applied, the requests cascade sends as its
// ServiceAccount are classified by the base's FlowSchema cascade at the priority level
// workload-high (kube-controller-manager's garbage collector's), as kube-apiserver's API Priority
// and Fairness metrics count them, not at workload-low where service-accounts would put them.
func TestFlowSchema(t *testing.T) {
	cs := suite.Clients(t)
	deployBase(t)
	dispatched := func() (cascade, other float64) {
		raw, err := cs.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			t.Fatalf("scrape kube-apiserver's metrics: %v", err)
		}
		m, err := framework.ParseMetrics(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Samples("apiserver_flowcontrol_dispatched_requests_total") {
			if s.Labels["flow_schema"] == "cascade" {
				if s.Labels["priority_level"] == "workload-high" {
					cascade += s.Value
				} else {
					other += s.Value
				}
			}
		}
		return cascade, other
	}
	// kube-apiserver counts since it started: this test's cascade's requests are the counts'
	// rise from here.
	before, otherBefore := dispatched()

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := suite.CP.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", serviceAccountToken(t, cs)); err != nil {
		t.Fatal(err)
	}
	suite.StartCascade(t, "--kubeconfig="+kc, "--dry-run", "--orphan-record-configmap=")
	framework.Eventually(t, 30*time.Second, "cascade's requests dispatched at workload-high by the FlowSchema cascade", func() (bool, error) {
		high, other := dispatched()
		if other > otherBefore {
			t.Fatalf("the FlowSchema cascade dispatched %v requests at another priority level", other-otherBefore)
		}
		return high > before, nil
	})
}

// TestFlowSchemaLeaseAtLeaderElection (issue 32.4): cascade's Lease requests are classified by
// the base's FlowSchema cascade-leader-election at the priority level leader-election (as
// kube-controller-manager's Leases are), in queues of their own, while its deletes and every
// other request stay with the FlowSchema cascade at workload-high; the TokenReviews and
// SubjectAccessReviews cascade sends for its callers go to cascade-reviews at workload-low
// (issue 32.6: forged tokens from the network queue away from the deletes and the Lease). The API server names the
// FlowSchema that classified a request in its answer (X-Kubernetes-PF-FlowSchema-UID): a Lease
// read and update as cascade's ServiceAccount, and a delete, are checked request by request;
// then a cascade with leader election, as the base runs it, renews its Lease at
// leader-election, as kube-apiserver's APF metrics count it (in companion mode: it deletes nothing of
// other tests' objects).
func TestFlowSchemaLeaseAtLeaderElection(t *testing.T) {
	cs := suite.Clients(t)
	deployBase(t)
	ctx := context.Background()
	uid := func(name string) types.UID {
		fs, err := cs.Kube.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return fs.UID
	}
	leaseSchema, collectorSchema, reviewSchema := uid("cascade-leader-election"), uid("cascade"), uid("cascade-reviews")

	token := serviceAccountToken(t, cs)
	cfg := rest.AnonymousClientConfig(suite.CP.RestConfig())
	cfg.BearerToken = token
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := cs.NewNamespace(t)
	victim := cs.CreateCM(t, ns, "victim")
	lease := fmt.Sprintf("apf-%d", time.Now().UnixNano()%100000)
	for _, r := range []struct {
		what, method, path, body string
		want                     types.UID
	}{
		{"create a Lease", http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/cascade-system/leases",
			`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"` + lease + `"}}`, leaseSchema},
		{"read the Lease cascade", http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/cascade-system/leases/cascade", "", leaseSchema},
		{"delete a ConfigMap", http.MethodDelete, "/api/v1/namespaces/" + ns + "/configmaps/" + victim.Name, "", collectorSchema},
		{"list ConfigMaps", http.MethodGet, "/api/v1/configmaps?limit=1", "", collectorSchema},
		{"review a token", http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews",
			`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"forged"}}`, reviewSchema},
		{"review an access", http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews",
			`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"someone","nonResourceAttributes":{"path":"/metrics","verb":"get"}}}`, reviewSchema},
	} {
		req, err := http.NewRequestWithContext(ctx, r.method, cfg.Host+r.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.body != "" {
			req, _ = http.NewRequestWithContext(ctx, r.method, cfg.Host+r.path, strings.NewReader(r.body))
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := types.UID(resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")); got != r.want {
			t.Errorf("%s as cascade's ServiceAccount (answer %d): classified by FlowSchema UID %q, want %q", r.what, resp.StatusCode, got, r.want)
		}
	}
	_ = cs.Kube.CoordinationV1().Leases("cascade-system").Delete(ctx, lease, metav1.DeleteOptions{})

	dispatched := func() float64 {
		raw, err := cs.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatalf("scrape kube-apiserver's metrics: %v", err)
		}
		m, err := framework.ParseMetrics(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := m.Value(`apiserver_flowcontrol_dispatched_requests_total{flow_schema="cascade-leader-election",priority_level="leader-election"}`)
		return v
	}
	before := dispatched()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := suite.CP.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", token); err != nil {
		t.Fatal(err)
	}
	suite.StartCascade(t, "--kubeconfig="+kc, "--mode=companion", "--orphan-record-configmap=", "--leader-elect",
		"--leader-elect-resource-namespace=cascade-system", "--leader-elect-resource-name=cascade")
	framework.Eventually(t, 30*time.Second, "cascade's Lease requests dispatched at leader-election", func() (bool, error) {
		return dispatched() > before, nil
	})
}
