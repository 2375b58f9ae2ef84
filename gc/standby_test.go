package gc

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/record"

	"github.com/cascade-gc/cascade/client"
	"github.com/cascade-gc/cascade/client/clienttest"
	"github.com/cascade-gc/cascade/graph"
)

// TestStandbyEmitsNoEvents: a standby's graph finds a reference to an owner in another
// namespace, but the OwnerRefInvalidNamespace Event waits until the replica leads; then it is
// emitted once. The count is exported at once (metrics are not writes).
func TestStandbyEmitsNoEvents(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	elected := make(chan struct{})
	m := NewMetrics(prometheus.NewRegistry())
	c := New(Deps{Client: client.New(clienttest.NewFake()), Metrics: m, Recorder: rec, Elected: elected})
	t.Cleanup(func() { c.deleteQueue.ShutDown(); c.verifyQueue.ShutDown() })

	owner := graph.Object{Ref: graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns2", Name: "w-u-owner", UID: "u-owner"}, ResourceVersion: "1"}
	observe(c, owner, widgetObj("dep", "u-dep", "u-owner")) // dep lives in "ns"
	if n := len(rec.Events); n != 0 {
		t.Fatalf("a standby emitted %d events: %v", n, <-rec.Events)
	}
	if v := testutil.ToFloat64(m.InvalidNamespaceRefs); v != 1 {
		t.Errorf("invalid_namespace_refs_total = %v, want 1", v)
	}
	c.lead()
	if n := len(rec.Events); n != 1 {
		t.Fatalf("after leading: %d events, want 1", n)
	}
	want := `Warning OwnerRefInvalidNamespace ownerRef [example.com/v1/Widget, namespace: ns, name: w-u-owner, uid: u-owner] does not exist in namespace "ns"`
	if got := <-rec.Events; got != want {
		t.Errorf("event = %q\nwant    %q", got, want)
	}
	// From now on Events go out at once.
	observe(c, widgetObj("dep2", "u-dep2", "u-owner"))
	if n := len(rec.Events); n != 1 {
		t.Errorf("leader: %d events for a new invalid reference, want 1", n)
	}
}
