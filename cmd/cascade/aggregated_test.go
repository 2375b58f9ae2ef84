package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/cascade-gc/cascade/gc"
)

// fakeExplain knows configmaps shop/x and the namespace (cluster-scoped) shop.
func fakeExplain(_ context.Context, resource, ns, name string) (gc.Explanation, error) {
	switch {
	case resource == "configmaps" && ns == "shop" && name == "x":
		return gc.Explanation{Object: gc.ExplainedObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "x", UID: "u-x"}, State: "observed"}, nil
	case resource == "namespaces" && name == "shop": // the namespace is ignored, as the graph ignores it
		return gc.Explanation{Object: gc.ExplainedObject{APIVersion: "v1", Kind: "Namespace", Name: "shop", UID: "u-ns"}, State: "observed"}, nil
	}
	return gc.Explanation{}, fmt.Errorf("%s %s/%s is not in the graph", resource, ns, name)
}

// fakeCollector answers the explain endpoints as a collector would: explanations from explain,
// /debug/graph from graph.
type fakeCollector struct {
	explain func(ctx context.Context, resource, ns, name string) (gc.Explanation, error)
	graph   http.HandlerFunc
}

func (f fakeCollector) ExplainNamed(ctx context.Context, resource, ns, name string) (gc.Explanation, error) {
	return f.explain(ctx, resource, ns, name)
}

func (f fakeCollector) DebugGraph(w http.ResponseWriter, r *http.Request) { f.graph(w, r) }

// singleCluster is the explain endpoints' access of a single-cluster cascade whose port is not
// secured (the handlers' own checks alone), answered by explain.
func singleCluster(explain func(ctx context.Context, resource, ns, name string) (gc.Explanation, error)) explainAccess {
	return explainAccess{graphs: graphs{single: fakeCollector{explain: explain}}}
}

// TestAggregatedAPI: the discovery documents list one resource, explanations, read with get;
// an explanation is the object's, in the namespace of the path (a cluster-scoped object only
// at the cluster scope, so a grant in a namespace explains nothing outside it), as JSON or DOT;
// anything else is an API Status: 400 without ?resource=, 404 for other paths and objects,
// 405 for other verbs.
func TestAggregatedAPI(t *testing.T) {
	h := aggregatedAPI(singleCluster(fakeExplain))
	const gv = "/apis/debug.cascade.dev/v1alpha1"
	for _, tc := range []struct {
		method, path string
		code         int
		answer       string
	}{
		{"GET", "/apis", 200, `"name": "debug.cascade.dev"`},
		{"GET", "/apis/debug.cascade.dev", 200, `"preferredVersion"`},
		{"GET", gv, 200, `"name": "explanations"`},
		{"GET", gv + "/", 200, `"kind": "Explanation"`},
		{"GET", gv + "/namespaces/shop/explanations/x?resource=configmaps", 200, `"uid": "u-x"`},
		{"HEAD", gv + "/namespaces/shop/explanations/x?resource=configmaps", 200, ""},
		{"GET", gv + "/namespaces/shop/explanations/x?resource=configmaps&format=dot", 200, "digraph cascade {"},
		{"GET", gv + "/explanations/shop?resource=namespaces", 200, `"uid": "u-ns"`},
		{"GET", gv + "/namespaces/other/explanations/shop?resource=namespaces", 404, "namespaces other/shop is not in the graph"},
		{"GET", gv + "/explanations/x?resource=configmaps", 404, "is not in the graph"},
		{"GET", gv + "/namespaces/shop/explanations/y?resource=configmaps", 404, "configmaps shop/y is not in the graph"},
		{"GET", gv + "/namespaces/shop/explanations/x", 400, "give ?resource="},
		{"GET", gv + "/namespaces/shop/explanations", 405, "list is not supported"},
		{"POST", gv + "/namespaces/shop/explanations/x?resource=configmaps", 405, "create is not supported"},
		{"POST", gv, 405, "discovery documents are read with GET"},
		{"GET", gv + "/namespaces/shop/explanations/x/status?resource=configmaps", 404, "could not find"},
		{"GET", gv + "/namespaces/shop/graphs/x?resource=configmaps", 404, "could not find"},
		{"GET", "/apis/apps/v1/namespaces/shop/deployments/x", 404, "could not find"},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body := w.Body.String()
		if w.Code != tc.code || !strings.Contains(body, tc.answer) {
			t.Errorf("%s %s = %d %q, want %d containing %q", tc.method, tc.path, w.Code, body, tc.code, tc.answer)
			continue
		}
		if tc.code != 200 {
			var st metav1.Status
			if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Kind != "Status" || st.Code != int32(tc.code) {
				t.Errorf("%s %s: not an API Status: %q (%v)", tc.method, tc.path, body, err)
			}
		}
	}
}

