//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// holdFinalizer is the foreign finalizer the driver puts on some objects and removes late.
const holdFinalizer = "chaos.cascade.dev/hold"

const crdGroup = "chaos.cascade.dev"

// kindDef is one kind the driver creates.
type kindDef struct {
	short      string // name prefix
	gvr        schema.GroupVersionResource
	apiVersion string
	kind       string
	namespaced bool
	crd        string // CRD name, for custom resources
	spec       func(name string) map[string]any
}

func (k *kindDef) gk() string { return k.apiVersion + "/" + k.kind }

func podSpec(name string) map[string]any {
	return map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.invalid/chaos:" + name}}}
}

func template(name string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": name}},
		"spec":     podSpec(name),
	}
}

var kinds = []*kindDef{
	{short: "cm", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, apiVersion: "v1", kind: "ConfigMap", namespaced: true},
	{short: "sec", gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, apiVersion: "v1", kind: "Secret", namespaced: true},
	{short: "pod", gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, apiVersion: "v1", kind: "Pod", namespaced: true, spec: podSpec},
	{short: "rc", gvr: schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}, apiVersion: "v1", kind: "ReplicationController", namespaced: true,
		spec: func(n string) map[string]any {
			return map[string]any{"replicas": int64(0), "selector": map[string]any{"app": n}, "template": template(n)}
		}},
	{short: "dep", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, apiVersion: "apps/v1", kind: "Deployment", namespaced: true,
		spec: func(n string) map[string]any {
			return map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"app": n}}, "template": template(n)}
		}},
	{short: "rs", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, apiVersion: "apps/v1", kind: "ReplicaSet", namespaced: true,
		spec: func(n string) map[string]any {
			return map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"app": n}}, "template": template(n)}
		}},
	{short: "wid", gvr: schema.GroupVersionResource{Group: crdGroup, Version: "v1", Resource: "widgets"}, apiVersion: crdGroup + "/v1", kind: "Widget", namespaced: true, crd: "widgets." + crdGroup},
	{short: "spr", gvr: schema.GroupVersionResource{Group: crdGroup, Version: "v1", Resource: "sprockets"}, apiVersion: crdGroup + "/v1", kind: "Sprocket", namespaced: true, crd: "sprockets." + crdGroup},
	{short: "gad", gvr: schema.GroupVersionResource{Group: crdGroup, Version: "v1", Resource: "gadgets"}, apiVersion: crdGroup + "/v1", kind: "Gadget", namespaced: false, crd: "gadgets." + crdGroup},
}

// ghost is a kind no API serves: references to it are unresolvable.
var ghost = Ref{APIVersion: "ghost.chaos.cascade.dev/v1", Kind: "Phantom"}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// namespaces the driver works in (several, for cross-namespace references).
var namespaces = []string{"chaos-a", "chaos-b", "chaos-c"}

// crdObject is the CRD of k (schema keeps any field).
func crdObject(k *kindDef) *unstructured.Unstructured {
	scope := "Cluster"
	if k.namespaced {
		scope = "Namespaced"
	}
	plural := k.gvr.Resource
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": k.crd},
		"spec": map[string]any{
			"group": k.gvr.Group,
			"scope": scope,
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(k.kind), "kind": k.kind, "listKind": k.kind + "List"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
}

// api is the driver's access to the apiserver: dynamic for reads and writes, a raw REST client
// for deletes (whose answer tells whether the object went at once or which finalizers it got).
type api struct {
	dyn  dynamic.Interface
	rest rest.Interface
}

func newAPI(cfg *rest.Config) (*api, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 30 * time.Second
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rc := rest.CopyConfig(cfg)
	rc.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	r, err := rest.UnversionedRESTClientFor(rc)
	if err != nil {
		return nil, err
	}
	return &api{dyn: dyn, rest: r}, nil
}

func (a *api) res(k *kindDef, ns string) dynamic.ResourceInterface {
	if k.namespaced {
		return a.dyn.Resource(k.gvr).Namespace(ns)
	}
	return a.dyn.Resource(k.gvr)
}

func objPath(k *kindDef, ns, name string) string {
	p := "/api/" + k.gvr.Version
	if k.gvr.Group != "" {
		p = "/apis/" + k.gvr.Group + "/" + k.gvr.Version
	}
	if k.namespaced {
		p += "/namespaces/" + ns
	}
	return p + "/" + k.gvr.Resource + "/" + name
}

// deleteResult is what a DELETE answered.
type deleteResult struct {
	gone       bool     // removed at once
	finalizers []string // when not gone: the finalizers it carries now
	deletion   string   // its deletionTimestamp
}

// del sends DELETE with opts and reads the answer: a Status (or an object without finalizers:
// pods answer with the object) means it went at once; an object with finalizers is now being
// deleted.
func (a *api) del(ctx context.Context, k *kindDef, ns, name string, opts metav1.DeleteOptions) (deleteResult, error) {
	body, err := json.Marshal(opts)
	if err != nil {
		return deleteResult{}, err
	}
	raw, err := a.rest.Delete().AbsPath(objPath(k, ns, name)).Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Raw()
	if err != nil {
		return deleteResult{}, err
	}
	var obj unstructured.Unstructured
	if err := json.Unmarshal(raw, &obj.Object); err != nil {
		return deleteResult{}, fmt.Errorf("decode delete answer: %w", err)
	}
	if obj.GetKind() == "Status" || len(obj.GetFinalizers()) == 0 {
		return deleteResult{gone: true}, nil
	}
	dt := ""
	if t := obj.GetDeletionTimestamp(); t != nil {
		dt = t.String()
	}
	return deleteResult{finalizers: obj.GetFinalizers(), deletion: dt}, nil
}

// certain reports whether err is an answer of the apiserver about the request (so the request
// was or was not applied, as the error says), as opposed to a lost connection, a timeout or a
// server error, after which the request may or may not have been applied.
func certain(err error) bool {
	if err == nil {
		return true
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	switch se.Status().Code {
	case http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity, http.StatusBadRequest,
		http.StatusForbidden, http.StatusMethodNotAllowed, http.StatusUnsupportedMediaType:
		return true
	}
	return false
}

func refsOf(u *unstructured.Unstructured) []Ref {
	var out []Ref
	for _, r := range u.GetOwnerReferences() {
		out = append(out, Ref{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: string(r.UID), Block: r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion})
	}
	return out
}

func toOwnerRefs(refs []Ref) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs))
	for _, r := range refs {
		b := r.Block
		out = append(out, metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: types.UID(r.UID), BlockOwnerDeletion: &b})
	}
	return out
}

func randomUID(rng *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xfff, rng.Uint32()&0xfff, rng.Uint64()&0xffffffffffff)
}
