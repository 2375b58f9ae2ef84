package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cascade-gc/cascade/gc"
)

type fakeReadiness struct {
	ready    bool
	unsynced []gc.Unsynced
}

func (f fakeReadiness) Synced() bool            { return f.ready }
func (f fakeReadiness) Unsynced() []gc.Unsynced { return f.unsynced }

// TestReadyzRevealsNothing: /readyz counts the resources whose view is incomplete before the
// graph syncs (503) and after it proceeded without them (200), but never names them nor tells
// their error: it answers anyone, unauthenticated.
func TestReadyzRevealsNothing(t *testing.T) {
	gizmos := gc.Unsynced{Resource: gc.Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "gizmos"}}, Err: "conversion webhook failed"}
	widgets := gc.Unsynced{Resource: gc.Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}}}
	tests := []struct {
		name     string
		r        fakeReadiness
		wantCode int
		wantBody string
	}{
		{"synced", fakeReadiness{ready: true}, http.StatusOK, "ok"},
		{"waiting", fakeReadiness{unsynced: []gc.Unsynced{gizmos, widgets}}, http.StatusServiceUnavailable,
			"not ready: the dependency graph has not synced; waiting for 2 resources (cascade_resource_unsynced names them)\n"},
		{"proceeded without one", fakeReadiness{ready: true, unsynced: []gc.Unsynced{gizmos}}, http.StatusOK,
			"ok; 1 resources unsynced, decisions that need them wait (cascade_resource_unsynced names them)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			readyz(tt.r)(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if w.Code != tt.wantCode || w.Body.String() != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", w.Code, w.Body.String(), tt.wantCode, tt.wantBody)
			}
			for _, secret := range []string{"gizmos", "widgets", "example.com", "webhook"} {
				if strings.Contains(w.Body.String(), secret) {
					t.Errorf("/readyz reveals %q: %q", secret, w.Body.String())
				}
			}
		})
	}
}
