package gc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
)

// TestExplain: a dependent of a gone owner explains as collectable, with the owner's verdict;
// the owner's explanation lists its dependents; /debug/graph finds objects by resource and
// name and serves JSON and DOT.
func TestExplain(t *testing.T) {
	fake := clienttest.NewFake(clienttest.Deleting(clienttest.Widget("ns", "held", "u-held", "2", clienttest.OwnerRef("u-fg", nil)), "example.com/hold"))
	c := newControllerOver(t, fake)
	c.resources = ResourceSet{widgets: Resource{GVR: widgets, Kind: "Widget", Namespaced: true}}
	fg := widgetObj("w-u-fg", "u-fg")
	fg.Deleting, fg.Finalizers = true, graph.FinalizerForeground
	held := widgetObj("held", "u-held")
	held.Owners = []graph.OwnerRef{{APIVersion: "example.com/v1", Kind: "Widget", Name: "w-u-fg", UID: "u-fg", BlockOwnerDeletion: true}}
	held.Deleting = true
	observe(c, widgetObj("w-u-owner", "u-owner"), widgetObj("dep", "u-dep", "u-owner"), fg, held)
	observeDeleted(c, "u-owner")

	e, ok := c.Explain(context.Background(), "u-dep")
	if !ok {
		t.Fatal("dep not explained")
	}
	if e.State != "observed" || e.Resource != "widgets.v1.example.com" || len(e.Owners) != 1 || e.Owners[0].State != "Absent" {
		t.Errorf("explanation of dep: %+v", e)
	}
	if e.Decision == nil || e.Decision.Action != "Delete" || e.Decision.Reason != "OwnersGone" || e.Decision.Propagation != "Background" {
		t.Errorf("decision = %+v, want Delete (OwnersGone) in the background", e.Decision)
	}

	fe, _ := c.Explain(context.Background(), "u-fg")
	if fe.BlockingDependents != 1 || len(fe.Dependents) != 1 || !fe.Dependents[0].Blocking || !fe.Dependents[0].Deleting ||
		len(fe.Dependents[0].Finalizers) != 1 || fe.Dependents[0].Finalizers[0] != "example.com/hold" {
		t.Errorf("foreground owner's dependents: %+v", fe.Dependents)
	}

	srv := httptest.NewServer(http.HandlerFunc(c.DebugGraph))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/graph?resource=widgets.example.com&namespace=ns&name=dep")
	if err != nil {
		t.Fatal(err)
	}
	var got Explanation
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Object.UID != "u-dep" {
		t.Errorf("JSON by coordinates: %+v, %v", got.Object, err)
	}
	_ = resp.Body.Close()
	resp, err = http.Get(srv.URL + "/debug/graph?uid=u-fg&format=dot")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	_ = resp.Body.Close()
	if !strings.HasPrefix(b.String(), "digraph cascade {") || !strings.Contains(b.String(), `"u-held" -> "u-fg"`) {
		t.Errorf("DOT:\n%s", b.String())
	}
	resp, err = http.Get(srv.URL + "/debug/graph?resource=widgets.example.com&namespace=ns&name=nope")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown object: %d, want 404", resp.StatusCode)
	}

	// ExplainNamed (the aggregated API's): the same explanation by coordinates, an error for
	// an object the graph lacks or a resource it does not watch.
	if ne, err := c.ExplainNamed(context.Background(), "widgets.example.com", "ns", "dep"); err != nil || ne.Object.UID != "u-dep" || ne.Decision == nil {
		t.Errorf("ExplainNamed widgets.example.com ns/dep = %+v, %v", ne.Object, err)
	}
	for _, tc := range []struct{ resource, ns, name, want string }{
		{"widgets.example.com", "ns", "nope", "widgets.example.com ns/nope is not in the graph"},
		{"widgets.example.com", "other", "dep", "widgets.example.com other/dep is not in the graph"},
		{"gadgets.example.com", "ns", "dep", `resource "gadgets.example.com" is not watched`},
	} {
		if _, err := c.ExplainNamed(context.Background(), tc.resource, tc.ns, tc.name); err == nil || err.Error() != tc.want {
			t.Errorf("ExplainNamed %s %s/%s: error %v, want %q", tc.resource, tc.ns, tc.name, err, tc.want)
		}
	}
}
