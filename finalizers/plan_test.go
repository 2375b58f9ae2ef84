package finalizers

import (
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
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
	widgetsGVR  = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
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
	want := []Dependent{
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

func TestRemainingFinalizers(t *testing.T) {
	tests := []struct {
		name      string
		in        []string
		remove    string
		want      []string
		wantFound bool
	}{
		{name: "only GC finalizer", in: []string{"orphan"}, remove: "orphan", want: []string{}, wantFound: true},
		{name: "others keep their order", in: []string{"a/x", "orphan", "b/y"}, remove: "orphan", want: []string{"a/x", "b/y"}, wantFound: true},
		{name: "repeated entries all go", in: []string{"orphan", "a/x", "orphan"}, remove: "orphan", want: []string{"a/x"}, wantFound: true},
		{name: "the other GC finalizer stays", in: []string{"foregroundDeletion", "orphan"}, remove: "orphan", want: []string{"foregroundDeletion"}, wantFound: true},
		{name: "absent", in: []string{"a/x"}, remove: "orphan", want: []string{"a/x"}, wantFound: false},
		{name: "nil", in: nil, remove: "orphan", want: nil, wantFound: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			got, found := RemainingFinalizers(in, tt.remove)
			if !slices.Equal(got, tt.want) || found != tt.wantFound {
				t.Errorf("got %q, %t; want %q, %t", got, found, tt.want, tt.wantFound)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("input modified: %q", in)
			}
		})
	}
}

func TestPlanFinalizerRemoval(t *testing.T) {
	now := metav1.Now()
	obj := func(uid types.UID, deleting bool, finalizers ...string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: uid, ResourceVersion: "7", Finalizers: finalizers}}
		if deleting {
			m.DeletionTimestamp = &now
		}
		return m
	}
	tests := []struct {
		name      string
		live      *metav1.PartialObjectMetadata
		finalizer string
		want      string // "" means no patch
	}{
		{
			name: "orphan removed, everyone else's kept", live: obj("u", true, "example.com/keep", metav1.FinalizerOrphanDependents),
			finalizer: metav1.FinalizerOrphanDependents, want: `{"metadata":{"resourceVersion":"7","finalizers":["example.com/keep"]}}`,
		},
		{
			name: "last finalizer leaves an empty list", live: obj("u", true, metav1.FinalizerDeleteDependents),
			finalizer: metav1.FinalizerDeleteDependents, want: `{"metadata":{"resourceVersion":"7","finalizers":[]}}`,
		},
		{
			name: "removing foregroundDeletion keeps orphan", live: obj("u", true, metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents),
			finalizer: metav1.FinalizerDeleteDependents, want: `{"metadata":{"resourceVersion":"7","finalizers":["orphan"]}}`,
		},
		{name: "already removed", live: obj("u", true, "example.com/keep"), finalizer: metav1.FinalizerOrphanDependents},
		{name: "another object with the same name is never touched", live: obj("other", true, metav1.FinalizerOrphanDependents), finalizer: metav1.FinalizerOrphanDependents},
		{name: "a live object's GC finalizer (a default policy) is never removed", live: obj("u", false, metav1.FinalizerOrphanDependents), finalizer: metav1.FinalizerOrphanDependents},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			patch, ok := PlanFinalizerRemoval(tt.live, "u", tt.finalizer)
			if ok != (tt.want != "") || string(patch) != tt.want {
				t.Errorf("got %s, %t; want %s", patch, ok, tt.want)
			}
		})
	}
}

func TestPlanForeground(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	period := 30 * time.Second
	tests := []struct {
		name     string
		blocking int
		kickedAt time.Time
		now      time.Time
		want     ForegroundStep
	}{
		{name: "no blocking dependent: remove", blocking: 0, now: t0, want: ForegroundStep{RemoveFinalizer: true}},
		{name: "first sighting counts as a kick (the graph enqueued the dependents)", blocking: 3, now: t0, want: ForegroundStep{KickedAt: t0}},
		{name: "within the period: wait", blocking: 3, kickedAt: t0, now: t0.Add(period - time.Second), want: ForegroundStep{KickedAt: t0}},
		{name: "after the period: kick again", blocking: 3, kickedAt: t0, now: t0.Add(period), want: ForegroundStep{Kick: true, KickedAt: t0.Add(period)}},
		{name: "never remove while one blocks, however long", blocking: 1, kickedAt: t0, now: t0.Add(24 * time.Hour), want: ForegroundStep{Kick: true, KickedAt: t0.Add(24 * time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PlanForeground(tt.blocking, tt.kickedAt, tt.now, period); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
