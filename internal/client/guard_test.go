package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/cascade-gc/cascade/internal/client/clienttest"
)

// TestGuardWritesRefusesEveryWriteOfTheEdge: an Edge built on clients whose transport is
// guarded sends no write of any method while the guard refuses (each answers ErrNotWritable,
// and the server sees none), and its reads go through; once the guard allows, every write is
// sent. The guard is the one place a sharded member's writes are fenced.
func TestGuardWritesRefusesEveryWriteOfTheEdge(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	writes := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, m := range seen {
			if m != http.MethodGet {
				out = append(out, m)
			}
		}
		seen = nil
		return out
	}
	var allowed error = errors.New("shard 3 not held")
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return GuardWrites(rt, func() error { return allowed }) })
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	edge := NewEdge(meta, kube)
	ctx := context.Background()
	for name, c := range edgeWriteCases() {
		allowed = errors.New("shard 3 not held")
		if err := c.call(ctx, edge); !errors.Is(err, ErrNotWritable) {
			t.Errorf("%s through a refusing guard: %v, want ErrNotWritable", name, err)
		}
		if w := writes(); len(w) != 0 {
			t.Errorf("%s through a refusing guard reached the server: %v", name, w)
		}
		allowed = nil
		_ = c.call(ctx, edge) // the server answers 404; what counts is that the write was sent
		if w := writes(); len(w) == 0 {
			t.Errorf("%s through an allowing guard sent no write", name)
		}
	}
	allowed = errors.New("shard 3 not held")
	if _, err := edge.Objects.Get(ctx, clienttest.Widgets, "ns", "w"); errors.Is(err, ErrNotWritable) {
		t.Errorf("a read through a refusing guard: %v, want it sent", err)
	}
	mu.Lock()
	if !slices.Contains(seen, http.MethodGet) {
		t.Errorf("the read was not sent: %v", seen)
	}
	mu.Unlock()
}
