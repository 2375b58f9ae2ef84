package graph

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// The benchmark shape: trees two levels deep (root -> 10 children -> 10
// grandchildren each, so 111 objects per tree), 20 namespaces (a tree lives
// in one), 50 kinds spread over 10 API groups (roots use kinds 0-4, children
// 5-19, grandchildren 20-49), random v4 UUIDs, decimal resourceVersions,
// names of about 25 characters. Events arrive kind by kind with the kinds
// in a random order, as an initial list of one informer per resource does,
// so many owners are referenced before they are observed (virtual nodes).
// Children are controlled, blocking references, like ReplicaSet -> Pod.

const (
	benchFanout     = 10
	benchNamespaces = 20
	benchKinds      = 50
)

func benchKind(level, i int) (apiVersion, kind string, k int) {
	switch level {
	case 0:
		k = i % 5
	case 1:
		k = 5 + i%15
	default:
		k = 20 + i%30
	}
	return fmt.Sprintf("group%d.example.com/v1", k%10), fmt.Sprintf("Kind%d", k), k
}

func randomUUID(r *rand.Rand) types.UID {
	var k uidKey
	for i := range k {
		k[i] = byte(r.Uint32())
	}
	k[6] = k[6]&0x0f | 0x40
	k[8] = k[8]&0x3f | 0x80
	return k.uid()
}

// benchObjects returns n objects of the benchmark shape, in arrival order.
func benchObjects(n int) []Object {
	r := rand.New(rand.NewPCG(1, 2))
	objs := make([]Object, 0, n)
	byKind := make([][]int, benchKinds)
	add := func(level, i int, ns string, parent *Object) *Object {
		av, kind, k := benchKind(level, i)
		o := Object{Ref: Ref{
			APIVersion: av, Kind: kind, Namespace: ns,
			Name: fmt.Sprintf("%s-%07d-%05x", []string{"root", "child", "leaf"}[level], len(objs), r.IntN(1<<20)),
			UID:  randomUUID(r),
		}, ResourceVersion: strconv.Itoa(1000000 + len(objs))}
		if parent != nil {
			o.Owners = []OwnerRef{{APIVersion: parent.APIVersion, Kind: parent.Kind, Name: parent.Name, UID: parent.UID,
				Controller: true, BlockOwnerDeletion: true}}
		}
		byKind[k] = append(byKind[k], len(objs))
		objs = append(objs, o)
		return &objs[len(objs)-1]
	}
	for tree := 0; len(objs) < n; tree++ {
		ns := fmt.Sprintf("namespace-%02d", tree%benchNamespaces)
		root := *add(0, tree, ns, nil)
		for c := 0; c < benchFanout && len(objs) < n; c++ {
			child := *add(1, tree*benchFanout+c, ns, &root)
			for l := 0; l < benchFanout && len(objs) < n; l++ {
				add(2, (tree*benchFanout+c)*benchFanout+l, ns, &child)
			}
		}
	}
	out := make([]Object, 0, n)
	for _, k := range r.Perm(benchKinds) {
		for _, i := range byKind[k] {
			out = append(out, objs[i])
		}
	}
	return out
}

func benchEvents(objs []Object) []Event {
	evs := make([]Event, len(objs))
	for i := range objs {
		evs[i] = Event{Type: EventObserved, Object: objs[i]}
	}
	return evs
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkGraphBuild adds every object of the shape to an empty graph.
// events/s is the add rate; B/object is the live heap the finished graph
// holds (after runtime.GC, inputs excluded) divided by the objects.
func BenchmarkGraphBuild(b *testing.B) {
	for _, n := range []int{1000, 100000, 1000000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			evs := benchEvents(benchObjects(n))
			b.ReportAllocs()
			var g *Graph
			base := liveHeap()
			b.ResetTimer()
			for range b.N {
				g = New()
				for i := range evs {
					g.Apply(evs[i])
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(liveHeap()-base)/float64(n), "B/object")
			if s := g.Stats(); s.Observed != n || s.Virtual != 0 {
				b.Fatalf("built %+v, want %d observed and no virtual nodes", s, n)
			}
			runtime.KeepAlive(g)
			runtime.KeepAlive(evs)
		})
	}
}

var noopFixture = sync.OnceValues(func() (*Graph, []Event) {
	objs := benchObjects(100000)
	g := New()
	for i := range objs {
		g.Apply(Event{Type: EventObserved, Object: objs[i]})
	}
	// Two updates per object that differ only in resourceVersion, so every
	// event stores a new one.
	evs := make([]Event, 0, 2*len(objs))
	for _, d := range []int{1, 2} {
		for _, o := range objs {
			o.ResourceVersion = strconv.Itoa(2000000*d + len(evs))
			evs = append(evs, Event{Type: EventObserved, Object: o})
		}
	}
	return g, evs
})

// BenchmarkGraphNoopUpdate applies updates that change nothing the
// collector cares about (a new resourceVersion) to a graph of 100,000
// objects of the benchmark shape, in arrival order.
func BenchmarkGraphNoopUpdate(b *testing.B) {
	g, evs := noopFixture()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if fx := g.Apply(evs[i%len(evs)]); !fx.IsZero() {
			b.Fatalf("no-op update returned %+v", fx)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkGraphDeletingOwners measures the full scan behind DeletingOwners
// on a graph of 100,000 objects.
func BenchmarkGraphDeletingOwners(b *testing.B) {
	g, _ := noopFixture()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		g.DeletingOwners()
	}
}