// TestRequestAttributes: what cascade asks the SubjectAccessReview about a request: under /apis
// the resource attributes kube-apiserver authorized it with, elsewhere the path; and which paths
// need no authorization (the aggregated API's discovery, for any authenticated user).
func TestRequestAttributes(t *testing.T) {
	u := &user.DefaultInfo{Name: "alice"}
	for _, tc := range []struct {
		method, path string
		want         authorizer.AttributesRecord
	}{
		{"GET", "/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations/x?resource=configmaps", authorizer.AttributesRecord{
			Verb: "get", ResourceRequest: true, APIGroup: "debug.cascade.dev", APIVersion: "v1alpha1", Namespace: "shop", Resource: "explanations", Name: "x"}},
		{"GET", "/apis/debug.cascade.dev/v1alpha1/explanations/shop", authorizer.AttributesRecord{
			Verb: "get", ResourceRequest: true, APIGroup: "debug.cascade.dev", APIVersion: "v1alpha1", Resource: "explanations", Name: "shop"}},
		{"GET", "/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations", authorizer.AttributesRecord{
			Verb: "list", ResourceRequest: true, APIGroup: "debug.cascade.dev", APIVersion: "v1alpha1", Namespace: "shop", Resource: "explanations"}},
		{"DELETE", "/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations/x", authorizer.AttributesRecord{
			Verb: "delete", ResourceRequest: true, APIGroup: "debug.cascade.dev", APIVersion: "v1alpha1", Namespace: "shop", Resource: "explanations", Name: "x"}},
		{"GET", "/metrics", authorizer.AttributesRecord{Verb: "get"}},
		{"HEAD", "/debug/graph", authorizer.AttributesRecord{Verb: "get"}},
		{"GET", "/apis", authorizer.AttributesRecord{Verb: "get"}},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		got := requestAttributes(r, u)
		tc.want.User, tc.want.Path = u, r.URL.Path
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s: attributes %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
	for path, want := range map[string]bool{
		"/apis": true, "/apis/": true, "/apis/debug.cascade.dev": true, "/apis/debug.cascade.dev/v1alpha1": true, "/apis/debug.cascade.dev/v1alpha1/": true,
		"/apis/debug.cascade.dev/v1alpha1/explanations": false, "/apis/apps/v1": false, "/metrics": false, "/debug/graph": false,
	} {
		if got := isDiscoveryPath(path); got != want {
			t.Errorf("isDiscoveryPath(%s) = %t, want %t", path, got, want)
		}
	}
}

// TestAggregatedKeepsToTheNamespace (issue 32.7): an explanation asked under a namespace names
// only that namespace's dependents (the others counted), and a cluster-scoped object asked
// under a namespace gets the very answer an absent one gets, so that a reader of one
// namespace learns neither which other namespaces reference its objects nor which
// cluster-scoped objects exist. On main the dependents of every namespace were listed, with
// their live finalizers, and the two 404s differed.
func TestAggregatedKeepsToTheNamespace(t *testing.T) {
	dep := func(ns, name string) gc.ExplainedDependent {
		return gc.ExplainedDependent{ExplainedObject: gc.ExplainedObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name, UID: types.UID("u-" + ns + "-" + name)}, Finalizers: []string{"example.com/hold"}}
	}
	h := aggregatedAPI(singleCluster(func(_ context.Context, resource, ns, name string) (gc.Explanation, error) {
		switch {
		case resource == "configmaps" && ns == "shop" && name == "owner":
			return gc.Explanation{Object: gc.ExplainedObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "owner", UID: "u-owner"}, State: "observed",
				Dependents: []gc.ExplainedDependent{dep("shop", "a"), dep("bank", "secret-plan"), dep("shop", "b"), dep("bank", "other")}}, nil
		case resource == "clusterroles" && name == "admin-of-everything":
			return gc.Explanation{Object: gc.ExplainedObject{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: name, UID: "u-cr"}, State: "observed"}, nil
		}
		return gc.Explanation{}, fmt.Errorf("the graph has no %s named %s in %q", resource, name, ns)
	}))
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	const gv = "/apis/debug.cascade.dev/v1alpha1"
	code, body := get(gv + "/namespaces/shop/explanations/owner?resource=configmaps")
	var e gc.Explanation
	if err := json.Unmarshal([]byte(body), &e); code != http.StatusOK || err != nil {
		t.Fatalf("%d %v: %s", code, err, body)
	}
	var names []string
	for _, d := range e.Dependents {
		names = append(names, d.Namespace+"/"+d.Name)
	}
	if !slices.Equal(names, []string{"shop/a", "shop/b"}) || e.OtherNamespaceDependents != 2 || strings.Contains(body, "bank") {
		t.Errorf("dependents %v, %d others; want shop's alone and 2 others, nothing of bank named:\n%s", names, e.OtherNamespaceDependents, body)
	}
	// At the cluster scope (a cluster-wide grant), every dependent.
	if code, body := get(gv + "/explanations/admin-of-everything?resource=clusterroles"); code != http.StatusOK {
		t.Errorf("cluster-scoped at the cluster scope: %d %s", code, body)
	}
	existsCode, exists := get(gv + "/namespaces/shop/explanations/admin-of-everything?resource=clusterroles")
	absentCode, absent := get(gv + "/namespaces/shop/explanations/no-such-role?resource=clusterroles")
	if existsCode != http.StatusNotFound || absentCode != http.StatusNotFound ||
		strings.Replace(exists, "admin-of-everything", "NAME", 1) != strings.Replace(absent, "no-such-role", "NAME", 1) {
		t.Errorf("a cluster-scoped object under a namespace answers %d %s\nan absent one %d %s\nwant the same", existsCode, exists, absentCode, absent)
	}
}

