//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-gc/cascade/e2e/harness"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// clients are the test's own clients (admin, unthrottled).
type clients struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func newClients(t testing.TB) clients {
	t.Helper()
	cfg := cp.RestConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return clients{kube: kube, dyn: dyn}
}

// startCascade runs cascade for the test, waits until it is ready, and stops it at cleanup,
// printing its log tail when the test failed.
func startCascade(t testing.TB, extra ...string) *harness.Cascade {
	t.Helper()
	name := "cascade-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	c, err := cp.StartCascade(name, cascadeBin, nil, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", c.LogPath, c.Tail(60))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// createCRD creates a CRD for group/kind (plural = lower(kind)+"s") with the given scope
// ("Namespaced" or "Cluster") and waits until it is established. Deleted at cleanup.
func createCRD(t testing.TB, cs clients, group, kind, scope string) schema.GroupVersionResource {
	t.Helper()
	plural := strings.ToLower(kind) + "s"
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"scope": scope,
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	ctx := context.Background()
	if _, err := cs.dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", crd.GetName(), err)
	}
	t.Cleanup(func() { deleteCRD(t, cs, crd.GetName()) })
	eventually(t, 30*time.Second, "CRD "+crd.GetName()+" established", func() (bool, error) {
		got, err := cs.dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}
}

func deleteCRD(t testing.TB, cs clients, name string) {
	err := cs.dyn.Resource(crdGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete CRD %s: %v", name, err)
	}
}

// eventually polls cond every 100 ms until it is true or timeout passes (then the test fails,
// naming what was awaited and the last error).
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
	}
}

// metricLine is how a watched resource appears in cascade's /metrics.
func metricLine(gvr schema.GroupVersionResource) string {
	return fmt.Sprintf(`cascade_resource_watched{group=%q,resource=%q,version=%q} 1`, gvr.Group, gvr.Resource, gvr.Version)
}
