package graph

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Objects of a resource that is no longer watched (EventUnwatched).
//
// When the caller stops watching a resource (its CRD was deleted, its
// preferred version changed, its group went away), what the graph observed
// of it goes stale: no event will tell it when those objects change or go.
// Left observed, they would be ghosts: solid owners keeping their
// dependents forever, blocking dependents holding foreground owners
// forever. They are not taken for deleted either (nothing said so: a live
// object may simply be served at another version now). So each observed
// object of that apiVersion and kind:
//
//   - loses its own owner references: it is no longer a dependent anyone
//     knows of. Its owners' dependents lists drop it (virtual and absent
//     owners nobody else references are released), and an owner waiting in
//     foreground deletion is asked to check again (RecheckOwner);
//   - becomes a virtual node if other objects still reference it, at the
//     coordinates it was observed at, with no verification: every
//     reference to it is Unknown and each distinct claim gets a live check
//     (VerifyOwner). Its identity is checked only if a reference makes
//     that claim (no GET that nobody needs): until one does, the node is
//     marked unchecked, so that the first reference that makes it later
//     asks for the check instead of waiting for one that never comes. It
//     keeps the orphaned mark if it was observed being deleted with the
//     orphan finalizer: a claim on it verified absent is then
//     OwnerOrphaned, never a reason to delete;
//   - is released otherwise (an orphaned one goes to the FIFO of retained
//     orphans, as any released orphaned owner).
//
// Objects that still exist are observed again when the caller lists the
// resource at its new version: observation decides from then on, as for
// any virtual node that gets observed. Absent tombstones are kept: their
// absence was observed and stays authoritative.
//
// Nodes are handled in UID order, first their references, then their
// kind, so that the outcome (and the FIFO's order) does not depend on
// where nodes sit in memory. It scans the whole graph: O(nodes), and a
// resource stops being watched rarely.

// unwatch folds in EventUnwatched for (apiVersion, kind).
func (g *Graph) unwatch(apiVersion, kind string) {
	gvk, ok := g.in.lookupGVK(apiVersion, kind)
	if !ok || g.in.gvks[gvk].observed == 0 {
		return
	}
	type target struct {
		id  uint32
		uid types.UID
	}
	var ts []target
	for id := uint32(1); id <= g.top; id++ {
		if n := g.node(id); n.flags&fObserved != 0 && n.gvk == gvk {
			ts = append(ts, target{id, g.uidOf(id)})
		}
	}
	slices.SortFunc(ts, func(a, b target) int { return strings.Compare(string(a.uid), string(b.uid)) })

	// Every one of them stops being a dependent.
	for _, t := range ts {
		n := g.node(t.id)
		g.ownOld = g.ownOld[:0]
		for i, k := 0, g.numEdges(n); i < k; i++ {
			e := g.edgeAt(n, i)
			g.ownOld = append(g.ownOld, ownSnap{e: *e})
			// An owner of this kind stops being observed too: nothing
			// to check on it.
			if o := g.node(e.owner); o.deletingDependents() && o.gvk != gvk {
				g.fx.recheck = append(g.fx.recheck, e.owner)
			}
		}
		g.setEdges(n, nil)
		for i := range g.ownOld {
			owner := g.ownOld[i].e.owner
			if !firstSnapOwner(g.ownOld, i) {
				continue
			}
			g.removeDep(g.node(owner), t.id)
			if owner != t.id {
				g.dropIfUnreferenced(owner)
			}
		}
		clear(g.ownOld)
	}
	// Then each is released or becomes virtual.
	for _, t := range ts {
		n := g.node(t.id)
		if n.deps == 0 {
			g.release(t.id)
			continue
		}
		g.snapIncoming(t.id, n)
		g.account(n, -1)
		if n.flags&fRVSide != 0 {
			delete(g.sideRV, t.id)
		}
		n.rv = 0
		n.flags = n.flags&(fSideUID|fFresh|fOrphaned) | fVirtual | fIDUnchecked
		g.account(n, 1)
		for _, d := range g.depIDs(n) {
			dn := g.node(d)
			for i, k := 0, g.numEdges(dn); i < k; i++ {
				if e := g.edgeAt(dn, i); e.owner == t.id {
					e.bits &^= eVerMask
				}
			}
		}
		g.incomingTransitions() // a reference making the identity claim clears fIDUnchecked
	}
}
