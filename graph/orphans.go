package graph

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Orphan-deleted owners.
//
// An owner observed being deleted with the orphan finalizer carries
// fOrphaned from then on: later observations keep it (deletion is a one-way
// trip), and so does its absent tombstone once it is observed deleted;
// references to such a tombstone are OwnerOrphaned. If a client switched the
// deletion to another policy after the graph saw the orphan finalizer, the
// flag stays: cascade then keeps dependents it could have deleted, never the
// reverse.
//
// A tombstone is released with its last dependent, which for an orphaned
// owner is often at once: the orphaner removed every known reference before
// the owner went. A dependent created just before the owner's deletion may
// still reach the graph later (the watch latency of its own resource),
// referencing the owner; it must see OwnerOrphaned, not a virtual owner that
// a live check would find absent. So a released node that carries fOrphaned
// is remembered in a FIFO of the last Options.RetainedOrphans releases: its
// UID and what judging a reference to it needs (interned apiVersion/kind and
// namespace, which are never freed, and the name). A reference to a UID in
// the FIFO recreates the absent, orphaned tombstone at those coordinates
// instead of a virtual node: no live check, and the namespace rules apply as
// to any tombstone (a cluster-scoped owner serves every namespace).
//
// The FIFO and the UID index are disjoint: whenever a node is created for a
// UID in the FIFO (a recreated tombstone, or a stale observation of the
// object, which keeps the flag too) the entry leaves the FIFO and leaves a
// hole; the node re-enters the FIFO as the newest when it is released again.
// Holes are overwritten in turn like any entry, so the FIFO remembers at
// most Options.RetainedOrphans owners and its memory is bounded by that
// number of slots.

// retainedOrphan is one slot of the FIFO.
type retainedOrphan struct {
	uid  uidKey // canonical UUID bytes, when kind is rCanon
	side string // the UID, when kind is rSide
	name string
	gvk  uint32
	ns   uint32
	kind uint8
}

const (
	rHole  uint8 = iota // an empty slot (taken back by a node)
	rCanon              // uid holds the UID
	rSide               // side holds the UID
)

// retainedFIFO is a ring of the last max released orphaned owners.
type retainedFIFO struct {
	ring []retainedOrphan // grows up to max slots, then wraps
	head int              // once the ring is full: the oldest slot, overwritten next
	max  int
	live int // slots that are not holes

	byUID  map[uidKey]uint32 // slot of each canonical UID
	bySide map[string]uint32 // slot of every other UID spelling
}

// push remembers node id, which carries fOrphaned and is being released,
// as the newest entry, forgetting the oldest slot if the FIFO is full.
func (f *retainedFIFO) push(g *Graph, id uint32, n *node) {
	r := retainedOrphan{name: n.name, gvk: n.gvk, ns: n.ns}
	if n.flags&fSideUID != 0 {
		r.side, r.kind = g.sideUID[id], rSide
	} else {
		r.uid, r.kind = n.uid, rCanon
	}
	f.pushEntry(r)
}

// pushEntry adds r, whose UID must not be in the FIFO, as the newest entry.
func (f *retainedFIFO) pushEntry(r retainedOrphan) {
	var slot int
	if len(f.ring) < f.max {
		if len(f.ring) == cap(f.ring) {
			// Grow by doubling, never past max.
			grown := make([]retainedOrphan, len(f.ring), min(max(2*cap(f.ring), 16), f.max))
			copy(grown, f.ring)
			f.ring = grown
		}
		slot = len(f.ring)
		f.ring = append(f.ring, r)
	} else {
		slot = f.head
		f.forget(slot)
		f.ring[slot] = r
		f.head = (f.head + 1) % f.max
	}
	if r.kind == rSide {
		if f.bySide == nil {
			f.bySide = make(map[string]uint32)
		}
		f.bySide[r.side] = uint32(slot)
	} else {
		if f.byUID == nil {
			f.byUID = make(map[uidKey]uint32)
		}
		f.byUID[r.uid] = uint32(slot)
	}
	f.live++
}

// has reports whether uid is in the FIFO.
func (f *retainedFIFO) has(uid types.UID) bool {
	if k, canon := parseUID(uid); canon {
		_, ok := f.byUID[k]
		return ok
	}
	_, ok := f.bySide[string(uid)]
	return ok
}

// recordedOrphan folds in EventOrphanRecorded: what another process saw of
// owner r (being deleted with the orphan finalizer) becomes what this graph
// knows. A node for the UID gets fOrphaned, which changes only references
// to an absent tombstone (Absent → Orphaned) or, once verified absent, to a
// virtual node; an observed owner keeps its observed state and, deleted,
// leaves an orphaned tombstone. Without a node the owner joins the FIFO at
// r's coordinates, unless it is there already.
func (g *Graph) recordedOrphan(r *Ref) {
	if r.UID == "" {
		return
	}
	id, ok := g.lookup(r.UID)
	if !ok {
		if g.retained.has(r.UID) {
			return
		}
		e := retainedOrphan{name: strings.Clone(r.Name), gvk: g.in.gvk(r.APIVersion, r.Kind), ns: g.in.ns(r.Namespace)}
		if k, canon := parseUID(r.UID); canon {
			e.uid, e.kind = k, rCanon
		} else {
			e.side, e.kind = strings.Clone(string(r.UID)), rSide
		}
		g.retained.pushEntry(e)
		return
	}
	n := g.node(id)
	if n.flags&fOrphaned != 0 {
		return
	}
	g.snapIncoming(id, n)
	n.flags |= fOrphaned
	g.incomingTransitions()
}

// take removes uid from the FIFO, leaving a hole, and returns what was
// remembered of it.
func (f *retainedFIFO) take(uid types.UID) (retainedOrphan, bool) {
	var slot uint32
	var ok bool
	if k, canon := parseUID(uid); canon {
		slot, ok = f.byUID[k]
	} else {
		slot, ok = f.bySide[string(uid)]
	}
	if !ok {
		return retainedOrphan{}, false
	}
	r := f.ring[slot]
	f.forget(int(slot))
	f.ring[slot] = retainedOrphan{}
	return r, true
}

// forget unindexes the entry in slot, if any.
func (f *retainedFIFO) forget(slot int) {
	r := &f.ring[slot]
	switch r.kind {
	case rCanon:
		delete(f.byUID, r.uid)
	case rSide:
		delete(f.bySide, r.side)
	default:
		return
	}
	f.live--
}
