package main

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
)

// The explain endpoints (/debug/graph and the aggregated API's explanations) answer from one
// collector's graph: the single cluster's or, in fleet mode, that of the member the request
// names with ?member=NAME. A member's namespaces are not the host's, so the host's RBAC on what
// the path names (get explanations in a namespace, get /debug/graph) cannot speak for them. A
// request about a member also needs its user to be allowed get on the virtual resource members
// of debug.cascade.dev, named after the member, at the host's cluster scope (a ClusterRole rule
// with resourceNames, bound by a ClusterRoleBinding: docs/fleet.md); its user then sees that
// member's objects in every namespace.

// membersResource is the virtual resource of debug.cascade.dev whose get, on the member's name,
// grants a fleet member's explanations. Nothing serves it: only cascade asks about it.
const membersResource = "members"

// explainer is what answers the explain endpoints about one cluster (gc.Controller).
type explainer interface {
	// ExplainNamed explains the object of resource (plural[.group]) named namespace/name; an
	// error means the graph does not have it.
	ExplainNamed(ctx context.Context, resource, namespace, name string) (gc.Explanation, error)
	// DebugGraph serves /debug/graph.
	DebugGraph(w http.ResponseWriter, r *http.Request)
}

// graphs is where the explain endpoints find the collector that answers: the single cluster's
// (single), or a fleet member's while it runs (member). Exactly one is set.
type graphs struct {
	single explainer
	member func(name string) (explainer, bool)
	// elsewhere, when set, says where a member that does not run here runs (a fleet sharded
	// over replicas: its shard and the replica holding it), or "" when it cannot say.
	elsewhere func(name string) string
}

// explainAccess finds the collector a request asks about, once its user may ask about it.
type explainAccess struct {
	graphs graphs
	// gate authorizes a member's user (accessGate.authorizeMember); nil when the metrics port
	// is not secured (--metrics-secure=false, a local run), where nothing is authorized.
	gate *accessGate
}

// refusal is why a request gets no answer: its HTTP status code and message.
type refusal struct {
	code int
	msg  string
}

// resolve returns the collector that answers r and the member it names ("" for the single
// cluster), or why none answers:
//   - 400 for a member named to a cascade that is not in fleet mode, and for none named to one
//     that is: in fleet mode every object is a member's;
//   - 403 when r's user may not get members/NAME (docs/fleet.md), asked before the member is
//     looked up, so that whoever may not see a member cannot learn whether it exists; 500 when
//     the API server could not say;
//   - 404 for a member that is not running (unknown, or down).
func (a explainAccess) resolve(r *http.Request) (explainer, string, *refusal) {
	member := r.URL.Query().Get("member")
	if a.graphs.single != nil {
		if member != "" {
			return nil, "", &refusal{http.StatusBadRequest, fmt.Sprintf("member %q: this cascade is not in fleet mode; it collects in one cluster, whose objects are asked for without a member (drop --member)", member)}
		}
		return a.graphs.single, "", nil
	}
	if member == "" {
		return nil, "", &refusal{http.StatusBadRequest, "fleet mode: every object is a member's; name the member (cascade explain --member NAME, ?member=NAME)"}
	}
	if a.gate != nil {
		if refused := a.gate.authorizeMember(r, member); refused != nil {
			return nil, "", refused
		}
	}
	c, ok := a.graphs.member(member)
	if !ok && a.graphs.elsewhere != nil {
		if where := a.graphs.elsewhere(member); where != "" {
			return nil, "", &refusal{http.StatusNotFound, fmt.Sprintf("fleet mode: member %q does not run in this replica: %s", member, where)}
		}
	}
	if !ok {
		return nil, "", &refusal{http.StatusNotFound, fmt.Sprintf("fleet mode: no running member %q (it is not in the fleet, or it is down: cascade_member_up says which)", member)}
	}
	return c, member, nil
}

// memberAttributes is what a user must be allowed to ask about member: get members/NAME of
// debug.cascade.dev, at the cluster scope.
func memberAttributes(r *http.Request, member string) authorizer.AttributesRecord {
	u, _ := request.UserFrom(r.Context())
	return authorizer.AttributesRecord{
		User: u, ResourceRequest: true, Path: r.URL.Path,
		Verb: "get", APIGroup: debugGroup, APIVersion: debugVersion, Resource: membersResource, Name: member,
	}
}

// authorizeMember says why r's user may not ask about member (nil: it may), by the API
// server's answer to a SubjectAccessReview for memberAttributes. wrap put the user in r's
// context; a request without one is refused.
func (g *accessGate) authorizeMember(r *http.Request, member string) *refusal {
	attrs := memberAttributes(r, member)
	if attrs.User == nil {
		g.refuse(http.StatusForbidden)
		return &refusal{http.StatusForbidden, "Forbidden: the request has no authenticated user"}
	}
	return g.authorize(r.Context(), klog.FromContext(r.Context()).WithValues("path", r.URL.Path, "member", member), attrs)
}

// debugGraph serves /debug/graph from the collector the request names (?member= in fleet
// mode).
func debugGraph(access explainAccess) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, _, refused := access.resolve(r)
		if refused != nil {
			http.Error(w, refused.msg, refused.code)
			return
		}
		c.DebugGraph(w, r)
	}
}
