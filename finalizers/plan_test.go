package finalizers

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
)

func TestPlanOwner(t *testing.T) {
	deleting := func(f graph.Finalizers) graph.NodeView {
		return graph.NodeView{Ref: graph.Ref{UID: "o"}, Deleting: true, Finalizers: f}
	}
	tests := []struct {
		name  string
		n     graph.NodeView
		found bool
		want  Work
	}{
		{name: "unknown uid", found: false, n: deleting(graph.FinalizerOrphan), want: Work{}},
		{name: "orphan", found: true, n: deleting(graph.FinalizerOrphan), want: Work{Orphan: true}},
		{name: "foreground", found: true, n: deleting(graph.FinalizerForeground), want: Work{Foreground: true}},
		{name: "both", found: true, n: deleting(graph.FinalizerOrphan | graph.FinalizerForeground), want: Work{Orphan: true, Foreground: true}},
		{name: "deleting without GC finalizer", found: true, n: deleting(0), want: Work{}},
		{
			name: "a live object with the orphan finalizer (a default policy) is never finished", found: true,
			n: graph.NodeView{Finalizers: graph.FinalizerOrphan}, want: Work{},
		},
		{
			name: "a live object with the foregroundDeletion finalizer is never finished", found: true,
			n: graph.NodeView{Finalizers: graph.FinalizerForeground}, want: Work{},
		},
		{name: "absent tombstone", found: true, n: graph.NodeView{Absent: true}, want: Work{}},
		{name: "virtual", found: true, n: graph.NodeView{Virtual: true}, want: Work{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanOwner(tt.n, tt.found)
			if got != tt.want {
				t.Errorf("PlanOwner() = %+v, want %+v", got, tt.want)
			}
			if got.None() != (tt.want == Work{}) {
				t.Errorf("None() = %t", got.None())
			}
		})
	}
}

var (
	widgetsGVR  = clienttest.Widgets
	clusterGVR  = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}
	testResolve = func(apiVersion, kind string) (gc.Resource, bool) {
		switch apiVersion + "/" + kind {
		case "example.com/v1/Widget":
			return gc.Resource{GVR: widgetsGVR, Kind: "Widget", Namespaced: true}, true
		case "example.com/v1/Gizmo":
			return gc.Resource{GVR: clusterGVR, Kind: "Gizmo"}, true
		}
		return gc.Resource{}, false
	}
)

func TestPlanOrphan(t *testing.T) {
	w := func(name string, uid types.UID) graph.Ref {
		return graph.Ref{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: name, UID: uid}
	}
	deps := []graph.Ref{
		w("a", "ua"),
		w("done", "udone"),
		{APIVersion: "gone.example.com/v1", Kind: "Removed", Namespace: "ns", Name: "r", UID: "ur"},
		{APIVersion: "example.com/v1", Kind: "Gizmo", Name: "g", UID: "ug"},
		w("a", "ua"),
		w("b", "ub"),
	}
	patched := map[types.UID]struct{}{"udone": {}}
	todo, unresolved := PlanOrphan(deps, patched, testResolve)
	want := []client.Target{
		{GVR: widgetsGVR, Namespace: "ns", Name: "a", UID: "ua"},
		{GVR: clusterGVR, Name: "g", UID: "ug"},
		{GVR: widgetsGVR, Namespace: "ns", Name: "b", UID: "ub"},
	}
	if !reflect.DeepEqual(todo, want) {
		t.Errorf("todo = %+v\nwant %+v", todo, want)
	}
	if len(unresolved) != 1 || unresolved[0].UID != "ur" {
		t.Errorf("unresolved = %+v, want the dependent of the unwatched resource", unresolved)
	}
	if todo, unresolved := PlanOrphan(nil, patched, testResolve); todo != nil || unresolved != nil {
		t.Errorf("no dependents: %v %v", todo, unresolved)
	}
}
