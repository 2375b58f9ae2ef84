package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestAggregatedAPI: the discovery documents list one resource, explanations, read with get;
// an explanation is the object's, in the namespace of the path (a cluster-scoped object only
// at the cluster scope, so a grant in a namespace explains nothing outside it), as JSON or DOT;
// anything else is an API Status: 400 without ?resource=, 404 for other paths and objects,
// 405 for other verbs.
func TestAggregatedAPI(t *testing.T) {
	h := aggregatedAPI(fakeExplain)
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
