package graph

import (
	"fmt"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/types"
)

// checkInvariants verifies the invariants listed in doc.go against the
// graph's internals. It returns the first violation found.
func checkInvariants(g *Graph) error {
	live := 0
	var observed, virtual, absent, orphan, foreground int
	perGVK := make(map[uint32]int)
	freeSet := make(map[uint32]bool, len(g.free))
	for _, id := range g.free {
		if freeSet[id] {
			return fmt.Errorf("id %d freed twice", id)
		}
		freeSet[id] = true
	}
	for id := uint32(1); id <= g.top; id++ {
		n := g.node(id)
		if freeSet[id] {
			if *n != (node{}) {
				return fmt.Errorf("free id %d is not zeroed: %+v", id, *n)
			}
			continue
		}
		live++
		uid := g.uidOf(id)
		if got, ok := g.lookup(uid); !ok || got != id {
			return fmt.Errorf("invariant 1: node %d (%s) not indexed by its UID (got %d, %v)", id, uid, got, ok)
		}
		if n.flags&fFresh != 0 {
			return fmt.Errorf("node %s still marked fresh after Apply", uid)
		}
		kind := n.flags & kindMask
		switch kind {
		case fObserved:
			observed++
			perGVK[n.gvk]++
			if n.flags&fDeleting != 0 && n.flags&fOrphan != 0 {
				orphan++
			}
			if n.flags&fDeleting != 0 && n.flags&fForeground != 0 {
				foreground++
			}
		case fVirtual, fAbsent:
			if kind == fVirtual {
				virtual++
			} else {
				absent++
			}
			if g.numEdges(n) != 0 || n.flags&(fDeleting|fOrphan|fForeground) != 0 {
				return fmt.Errorf("invariant 2: non-observed node %s has owners or deletion state", uid)
			}
			if len(g.depIDs(n)) == 0 {
				return fmt.Errorf("invariant 4: virtual/absent node %s has no dependents", uid)
			}
		default:
			return fmt.Errorf("invariant 1: node %s has kind flags %b", uid, kind)
		}
		if kind != fVirtual && n.flags&idMask != 0 {
			return fmt.Errorf("node %s keeps identity verification but is not virtual", uid)
		}
		if kind == fVirtual && n.flags&(fRVNum|fRVSide) != 0 {
			return fmt.Errorf("invariant 2: virtual node %s has a resourceVersion", uid)
		}
		if n.waitingOrphan() && n.flags&fOrphaned == 0 {
			return fmt.Errorf("invariant 2: node %s is being deleted with the orphan finalizer but not marked orphaned", uid)
		}
		if n.more != 0 && len(g.more[n.more-1]) == 0 {
			return fmt.Errorf("node %s has an empty overflow list", uid)
		}
		// Invariant 3, forward: each reference has its reverse.
		for i, k := 0, g.numEdges(n); i < k; i++ {
			e := g.edgeAt(n, i)
			if e.owner == 0 || e.owner > g.top || freeSet[e.owner] {
				return fmt.Errorf("invariant 3: %s references freed or unknown node %d", uid, e.owner)
			}
			if !containsID(g.depIDs(g.node(e.owner)), id) {
				return fmt.Errorf("invariant 3: %s references %s but is not among its dependents", uid, g.uidOf(e.owner))
			}
			o := g.node(e.owner)
			if o.flags&fObserved != 0 && e.gvk() == o.gvk && e.name == o.name && e.bits&eVerMask != 0 {
				return fmt.Errorf("invariant 5: reference %s -> %s agrees with the observed owner but carries a verification", uid, g.uidOf(e.owner))
			}
			if e.bits&eVerMask == eVerMask {
				return fmt.Errorf("reference %s -> %s is verified both present and absent", uid, g.uidOf(e.owner))
			}
		}
		// Invariant 3, backward.
		ids := g.depIDs(n)
		seen := make(map[uint32]bool, len(ids))
		for _, d := range ids {
			if seen[d] {
				return fmt.Errorf("invariant 3: %s lists dependent %d twice", uid, d)
			}
			seen[d] = true
			if d == 0 || d > g.top || freeSet[d] {
				return fmt.Errorf("invariant 3: %s lists freed dependent %d", uid, d)
			}
			dn := g.node(d)
			if dn.flags&fObserved == 0 {
				return fmt.Errorf("invariant 3: %s lists a non-observed dependent %s", uid, g.uidOf(d))
			}
			if !g.hasEdgeTo(dn, id) {
				return fmt.Errorf("invariant 3: %s lists dependent %s that does not reference it", uid, g.uidOf(d))
			}
		}
		if n.deps != 0 {
			l := &g.deps[n.deps-1]
			if l.pos != nil {
				if len(l.pos) != len(l.ids) {
					return fmt.Errorf("dependents index of %s has %d entries for %d dependents", uid, len(l.pos), len(l.ids))
				}
				for i, d := range l.ids {
					if l.pos[d] != int32(i) {
						return fmt.Errorf("dependents index of %s is stale for %d", uid, d)
					}
				}
			}
		}
	}
	if live != len(g.byUID)+len(g.bySideUID) || len(g.bySideUID) != len(g.sideUID) {
		return fmt.Errorf("invariant 1: %d live nodes, index holds %d+%d", live, len(g.byUID), len(g.bySideUID))
	}
	if observed != g.nObserved || virtual != g.nVirtual || absent != g.nAbsent ||
		orphan != g.nOrphan || foreground != g.nForeground {
		return fmt.Errorf("invariant 6: counters %d/%d/%d/%d/%d, recount %d/%d/%d/%d/%d",
			g.nObserved, g.nVirtual, g.nAbsent, g.nOrphan, g.nForeground,
			observed, virtual, absent, orphan, foreground)
	}
	for i := range g.in.gvks {
		if g.in.gvks[i].observed != perGVK[uint32(i)] {
			return fmt.Errorf("invariant 6: %v counts %d observed, recount %d", g.in.gvks[i].gvkKey, g.in.gvks[i].observed, perGVK[uint32(i)])
		}
	}
	usedDeps, usedMore := 0, 0
	for i := range g.deps {
		if len(g.deps[i].ids) > 0 {
			usedDeps++
		}
	}
	for i := range g.more {
		if len(g.more[i]) > 0 {
			usedMore++
		}
	}
	if usedDeps+len(g.freeDeps) != len(g.deps) || usedMore+len(g.freeMore) != len(g.more) {
		return fmt.Errorf("side tables leak: deps %d used + %d free of %d; more %d used + %d free of %d",
			usedDeps, len(g.freeDeps), len(g.deps), usedMore, len(g.freeMore), len(g.more))
	}
	if err := checkRetained(g); err != nil {
		return err
	}
	if len(g.fx.del)+len(g.fx.orphan)+len(g.fx.foreground)+len(g.fx.recheck)+len(g.fx.verify)+len(g.fx.invalid) != 0 {
		return fmt.Errorf("effects left over after Apply")
	}
	return nil
}

