package fleet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/cascade-gc/cascade/internal/work"
)

// TestHungMemberLendsItsSlot: with a pool of one slot, an item of a member whose API server
// never answers holds the slot for LendAfter at most; a healthy member's item takes it while
// the hung request waits out its deadline; and the hung item goes on (to fail) only once a
// slot is free again. The member's client (Fleet.config) is what lends.
func TestHungMemberLendsItsSlot(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	mc, err := metadata.NewForConfig(memberConfig(t, srv, 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	pool := work.NewPool(1)
	hung, healthy := pool.Share(), pool.Share()
	q := work.NewQueue("attempt_to_delete", work.Options[string]{Share: hung})
	defer q.ShutDown()
	q.Add("dependent")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ended := make(chan error, 1)
	go q.ProcessNext(ctx, func(ctx context.Context, _ string) (work.Outcome, error) {
		err := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Delete(ctx, "dependent", metav1.DeleteOptions{})
		ended <- err
		return work.Done, err
	})
	start := time.Now()
	if !healthy.Acquire(ctx) {
		t.Fatal("the healthy member got no slot while the hung member's request waited")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the healthy member waited %v for the slot, want about LendAfter (%v), not the deadline", took, LendAfter)
	}
	select {
	case err := <-ended:
		t.Fatalf("the hung member's request ended while the healthy member held the only slot: %v", err)
	case <-time.After(4 * time.Second): // past the request deadline: it waits for a slot
	}
	healthy.Release()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the hung member's DELETE succeeded")
		}
	case <-ctx.Done():
		t.Fatal("the hung member's item never ended")
	}
}
