package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// seenRequest is what a test server received.
type seenRequest struct {
	method, path, accept, contentType, userAgent string
	body                                         map[string]any
}

type recordingServer struct {
	mu   sync.Mutex
	seen []seenRequest
	// answer writes the answer to the n-th request (0-based).
	answer func(n int, w http.ResponseWriter)
}

func (s *recordingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(data, &body)
	s.mu.Lock()
	n := len(s.seen)
	s.seen = append(s.seen, seenRequest{method: r.Method, path: r.URL.Path, accept: r.Header.Get("Accept"), contentType: r.Header.Get("Content-Type"), userAgent: r.Header.Get("User-Agent"), body: body})
	s.mu.Unlock()
	s.answer(n, w)
}

func okAnswer(_ int, w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"x"}}`))
}

func statusAnswer(code int, reason metav1.StatusReason) func(int, http.ResponseWriter) {
	return func(_ int, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: "m"})
	}
}

// TestDirectDeleteIsTheMetadataClients: the direct DELETE sends what the metadata client sends
// for the same call (method, path with a server prefix, Content-Type, the options' JSON), for
// namespaced and cluster-scoped objects of the core and of a group; its Accept asks for the
// answer as PartialObjectMetadata (the metadata client's DELETE takes the whole object).
func TestDirectDeleteIsTheMetadataClients(t *testing.T) {
	srv := &recordingServer{answer: okAnswer}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	cfg := &rest.Config{Host: ts.URL + "/prefix", QPS: -1, UserAgent: "cascade"}
	hc, err := rest.HTTPClientFor(cfg) // with the transport's user-agent round tripper, as cascade's
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDeleter(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		gvr       schema.GroupVersionResource
		namespace string
		rv        string
		policy    metav1.DeletionPropagation
	}{
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ns-1", "42", metav1.DeletePropagationBackground},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, "default", "", metav1.DeletePropagationForeground},
		{schema.GroupVersionResource{Group: "example.com", Version: "v1alpha1", Resource: "gadgets"}, "", "7", ""},
	}
	for _, c := range cases {
		opts := deleteOptions(types.UID("uid-1"), c.rv, c.policy)
		if err := mc.Resource(c.gvr).Namespace(c.namespace).Delete(ctx, "name:with-colon", opts); err != nil {
			t.Fatal(err)
		}
		if err := d.Delete(ctx, c.gvr, c.namespace, "name:with-colon", opts); err != nil {
			t.Fatal(err)
		}
	}
	if len(srv.seen) != 2*len(cases) {
		t.Fatalf("server saw %d requests, want %d", len(srv.seen), 2*len(cases))
	}
	for i := 0; i < len(srv.seen); i += 2 {
		want, got := srv.seen[i], srv.seen[i+1]
		wb, _ := json.Marshal(want.body)
		gb, _ := json.Marshal(got.body)
		if got.accept != MetadataAccept {
			t.Errorf("Accept %q, want %q", got.accept, MetadataAccept)
		}
		got.accept = want.accept
		if got.method != want.method || got.path != want.path || got.contentType != want.contentType || got.userAgent != want.userAgent || string(gb) != string(wb) {
			t.Errorf("direct DELETE\n %s %s accept=%q type=%q agent=%q %s\nmetadata client's\n %s %s accept=%q type=%q agent=%q %s",
				got.method, got.path, got.accept, got.contentType, got.userAgent, gb, want.method, want.path, want.accept, want.contentType, want.userAgent, wb)
		}
	}
	if p := srv.seen[0].path; p != "/prefix/api/v1/namespaces/ns-1/configmaps/name:with-colon" {
		t.Errorf("path %q", p)
	}
}

// TestDirectDeleteErrors: the errors callers branch on are the metadata client's (a 409 is a
// conflict, a 404 not found, a Status-less 500 a server error), 429 with Retry-After is sent
// again, and a 5xx without it is not.
func TestDirectDeleteErrors(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	opts := deleteOptions(types.UID("u"), "1", metav1.DeletePropagationBackground)
	cases := []struct {
		name     string
		answer   func(int, http.ResponseWriter)
		check    func(error) bool
		requests int
	}{
		{"409", statusAnswer(http.StatusConflict, metav1.StatusReasonConflict), apierrors.IsConflict, 1},
		{"404", statusAnswer(http.StatusNotFound, metav1.StatusReasonNotFound), apierrors.IsNotFound, 1},
		{"500 without a Status", func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }, apierrors.IsInternalError, 1},
		{"429 then 200", func(n int, w http.ResponseWriter) {
			if n == 0 {
				w.Header().Set("Retry-After", "0")
				statusAnswer(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)(n, w)
				return
			}
			okAnswer(n, w)
		}, func(err error) bool { return err == nil }, 2},
		{"429 every time", func(n int, w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			statusAnswer(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)(n, w)
		}, apierrors.IsTooManyRequests, maxDeleteRetries + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := &recordingServer{answer: c.answer}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			d, err := NewDeleter(&rest.Config{Host: ts.URL}, ts.Client())
			if err != nil {
				t.Fatal(err)
			}
			err = d.Delete(context.Background(), gvr, "ns", "cm", opts)
			if !c.check(err) {
				t.Errorf("error %v (%T)", err, err)
			}
			if len(srv.seen) != c.requests {
				t.Errorf("%d requests, want %d", len(srv.seen), c.requests)
			}
		})
	}
}

type warningsSeen struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningsSeen) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// TestDirectDeleteWarnings: a Warning header goes to the config's warning handler.
func TestDirectDeleteWarnings(t *testing.T) {
	ts := httptest.NewServer(&recordingServer{answer: func(n int, w http.ResponseWriter) {
		w.Header().Add("Warning", `299 - "v1 Gadget is deprecated"`)
		okAnswer(n, w)
	}})
	defer ts.Close()
	seen := &warningsSeen{}
	d, err := NewDeleter(&rest.Config{Host: ts.URL, WarningHandler: seen}, ts.Client())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(context.Background(), schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}, "", "g", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(seen.texts) != 1 || seen.texts[0] != "v1 Gadget is deprecated" {
		t.Errorf("warnings %q", seen.texts)
	}
}