// checkRetained verifies invariant 7: the FIFO of retained orphans is
// within its bound, indexed exactly, and disjoint from the node index.
func checkRetained(g *Graph) error {
	f := &g.retained
	if f.max <= 0 || len(f.ring) > f.max || cap(f.ring) > f.max {
		return fmt.Errorf("invariant 7: FIFO of %d slots (capacity %d) for a bound of %d", len(f.ring), cap(f.ring), f.max)
	}
	if f.head < 0 || (len(f.ring) < f.max && f.head != 0) || (len(f.ring) == f.max && f.head >= f.max) {
		return fmt.Errorf("invariant 7: FIFO head %d with %d of %d slots", f.head, len(f.ring), f.max)
	}
	live := 0
	for slot := range f.ring {
		r := &f.ring[slot]
		if r.kind == rHole {
			if *r != (retainedOrphan{}) {
				return fmt.Errorf("invariant 7: hole %d is not zeroed: %+v", slot, *r)
			}
			continue
		}
		live++
		uid := r.uidString()
		var at uint32
		var ok bool
		switch r.kind {
		case rCanon:
			at, ok = f.byUID[r.uid]
			if r.side != "" {
				return fmt.Errorf("invariant 7: compact entry %s keeps a side UID", uid)
			}
		case rSide:
			at, ok = f.bySide[r.side]
			if _, canon := parseUID(uid); canon {
				return fmt.Errorf("invariant 7: canonical UID %s kept as a side UID", uid)
			}
		default:
			return fmt.Errorf("invariant 7: slot %d has kind %d", slot, r.kind)
		}
		if !ok || at != uint32(slot) {
			return fmt.Errorf("invariant 7: retained %s in slot %d is indexed at %d (%v)", uid, slot, at, ok)
		}
		if _, ok := g.lookup(uid); ok {
			return fmt.Errorf("invariant 7: retained %s is also a node", uid)
		}
		if int(r.gvk) >= len(g.in.gvks) || int(r.ns) >= len(g.in.nss) {
			return fmt.Errorf("invariant 7: retained %s has unknown interned ids %d/%d", uid, r.gvk, r.ns)
		}
	}
	if live != f.live || live != len(f.byUID)+len(f.bySide) {
		return fmt.Errorf("invariant 7: %d retained entries, counter %d, index %d+%d", live, f.live, len(f.byUID), len(f.bySide))
	}
	return nil
}

