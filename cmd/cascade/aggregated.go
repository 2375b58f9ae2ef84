package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
)

// The aggregated API cascade serves on its metrics port, registered with the API server by
// deploy/base's APIService v1alpha1.debug.cascade.dev (as metrics-server serves
// metrics.k8s.io): `cascade explain` reaches it through the API server, which authenticates the
// user and authorizes `get explanations.debug.cascade.dev` with the user's RBAC, then forwards
// the request with the user's identity in front-proxy headers, which cascade authenticates by the
// API server's client certificate (accessGate) and authorizes again. One read-only resource:
//
//	GET /apis/debug.cascade.dev/v1alpha1/namespaces/NAMESPACE/explanations/NAME?resource=PLURAL[.GROUP]
//	GET /apis/debug.cascade.dev/v1alpha1/explanations/NAME?resource=PLURAL[.GROUP]   (cluster-scoped objects)
//
// answers what /debug/graph answers about that object (&format=dot: Graphviz). The namespace of
// the path must be the object's, so a grant in one namespace (a RoleBinding) explains that
// namespace's objects only. In fleet mode the object is a member's, named with &member=NAME,
// which the user must also be allowed to get as members/NAME (graphs.go).
const (
	debugGroup       = "debug.cascade.dev"
	debugVersion     = "v1alpha1"
	explanationsName = "explanations"
)

// requestInfos parses a request path the way kube-apiserver and every aggregated API server
// do, so that cascade authorizes an aggregated request with the attributes the API server
// authorized it with.
var requestInfos = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("apis", "api"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// isDiscoveryPath says whether path is one of the aggregated API's discovery documents, which
// every authenticated user may read (as the API server's system:discovery role lets).
func isDiscoveryPath(path string) bool {
	switch strings.TrimSuffix(path, "/") {
	case "/apis", "/apis/" + debugGroup, "/apis/" + debugGroup + "/" + debugVersion:
		return true
	}
	return false
}

// requestAttributes is what a request asks to do, for the SubjectAccessReview: under /apis/ a
// resource request (verb, group, version, namespace, resource, name) as kube-apiserver parsed it,
// elsewhere (/metrics, /debug/...) the non-resource URL and its verb.
func requestAttributes(r *http.Request, u user.Info) authorizer.AttributesRecord {
	if strings.HasPrefix(r.URL.Path, "/apis/") || strings.HasPrefix(r.URL.Path, "/api/") {
		info, err := requestInfos.NewRequestInfo(r)
		if err == nil && info.IsResourceRequest {
			return authorizer.AttributesRecord{
				User: u, ResourceRequest: true, Path: r.URL.Path,
				Verb: info.Verb, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
				Namespace: info.Namespace, Resource: info.Resource, Subresource: info.Subresource, Name: info.Name,
			}
		}
	}
	return authorizer.AttributesRecord{User: u, Verb: nonResourceVerb(r.Method), Path: r.URL.Path}
}

// aggregatedAPI serves the discovery documents of debug.cascade.dev/v1alpha1 and its
// explanations, from the collector access finds. It trusts accessGate to have authenticated and
// authorized the request's path; access authorizes the member it names.
func aggregatedAPI(access explainAccess) http.Handler {
	gv := debugGroup + "/" + debugVersion
	group := metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             debugGroup,
		Versions:         []metav1.GroupVersionForDiscovery{{GroupVersion: gv, Version: debugVersion}},
		PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: debugVersion},
	}
	docs := map[string]any{
		"/apis":               metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{group}},
		"/apis/" + debugGroup: group,
		"/apis/" + gv: metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv,
			APIResources: []metav1.APIResource{{
				Name: explanationsName, SingularName: "explanation", Namespaced: true, Kind: "Explanation", Verbs: []string{"get"},
			}},
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if doc, ok := docs[strings.TrimSuffix(r.URL.Path, "/")]; ok {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "discovery documents are read with GET")
				return
			}
			writeJSON(w, doc)
			return
		}
		info, err := requestInfos.NewRequestInfo(r)
		if err != nil || !info.IsResourceRequest || info.APIGroup != debugGroup || info.APIVersion != debugVersion ||
			info.Resource != explanationsName || info.Subresource != "" || len(info.Parts) > 2 {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
			return
		}
		if info.Verb != "get" {
			writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
				fmt.Sprintf("explanations are read one at a time, with get; %s is not supported", info.Verb))
			return
		}
		q := r.URL.Query()
		resource := q.Get("resource")
		if resource == "" {
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "give ?resource=PLURAL[.GROUP], the object's resource (configmaps, deployments.apps)")
			return
		}
		c, member, refused := access.resolve(r)
		if refused != nil {
			writeStatus(w, refused.code, statusReasons[refused.code], refused.msg)
			return
		}
		e, err := c.ExplainNamed(r.Context(), resource, info.Namespace, info.Name)
		if err != nil || e.Object.Namespace != info.Namespace {
			// Absent, or a cluster-scoped object asked for under a namespace (or the reverse):
			// the namespace the API server authorized is not the object's. One answer for
			// both, so that a reader of one namespace cannot tell which cluster-scoped objects
			// exist (issue 32.7).
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s %s/%s is not in the graph", resource, info.Namespace, info.Name))
			return
		}
		if info.Namespace != "" && member == "" {
			// Authorized in one namespace: the objects of others that reference this one are
			// counted, not named. A member's reader is authorized for all of its namespaces.
			e.KeepNamespace(info.Namespace)
		}
		// Who asked what, for the record: the user the API server forwarded (or the token's).
		who := ""
		if u, ok := request.UserFrom(r.Context()); ok {
			who = u.GetName()
		}
		klog.FromContext(r.Context()).Info("Explained an object", "user", who, "member", member, "resource", resource, "namespace", info.Namespace, "name", info.Name)
		if q.Get("format") == "dot" {
			w.Header().Set("Content-Type", "text/vnd.graphviz")
			_, _ = w.Write([]byte(e.DOT()))
			return
		}
		writeJSON(w, e)
	})
}

// statusReasons are the reasons of the API Statuses that refuse an explanation.
var statusReasons = map[int]metav1.StatusReason{
	http.StatusBadRequest:          metav1.StatusReasonBadRequest,
	http.StatusForbidden:           metav1.StatusReasonForbidden,
	http.StatusNotFound:            metav1.StatusReasonNotFound,
	http.StatusInternalServerError: metav1.StatusReasonInternalError,
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeStatus answers an error as API servers do: a metav1.Status, which kubectl and client-go
// read the message of.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	})
}