// TestExplainTextEscapes (issue 32.7): names, kinds and finalizers are tenants' strings; the
// text output writes their control characters as escapes, so that an ownerReference cannot
// colour the terminal, move its cursor or fake lines of the answer.
func TestExplainTextEscapes(t *testing.T) {
	evil := "x\x1b[2K\r\nDecision now: keep (it is fine)\u009b"
	e := gc.Explanation{
		Object: gc.ExplainedObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "victim", UID: "u-v"}, State: "observed",
		Owners:     []gc.ExplainedOwner{{ExplainedObject: gc.ExplainedObject{APIVersion: "v1", Kind: "Config\x07Map", Name: evil, UID: "u-o"}, State: "absent", Meaning: "gone"}},
		Dependents: []gc.ExplainedDependent{{ExplainedObject: gc.ExplainedObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "d", UID: "u-d"}, Finalizers: []string{"example.com/" + evil}}},
	}
	out := explainText(e)
	if strings.ContainsFunc(strings.ReplaceAll(out, "\n", ""), unicode.IsControl) {
		t.Errorf("control characters reach the terminal:\n%q", out)
	}
	if lines := strings.Count(out, "\n"); lines != 5 {
		t.Errorf("%d lines, want 5 (object, owners, one owner, dependents, one dependent): a name faked lines:\n%s", lines, out)
	}
	for _, want := range []string{`x\x1b[2K\r\nDecision now`, `Config\aMap`, `\u009b`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks the escape %s:\n%s", want, out)
		}
	}
}
