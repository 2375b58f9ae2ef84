//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// createUnlistableCRD creates the CRD of group and kind (plural: lower(kind)+"s") whose
// preferred version (v2) sits behind a conversion webhook that does not exist, and one object
// stored at v1, stored-at-v1 in ns: listing v2 needs the webhook, so it fails for as long as the
// CRD exists, the way a broken conversion webhook, a down APIService or an RBAC denial of one
// list would. Deleted at cleanup.
func createUnlistableCRD(t *testing.T, cs framework.Clients, ns, group, kind string) schema.GroupVersionResource {
	t.Helper()
	plural := strings.ToLower(kind) + "s"
	crd := crdObject(group, kind, "Namespaced", "v1", "v2")
	if err := unstructured.SetNestedField(crd.Object, missingWebhookConversion(), "spec", "conversion"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.Dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	t.Cleanup(func() { deleteCRD(t, cs, crd.GetName()) })
	v1 := schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": kind, "metadata": map[string]any{"name": "stored-at-v1"},
	}}
	framework.Eventually(t, 30*time.Second, "a "+kind+" stored at v1", func() (bool, error) {
		_, err := cs.Dyn.Resource(v1).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		return err == nil, nil // the CRD may not be established yet
	})
	v2 := schema.GroupVersionResource{Group: group, Version: "v2", Resource: plural}
	if _, err := cs.Dyn.Resource(v2).Namespace(ns).List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatalf("listing %s at v2 succeeded; the test needs it to fail (conversion webhook)", plural)
	}
	return v2
}

// readyz returns the status code and body of cascade's /readyz.
func readyz(t *testing.T, healthURL string) (int, string) {
	t.Helper()
	resp, err := http.Get(healthURL + "/readyz") //nolint:noctx // a test's one-off probe
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestUnsyncedResourceDoesNotStall (issue 10.1): with a resource that cannot be listed present
// before cascade starts, the graph counts as synced after --sync-timeout with what synced;
// owners deleted with orphan and with foreground finish instead of staying Terminating, the
// orphaned pods are never deleted, /readyz counts the broken resource and
// cascade_resource_unsynced names it. Before per-resource sync, both owners stayed Terminating and /readyz never turned
// ready.
func TestUnsyncedResourceDoesNotStall(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	gizmos := createUnlistableCRD(t, cs, ns, "unsynced.e2e.cascade.dev", "Gizmo")
	c := suite.StartCascade(t, "--sync-timeout=3s") // StartCascade waits for /readyz to answer 200

	// /readyz counts every resource cascade cannot list: this test's, and any other test's of the
	// same control plane (a CRD another shard's test is creating or deleting at that moment may
	// be unsynced for a few seconds). So the count /readyz gives must equal the number the metric
	// names, and each one named must indeed fail to list, in one moment: polled until a reading
	// agrees, since other tests' resources come and go between two requests. This test's own
	// resource must be named in that reading, and /readyz never names any.
	var last string
	err := framework.Poll(30*time.Second, 500*time.Millisecond, func() (bool, error) {
		code, body := readyz(t, c.HealthURL)
		if strings.Contains(body, "gizmos") {
			return false, fmt.Errorf("/readyz = %d %q names a resource (the health port answers anyone)", code, body)
		}
		var unsynced []schema.GroupVersionResource
		for _, s := range framework.Scrape(t, c).Samples("cascade_resource_unsynced") {
			if s.Value == 1 {
				unsynced = append(unsynced, schema.GroupVersionResource{Group: s.Labels["group"], Version: s.Labels["version"], Resource: s.Labels["resource"]})
			}
		}
		var lists []schema.GroupVersionResource
		for _, gvr := range unsynced {
			if _, err := cs.Dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{Limit: 1}); err == nil {
				lists = append(lists, gvr)
			}
		}
		want := fmt.Sprintf("ok; %d resources unsynced", len(unsynced))
		last = fmt.Sprintf("/readyz = %d %q, want 200 saying %q; cascade_resource_unsynced names %v (this test's %v among them: %t), of which these list: %v",
			code, body, want, unsynced, gizmos, slices.Contains(unsynced, gizmos), lists)
		return code == http.StatusOK && strings.Contains(body, want) && slices.Contains(unsynced, gizmos) && len(lists) == 0, nil
	})
	if err != nil {
		t.Errorf("/readyz and cascade_resource_unsynced never agreed: %v; last reading: %s", err, last)
	}
	sel := fmt.Sprintf(`cascade_resource_unsynced{group=%q,resource=%q,version=%q}`, gizmos.Group, gizmos.Resource, gizmos.Version)

	orphanRC := finRC(t, cs, ns, "orphan-rc")
	finPods(t, cs, ns, "orphaned", 3, rcRef(orphanRC))
	fgRC := finRC(t, cs, ns, "fg-rc")
	finPods(t, cs, ns, "fg", 3, rcRef(fgRC))
	deleteRC(t, cs, ns, "orphan-rc", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)})
	deleteRC(t, cs, ns, "fg-rc", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})

	waitRCGone(t, cs, ns, "orphan-rc")
	waitRCGone(t, cs, ns, "fg-rc")
	waitPodCount(t, cs, ns, "fg-", 0, collectTimeout)
	staysReleased(t, cs, ns, 3*time.Second, "orphaned pods released", podsReleased(t, cs, ns, "orphaned-", 3, orphanRC.UID))

	// The broken resource is still named: nothing was quietly dropped.
	if v := framework.MetricValue(t, c, sel); v != 1 {
		t.Errorf("%s = %v after the deletions, want 1", sel, v)
	}
}
