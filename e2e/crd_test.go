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

	"github.com/cascade-gc/cascade/e2e/framework"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdObject is a CustomResourceDefinition for group/kind (plural = lower(kind)+"s") with the
// given scope ("Namespaced" or "Cluster") and versions, all served, the first one stored, each
// with a schema that keeps any field.
func crdObject(group, kind, scope string, versions ...string) *unstructured.Unstructured {
	plural := strings.ToLower(kind) + "s"
	var vs []any
	for i, v := range versions {
		vs = append(vs, map[string]any{
			"name": v, "served": true, "storage": i == 0,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			}},
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group":    group,
			"scope":    scope,
			"names":    map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": vs,
		},
	}}
}

// createCRD creates the CRD of crdObject with version v1 and waits until it is established.
// Deleted at cleanup.
func createCRD(t testing.TB, cs framework.Clients, group, kind, scope string) schema.GroupVersionResource {
	t.Helper()
	crd := crdObject(group, kind, scope, "v1")
	plural := strings.ToLower(kind) + "s"
	ctx := context.Background()
	if _, err := cs.Dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", crd.GetName(), err)
	}
	t.Cleanup(func() { deleteCRD(t, cs, crd.GetName()) })
	framework.Eventually(t, 30*time.Second, "CRD "+crd.GetName()+" established", func() (bool, error) {
		got, err := cs.Dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
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

func deleteCRD(t testing.TB, cs framework.Clients, name string) {
	err := cs.Dyn.Resource(crdGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete CRD %s: %v", name, err)
	}
}

// watched reports whether m shows cascade watching gvr.
func watched(m framework.Metrics, gvr schema.GroupVersionResource) bool {
	v, _ := m.Value(fmt.Sprintf(`cascade_resource_watched{group=%q,resource=%q,version=%q}`, gvr.Group, gvr.Resource, gvr.Version))
	return v == 1
}