// retainedRefs lists the slots of the FIFO of retained orphans, oldest
// first, a hole as a Ref whose UID is holeUID.
func retainedRefs(g *Graph) []Ref {
	f := &g.retained
	out := make([]Ref, 0, len(f.ring))
	for i := range f.ring {
		r := &f.ring[(f.head+i)%len(f.ring)]
		if r.kind == rHole {
			out = append(out, Ref{UID: holeUID})
			continue
		}
		gv := &g.in.gvks[r.gvk]
		out = append(out, Ref{APIVersion: gv.apiVersion, Kind: gv.kind, Namespace: g.in.nss[r.ns], Name: r.name, UID: r.uidString()})
	}
	return out
}

const holeUID types.UID = "<hole>"

func (r *retainedOrphan) uidString() types.UID {
	if r.kind == rSide {
		return types.UID(r.side)
	}
	return r.uid.uid()
}

func containsID(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestNodeSize(t *testing.T) {
	// The memory budget (doc.go, BenchmarkGraphBuild) depends on this.
	if s := unsafe.Sizeof(node{}); s > 88 {
		t.Errorf("node is %d bytes, want at most 88", s)
	}
}

func TestCheckInvariantsCatchesCorruption(t *testing.T) {
	// The checker must be able to fail, or the scenario tests prove nothing.
	build := func() (*Graph, uint32) {
		g := New()
		g.Apply(observed(obj(pod1, owner(rs1))))
		id, _ := g.lookup(rs1.UID)
		return g, id
	}
	corruptions := map[string]func(g *Graph, rsID uint32){
		"missing reverse edge": func(g *Graph, rsID uint32) { g.dropDepList(g.node(rsID)) },
		"observed marked virtual": func(g *Graph, rsID uint32) {
			pid, _ := g.lookup(pod1.UID)
			g.node(pid).flags |= fVirtual
		},
		"counter drift":                  func(g *Graph, _ uint32) { g.nVirtual++ },
		"virtual with a resourceVersion": func(g *Graph, rsID uint32) { g.node(rsID).flags |= fRVNum },
		"retained UID also a node": func(g *Graph, _ uint32) {
			pid, _ := g.lookup(pod1.UID)
			g.retained.push(g, pid, g.node(pid))
		},
		"retained counter drift": func(g *Graph, _ uint32) { g.retained.live++ },
		"virtual without dependents": func(g *Graph, rsID uint32) {
			pid, _ := g.lookup(pod1.UID)
			g.setEdges(g.node(pid), nil)
		},
	}
	for name, corrupt := range corruptions {
		g, rsID := build()
		if err := checkInvariants(g); err != nil {
			t.Fatalf("%s: clean graph fails: %v", name, err)
		}
		corrupt(g, rsID)
		if err := checkInvariants(g); err == nil {
			t.Errorf("%s: corruption not detected", name)
		}
	}
}
