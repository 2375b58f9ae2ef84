package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/cascade-gc/cascade/gc"
)

// fleetGraphs is a fleet whose running members are members: each knows one object,
// configmaps shop/x (UID MEMBER-x), referenced by a dependent in shop and one in bank, and
// answers /debug/graph with "graph of member MEMBER".
func fleetGraphs(members ...string) graphs {
	return graphs{member: func(name string) (explainer, bool) {
		if !slices.Contains(members, name) {
			return nil, false
		}
		return fakeCollector{
			explain: func(_ context.Context, resource, ns, n string) (gc.Explanation, error) {
				if resource != "configmaps" || ns != "shop" || n != "x" {
					return gc.Explanation{}, fmt.Errorf("%s %s/%s is not in the graph", resource, ns, n)
				}
				dep := func(ns string) gc.ExplainedDependent {
					return gc.ExplainedDependent{ExplainedObject: gc.ExplainedObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "dep", UID: types.UID("u-dep-" + ns)}}
				}
				return gc.Explanation{Object: gc.ExplainedObject{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "x", UID: types.UID(name + "-x")}, State: "observed",
					Resource: "configmaps " + name, Dependents: []gc.ExplainedDependent{dep("shop"), dep("bank")}}, nil
			},
			graph: func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "graph of member "+name) },
		}, true
	}}
}

// stubAuthorizer allows get on members.debug.cascade.dev, at the cluster scope, of the members
// listed for a user, and records what it was asked; it fails for the user "unreachable", as
// when the API server cannot be asked.
type stubAuthorizer struct {
	members map[string][]string // user → the members it may get
	mu      sync.Mutex
	asked   []authorizer.Attributes
}

func (s *stubAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	s.mu.Lock()
	s.asked = append(s.asked, a)
	s.mu.Unlock()
	if a.GetUser().GetName() == "unreachable" {
		return authorizer.DecisionNoOpinion, "", errors.New("the API server does not answer")
	}
	if a.IsResourceRequest() && a.GetVerb() == "get" && a.GetAPIGroup() == debugGroup && a.GetResource() == membersResource &&
		a.GetSubresource() == "" && a.GetNamespace() == "" && slices.Contains(s.members[a.GetUser().GetName()], a.GetName()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no RBAC rule allows it", nil
}

func (s *stubAuthorizer) questions() []authorizer.Attributes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asked)
}

