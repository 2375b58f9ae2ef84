package fleet

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// memberConfig is the client configuration the fleet makes for a member whose API server is
// srv (requests bounded by timeout).
func memberConfig(t *testing.T, srv *httptest.Server, timeout time.Duration) *rest.Config {
	t.Helper()
	f, err := New(Options{Provider: &testProvider{}, Build: func(context.Context, Member) (Unit, error) { return nil, nil }, RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	kubeconfig := strings.Replace(strings.Replace(testKubeconfig, "https://127.0.0.1:6443", srv.URL, 1), "Y2E=", ca, 1)
	cfg, err := f.config(&runningMember{name: "m", source: Source{Kubeconfig: []byte(kubeconfig)}}, newDialer())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRequestToAHungMemberEnds: a member's API server that accepts a request and never answers
// fails that request after --fleet-member-request-timeout, with a reason that says so.
func TestRequestToAHungMemberEnds(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	disco, err := discovery.NewDiscoveryClientForConfig(memberConfig(t, srv, 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := disco.ServerVersion(); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no answer within --fleet-member-request-timeout=300ms") {
			t.Errorf("a hung member's /version: %v, want the deadline named", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a request to a hung member did not end")
	}
}

// TestHugeAnswerRefused: a member that answers 20 MiB, announced or not (chunked), has its
// answer refused, and one within the bound is read.
func TestHugeAnswerRefused(t *testing.T) {
	big := strings.Repeat(" ", 20<<20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("how") {
		case "chunked":
			w.(http.Flusher).Flush() // no Content-Length: the body is read until the bound
			_, _ = w.Write([]byte(`{"major":"1",` + big[:10<<20]))
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(big[10<<20:] + `"minor":"36"}`))
		case "small":
			_, _ = w.Write([]byte(`{"major":"1","minor":"36"}`))
		default:
			_, _ = w.Write([]byte(`{"major":"1",` + big + `"minor":"36"}`))
		}
	}))
	defer srv.Close()
	cfg := memberConfig(t, srv, 30*time.Second)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(how string) ([]byte, error) {
		resp, err := hc.Get(srv.URL + "/version?how=" + how)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	for _, how := range []string{"announced", "chunked"} {
		if _, err := get(how); !errors.Is(err, errTooLarge) {
			t.Errorf("a 20 MiB answer (%s): %v, want it refused", how, err)
		}
	}
	if b, err := get("small"); err != nil || !strings.Contains(string(b), "36") {
		t.Errorf("a small answer: %q, %v", b, err)
	}
}

// TestWatchNotCutByTheDeadline: a watch outlives the request timeout (its events come slower
// than it): watches keep their own timeouts.
func TestWatchNotCutByTheDeadline(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := range 3 {
			if i > 0 {
				time.Sleep(200 * time.Millisecond)
			}
			_, _ = w.Write([]byte(`{"type":"BOOKMARK","object":{}}` + "\n"))
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	cfg := memberConfig(t, srv, 100*time.Millisecond)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(srv.URL + "/api/v1/configmaps?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	read := 0
	for {
		n, err := resp.Body.Read(buf)
		read += n
		if err != nil {
			if read < 3*len(`{"type":"BOOKMARK","object":{}}`) {
				t.Errorf("the watch ended after %d bytes: %v", read, err)
			}
			break
		}
	}
}
