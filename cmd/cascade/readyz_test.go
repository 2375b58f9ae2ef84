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
	features string
}

func (f fakeReadiness) Synced() bool            { return f.ready }
func (f fakeReadiness) Unsynced() []gc.Unsynced { return f.unsynced }
func (f fakeReadiness) Features() string        { return f.features }

// TestReadyzRevealsNothing: /readyz counts the resources whose view is incomplete before the
// graph syncs (503) and after it proceeded without them (200), but never names them nor tells
// their error: it answers anyone, unauthenticated. It says the feature levels in use on a line
// of their own.
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
		{"synced, with features", fakeReadiness{ready: true, features: "admission_policy=v1 list=watch_list"}, http.StatusOK,
			"ok\nfeatures in use: admission_policy=v1 list=watch_list\n"},
		{"waiting, with features", fakeReadiness{unsynced: []gc.Unsynced{widgets}, features: "admission_policy=none list=unknown"}, http.StatusServiceUnavailable,
			"not ready: the dependency graph has not synced; waiting for 1 resources (cascade_resource_unsynced names them)\nfeatures in use: admission_policy=none list=unknown\n"},
		{"proceeded without one, with features", fakeReadiness{ready: true, unsynced: []gc.Unsynced{gizmos}, features: "admission_policy=v1beta1 list=watch_list+paged"}, http.StatusOK,
			"ok; 1 resources unsynced, decisions that need them wait (cascade_resource_unsynced names them)\nfeatures in use: admission_policy=v1beta1 list=watch_list+paged\n"},
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