// TestExplainMembers (issue 33.6): in fleet mode the explain endpoints, the aggregated API's
// explanations and /debug/graph alike, answer from the graph of the member the request names,
// once its user may get members/NAME of debug.cascade.dev at the cluster scope, and then with
// the member's objects of every namespace: a member the user may not get is 403 whether it
// exists or not, a member it may get that does not run 404, no member 400, and the authorizer
// failing 500. A single-cluster cascade refuses a member with 400. Without a gate (an unsecured
// port, a local run) nothing is authorized.
func TestExplainMembers(t *testing.T) {
	authz := &stubAuthorizer{members: map[string][]string{"alice": {"a", "ghost"}, "bob": {"b"}}}
	gate := &accessGate{authz: authorizer.AuthorizerFunc(authz.Authorize), refused: newRefusedRequests(prometheus.NewRegistry())}
	fleetAccess := explainAccess{graphs: fleetGraphs("a", "b"), gate: gate}
	const explanation = "/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations/x?resource=configmaps"
	type answer struct {
		code int
		body string
	}
	ask := func(access explainAccess, who, path string) answer {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if who != "" {
			r = r.WithContext(request.WithUser(r.Context(), &user.DefaultInfo{Name: who, Groups: []string{"system:authenticated"}}))
		}
		w := httptest.NewRecorder()
		if strings.HasPrefix(path, "/debug/graph") {
			debugGraph(access).ServeHTTP(w, r)
		} else {
			aggregatedAPI(access).ServeHTTP(w, r)
		}
		return answer{w.Code, w.Body.String()}
	}
	for _, tc := range []struct {
		name, who, path string
		want            answer
		// asked is the member the authorizer must have been asked about ("": none asked).
		asked string
	}{
		{"allowed member", "alice", explanation + "&member=a", answer{200, `"resource": "configmaps a"`}, "a"},
		{"another allowed member", "bob", explanation + "&member=b", answer{200, `"resource": "configmaps b"`}, "b"},
		{"denied member", "alice", explanation + "&member=b", answer{403, `Forbidden: user \"alice\" cannot get members.debug.cascade.dev \"b\" at the cluster scope: no RBAC rule allows it`}, "b"},
		{"denied member that does not exist", "bob", explanation + "&member=ghost", answer{403, `cannot get members.debug.cascade.dev \"ghost\"`}, "ghost"},
		{"allowed member that does not run", "alice", explanation + "&member=ghost", answer{404, `fleet mode: no running member \"ghost\"`}, "ghost"},
		{"no member", "alice", explanation, answer{400, "fleet mode: every object is a member's; name the member (cascade explain --member NAME"}, ""},
		{"no user", "", explanation + "&member=a", answer{403, "the request has no authenticated user"}, ""},
		{"authorizer down", "unreachable", explanation + "&member=a", answer{500, "authorization failed"}, "a"},
		{"absent object of an allowed member", "alice", strings.Replace(explanation, "/x?", "/y?", 1) + "&member=a", answer{404, "configmaps shop/y is not in the graph"}, "a"},
		{"graph, allowed member", "alice", "/debug/graph?uid=u-1&member=a", answer{200, "graph of member a"}, "a"},
		{"graph, denied member", "alice", "/debug/graph?uid=u-1&member=b", answer{403, `cannot get members.debug.cascade.dev "b"`}, "b"},
		{"graph, allowed member that does not run", "alice", "/debug/graph?uid=u-1&member=ghost", answer{404, `no running member "ghost"`}, "ghost"},
		{"graph, no member", "alice", "/debug/graph?uid=u-1", answer{400, "name the member"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(authz.questions())
			got := ask(fleetAccess, tc.who, tc.path)
			if got.code != tc.want.code || !strings.Contains(got.body, tc.want.body) {
				t.Errorf("GET %s as %q = %d %s, want %d containing %s", tc.path, tc.who, got.code, got.body, tc.want.code, tc.want.body)
			}
			if !strings.HasPrefix(tc.path, "/debug/graph") && got.code != 200 {
				var st metav1.Status
				if err := json.Unmarshal([]byte(got.body), &st); err != nil || st.Kind != "Status" || st.Code != int32(got.code) || st.Reason == "" {
					t.Errorf("not an API Status with a reason: %s (%v)", got.body, err)
				}
			}
			asked := authz.questions()[before:]
			if tc.asked == "" {
				if len(asked) != 0 {
					t.Errorf("the authorizer was asked %+v, want nothing", asked)
				}
				return
			}
			if len(asked) != 1 {
				t.Fatalf("the authorizer was asked %+v, want once about member %s", asked, tc.asked)
			}
			want := authorizer.AttributesRecord{User: asked[0].GetUser(), ResourceRequest: true, Path: strings.Split(tc.path, "?")[0],
				Verb: "get", APIGroup: debugGroup, APIVersion: debugVersion, Resource: membersResource, Name: tc.asked}
			if !reflect.DeepEqual(asked[0], want) || asked[0].GetUser().GetName() != tc.who {
				t.Errorf("the authorizer was asked %+v, want %+v for %s", asked[0], want, tc.who)
			}
		})
	}
	// A member's reader is authorized for all of its namespaces: every dependent is named.
	var e gc.Explanation
	if got := ask(fleetAccess, "alice", explanation+"&member=a"); json.Unmarshal([]byte(got.body), &e) != nil ||
		len(e.Dependents) != 2 || e.OtherNamespaceDependents != 0 {
		t.Errorf("a member's explanation: %d dependents named, %d counted; want both named: %s", len(e.Dependents), e.OtherNamespaceDependents, got.body)
	}
	for code, want := range map[string]float64{"403": 4, "500": 1} {
		if got := testutil.ToFloat64(gate.refused.WithLabelValues(code)); got != want {
			t.Errorf("cascade_serving_refused_requests_total{code=%s} = %v, want %v", code, got, want)
		}
	}

	// A single-cluster cascade: a member is a bad request, asked of no authorizer.
	single := explainAccess{graphs: graphs{single: fakeCollector{explain: fakeExplain, graph: func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the graph") }}}, gate: gate}
	before := len(authz.questions())
	for path, want := range map[string]answer{
		explanation + "&member=a":       {400, `member \"a\": this cascade is not in fleet mode`},
		"/debug/graph?uid=u-1&member=a": {400, `member "a": this cascade is not in fleet mode`},
		explanation:                     {200, `"uid": "u-x"`},
		"/debug/graph?uid=u-1":          {200, "the graph"},
	} {
		if got := ask(single, "alice", path); got.code != want.code || !strings.Contains(got.body, want.body) {
			t.Errorf("single cluster: GET %s = %d %s, want %d containing %s", path, got.code, got.body, want.code, want.body)
		}
	}
	if asked := authz.questions()[before:]; len(asked) != 0 {
		t.Errorf("single cluster: the authorizer was asked %+v", asked)
	}

	// No gate (--metrics-secure=false): the member answers anyone.
	open := explainAccess{graphs: fleetGraphs("a")}
	if got := ask(open, "", explanation+"&member=a"); got.code != 200 || !strings.Contains(got.body, `"resource": "configmaps a"`) {
		t.Errorf("unsecured port: %d %s, want a's explanation", got.code, got.body)
	}
}

// TestSecureServingMembers (issue 33.6): through cascade's secure metrics port, a member's
// explanation takes two SubjectAccessReviews, of the path (get explanations in the path's
// namespace, or get /debug/graph) and of the member (get members/NAME of debug.cascade.dev, no
// namespace): a user granted the member but not the path, or the path but not the member, is
// refused 403.
func TestSecureServingMembers(t *testing.T) {
	api := &reviewServer{
		users: map[string]string{"t-tenant": "tenant", "t-operator": "operator", "t-path": "path-only"},
		paths: map[string][]string{"operator": {"/debug/graph"}, "path-only": {"/debug/graph"}},
		resources: map[string][]string{
			"tenant":    {"get explanations.debug.cascade.dev shop/x", "get members.debug.cascade.dev /a"},
			"operator":  {"get members.debug.cascade.dev /a", "get members.debug.cascade.dev /b"},
			"path-only": {"get explanations.debug.cascade.dev shop/x"},
		},
	}
	metrics, _ := startServersOf(t, secureOptions(), api, fleetGraphs("a", "b"))
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the self-signed certificate of the test's cascade
	base := "https://" + metrics
	const explanation = "/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations/x?resource=configmaps"
	for _, tc := range []struct {
		token, path string
		code        int
		body        string
	}{
		{"t-tenant", explanation + "&member=a", 200, `"resource": "configmaps a"`},
		{"t-tenant", explanation + "&member=b", 403, `Forbidden: user "tenant" cannot get members.debug.cascade.dev "b" at the cluster scope`},
		{"t-tenant", "/debug/graph?uid=u&member=a", 403, `cannot get path "/debug/graph"`},
		{"t-operator", "/debug/graph?uid=u&member=b", 200, "graph of member b"},
		{"t-operator", explanation + "&member=a", 403, `cannot get explanations.debug.cascade.dev "x" in namespace "shop"`},
		{"t-path", explanation + "&member=a", 403, `cannot get members.debug.cascade.dev "a"`},
		{"t-path", "/debug/graph?uid=u&member=a", 403, `cannot get members.debug.cascade.dev "a"`},
	} {
		code, body := get(t, insecure, base+tc.path, tc.token)
		var st metav1.Status
		if json.Unmarshal([]byte(body), &st) == nil && st.Kind == "Status" {
			body = st.Message
		}
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s with %s = %d %q, want %d containing %q", tc.path, tc.token, code, body, tc.code, tc.body)
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	want := authorizationv1.ResourceAttributes{Verb: "get", Group: debugGroup, Version: debugVersion, Resource: membersResource, Name: "a"}
	found := false
	for _, spec := range api.access {
		if a := spec.ResourceAttributes; a != nil && a.Resource == membersResource {
			if a.Namespace != "" || a.Verb != "get" || a.Group != debugGroup || a.Subresource != "" {
				t.Errorf("a member's SubjectAccessReview asks %+v, want get members.%s at the cluster scope", *a, debugGroup)
			}
			found = found || (spec.User == "tenant" && *a == want && slices.Contains(spec.Groups, "system:authenticated"))
		}
	}
	if !found {
		t.Errorf("no SubjectAccessReview for the tenant of %+v with its groups among %+v", want, api.access)
	}
}
