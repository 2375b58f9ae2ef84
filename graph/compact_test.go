package graph

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// churn adds, in each of n namespaces, an owner and a dependent (of a kind of its own for the
// first kinds namespaces), then deletes them all.
func churn(g *Graph, n, kinds int) {
	for i := range n {
		ns := fmt.Sprintf("churn-%d", i)
		kind := "ConfigMap"
		if i < kinds {
			kind = fmt.Sprintf("Churn%d", i)
		}
		own := makeRef("example.com/v1", kind, ns, "owner", fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i+1))
		dep := makeRef("v1", "Secret", ns, "dep", fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i+2))
		g.Apply(observed(obj(own)))
		g.Apply(observed(obj(dep, owner(own))))
	}
	for i := range n {
		ns := fmt.Sprintf("churn-%d", i)
		g.Apply(deleted(makeRef("v1", "Secret", ns, "dep", fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i+2))))
		g.Apply(deleted(makeRef("example.com/v1", "ConfigMap", ns, "owner", fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i+1))))
	}
}

// baseGraph holds what stays: objects in two namespaces, an owner reference, a virtual owner,
// and a retained orphan whose namespace and kind nothing else uses.
func baseGraph() (*Graph, []types.UID) {
	g := New()
	a := makeRef("apps/v1", "ReplicaSet", "stay", "rs", "u-rs")
	p := makeRef("v1", "Pod", "stay", "p", "u-p")
	v := makeRef("v1", "Pod", "stay2", "v", "u-v")
	orphan := makeRef("example.com/v1", "Retained", "retained-ns", "o", "u-o")
	g.Apply(observed(obj(a)))
	g.Apply(observed(obj(p, owner(a), owner(makeRef("v1", "Node", "", "n", "u-node")))))
	g.Apply(observed(obj(v)))
	g.Apply(observed(deleting(obj(orphan), FinalizerOrphan)))
	g.Apply(deleted(orphan)) // released at once, remembered in the FIFO
	return g, []types.UID{"u-rs", "u-p", "u-v", "u-node"}
}

type nodeSnap struct {
	View   NodeView
	Owners []OwnerView
}

func snapshot(g *Graph, uids []types.UID) map[types.UID]nodeSnap {
	out := map[types.UID]nodeSnap{}
	for _, uid := range uids {
		v, _ := g.Node(uid)
		out[uid] = nodeSnap{v, g.Owners(uid)}
	}
	return out
}

// TestCompactAfterNamespaceChurn: 10,000 namespaces (and 100 kinds) that come and go leave
// nothing interned once compacted; what stays reads the same; freed ids are reused correctly,
// and the retained orphan still recreates its tombstone at its coordinates.
func TestCompactAfterNamespaceChurn(t *testing.T) {
	g, uids := baseGraph()
	base := g.Compact()
	before := snapshot(g, uids)

	churn(g, 10000, 100)
	if err := checkInvariants(g); err != nil {
		t.Fatal(err)
	}
	st := g.Compact()
	if st.Namespaces != base.Namespaces || st.Kinds != base.Kinds {
		t.Errorf("after churn: %d namespaces and %d kinds interned, want the baseline %d and %d", st.Namespaces, st.Kinds, base.Namespaces, base.Kinds)
	}
	// The churn's kinds: its 100 own, example.com/v1 ConfigMap and v1 Secret.
	if st.FreedNamespaces != 10000 || st.FreedKinds != 102 {
		t.Errorf("freed %d namespaces and %d kinds, want 10000 and 102", st.FreedNamespaces, st.FreedKinds)
	}
	if len(g.in.nss) > base.Namespaces+1 || len(g.in.gvks) > base.Kinds+1 {
		t.Errorf("tables not trimmed: %d namespace and %d kind slots", len(g.in.nss), len(g.in.gvks))
	}
	if after := snapshot(g, uids); !reflect.DeepEqual(before, after) {
		t.Errorf("views changed by Compact:\nbefore %+v\nafter  %+v", before, after)
	}
	if err := checkInvariants(g); err != nil {
		t.Fatal(err)
	}

	// Reuse: new namespaces and kinds take freed ids; old objects keep theirs.
	churn(g, 50, 10)
	g.Compact()
	x := makeRef("example.com/v1", "Fresh", "fresh-ns", "x", "u-x")
	g.Apply(observed(obj(x)))
	if v, _ := g.Node("u-x"); v.Namespace != "fresh-ns" || v.Kind != "Fresh" {
		t.Errorf("new node reads %+v", v.Ref)
	}
	if after := snapshot(g, uids); !reflect.DeepEqual(before, after) {
		t.Errorf("views changed after reuse:\nbefore %+v\nafter  %+v", before, after)
	}
	// The retained orphan's namespace and kind were kept for it.
	late := makeRef("v1", "Pod", "retained-ns", "late", "u-late")
	g.Apply(observed(obj(late, owner(makeRef("example.com/v1", "Retained", "retained-ns", "o", "u-o")))))
	if o := g.Owners("u-late"); len(o) != 1 || o[0].State != OwnerOrphaned {
		t.Errorf("late dependent of the retained orphan: %+v, want OwnerOrphaned", o)
	}
	if v, _ := g.Node("u-o"); v.Namespace != "retained-ns" || v.Kind != "Retained" {
		t.Errorf("recreated tombstone reads %+v", v.Ref)
	}
	if err := checkInvariants(g); err != nil {
		t.Fatal(err)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkGraphNamespaceChurn reports the heap a graph holds after 10,000 namespaces came and
// went, compacted, against the same graph before the churn (B-retained is the difference; the
// churn itself peaks at several MiB).
func BenchmarkGraphNamespaceChurn(b *testing.B) {
	var retained, peak float64
	for range b.N {
		g, _ := baseGraph()
		g.Compact()
		base := heapInUse()
		churnAdd(g, 10000)
		peak += float64(heapInUse()) - float64(base)
		churnDelete(g, 10000)
		g.Compact()
		retained += float64(heapInUse()) - float64(base)
		runtime.KeepAlive(g)
	}
	b.ReportMetric(peak/float64(b.N), "B-with-10k-namespaces")
	b.ReportMetric(retained/float64(b.N), "B-retained")
}

func churnAdd(g *Graph, n int) {
	for i := range n {
		ns := fmt.Sprintf("churn-%d", i)
		own := makeRef("v1", "ConfigMap", ns, "owner", fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i+1))
		g.Apply(observed(obj(own)))
		g.Apply(observed(obj(makeRef("v1", "Secret", ns, "dep", fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i+2)), owner(own))))
	}
}

func churnDelete(g *Graph, n int) {
	for i := range n {
		ns := fmt.Sprintf("churn-%d", i)
		g.Apply(deleted(makeRef("v1", "Secret", ns, "dep", fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i+2))))
		g.Apply(deleted(makeRef("v1", "ConfigMap", ns, "owner", fmt.Sprintf("00000000-0000-0000-0000-%012d", 2*i+1))))
	}
}

// BenchmarkGraphCompact is the cost of one Compact on a graph of 100,000 objects (10% owned)
// that has nothing to free: what gc pays once per discovery round, under its write lock.
func BenchmarkGraphCompact(b *testing.B) {
	g := New()
	churnAdd(g, 50000)
	b.ResetTimer()
	for range b.N {
		g.Compact()
	}
}
