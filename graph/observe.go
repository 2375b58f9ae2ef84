package graph

import "strings"

// ownSnap is one owner reference of the object being observed, as it was
// before the event, with its state then.
type ownSnap struct {
	e      edge
	before OwnerState
	used   bool // matched by a reference of the new object
}

// inSnap is one reference to the object an event is about, held by another
// object, with its state before the event.
type inSnap struct {
	dep    uint32
	i      int32
	before OwnerState
}

// observeNoop handles an update that changes nothing the collector cares
// about: it stores the new resourceVersion and reports true. It allocates
// nothing for decimal resourceVersions.
func (g *Graph) observeNoop(o *Object) bool {
	id, ok := g.lookup(o.UID)
	if !ok {
		return false
	}
	n := g.node(id)
	if n.flags&fObserved == 0 || !g.sameGC(n, o) {
		return false
	}
	g.setRV(id, n, o.ResourceVersion)
	return true
}

// sameGC reports whether o agrees with observed node n in everything but
// the resourceVersion.
func (g *Graph) sameGC(n *node, o *Object) bool {
	if n.name != o.Name || g.in.nss[n.ns] != o.Namespace {
		return false
	}
	if gv := &g.in.gvks[n.gvk]; gv.apiVersion != o.APIVersion || gv.kind != o.Kind {
		return false
	}
	if n.flags&(fDeleting|fOrphan|fForeground) != gcFlags(o) || n.flags&stampMask != stampFlags(o) {
		return false
	}
	if g.numEdges(n) != len(o.Owners) {
		return false
	}
	for i := range o.Owners {
		r, e := &o.Owners[i], g.edgeAt(n, i)
		if e.name != r.Name || e.bits&(eController|eBlock) != refFlags(r) {
			return false
		}
		if gv := &g.in.gvks[e.gvk()]; gv.apiVersion != r.APIVersion || gv.kind != r.Kind {
			return false
		}
		if !g.uidIs(e.owner, r.UID) {
			return false
		}
	}
	return true
}

func gcFlags(o *Object) uint32 {
	f := uint32(o.Finalizers&finalizerMask) << finShift
	if o.Deleting {
		f |= fDeleting
	}
	return f
}

// stampFlags are the node flags of o.Stamp. The stamp is the caller's record, not a GC state:
// it changes no reference's state.
func stampFlags(o *Object) uint32 {
	return uint32(o.Stamp&finalizerMask) << stampShift
}

func refFlags(r *OwnerRef) uint32 {
	var b uint32
	if r.Controller {
		b |= eController
	}
	if r.BlockOwnerDeletion {
		b |= eBlock
	}
	return b
}

func sameClaim(a, b *OwnerRef) bool {
	return a.UID == b.UID && a.Name == b.Name && a.APIVersion == b.APIVersion && a.Kind == b.Kind
}

// observe folds in an add or update that the no-op path did not absorb.
//
// The effects follow from comparing the state of every affected reference
// before and after the change (see transition): the object's own
// references, and the references other objects hold to it when its identity
// or deletion state changed. Nothing else can change state in one event.
func (g *Graph) observe(o *Object) {
	id, ok := g.lookup(o.UID)
	var n *node
	if ok {
		n = g.node(id)
	} else {
		id, n = g.alloc(o.UID)
	}
	wasObserved := n.flags&fObserved != 0
	wasOrphan, wasForeground := n.waitingOrphan(), n.deletingDependents()
	gvk, ns := g.in.gvk(o.APIVersion, o.Kind), g.in.ns(o.Namespace)
	newFlags := fObserved | gcFlags(o)
	identityChanged := !wasObserved || gvk != n.gvk || ns != n.ns || o.Name != n.name
	stateChanged := identityChanged || n.flags&(fDeleting|fOrphan|fForeground) != newFlags&^fObserved

	// Before: references held by others to this object...
	g.inSnap = g.inSnap[:0]
	if stateChanged {
		g.snapIncoming(id, n)
	}
	// ...and the object's own references.
	g.ownOld = g.ownOld[:0]
	for i, k := 0, g.numEdges(n); i < k; i++ {
		e := g.edgeAt(n, i)
		g.ownOld = append(g.ownOld, ownSnap{e: *e, before: g.edgeState(n.ns, e)})
	}

	// Change the node.
	g.account(n, -1)
	n.gvk, n.ns = gvk, ns
	if n.name != o.Name {
		n.name = strings.Clone(o.Name)
	}
	n.flags = n.flags&(fSideUID|fRVNum|fRVSide|fFresh|fOrphaned) | newFlags | stampFlags(o)
	if n.waitingOrphan() {
		n.flags |= fOrphaned // sticky: see orphans.go
	}
	g.setRV(id, n, o.ResourceVersion)
	g.account(n, 1)
	from := g.buildEdges(n, o.Owners)
	g.setEdges(n, g.newE)
	for i := range g.newE {
		if owner := g.newE[i].owner; !g.oldHasOwner(owner) && firstOwner(g.newE, i) {
			g.addDep(g.node(owner), id)
		}
	}
	if identityChanged {
		g.clearMatchingVerification(id, n)
	}

	// After: effects of the own references...
	for i := range g.newE {
		e := g.edgeAt(n, i)
		after := g.edgeState(n.ns, e)
		if f := from[i]; f >= 0 {
			g.transition(id, n, e, g.ownOld[f].before, after, false, false)
		} else {
			g.transition(id, n, e, 0, after, true, g.verificationPending(n, e))
			if !g.oldHasOwner(e.owner) && g.node(e.owner).waitingOrphan() {
				g.fx.orphan = append(g.fx.orphan, e.owner) // a new dependent to orphan
			}
		}
	}
	// ...of the references others hold to it...
	g.incomingTransitions()
	// ...and of the blocking references it dropped.
	for i := range g.ownOld {
		old := &g.ownOld[i].e
		if old.bits&eBlock != 0 && !blocks(g.newE, old.owner) && g.node(old.owner).deletingDependents() {
			g.fx.recheck = append(g.fx.recheck, old.owner)
		}
	}

	// A reference it dropped may have held its decision back (settle).
	for i := range g.ownOld {
		if !g.ownOld[i].used {
			g.fx.settled = append(g.fx.settled, id)
			break
		}
	}
	// Finally forget the owners it no longer references.
	for i := range g.ownOld {
		owner := g.ownOld[i].e.owner
		if hasOwner(g.newE, owner) || !firstSnapOwner(g.ownOld, i) {
			continue
		}
		g.removeDep(g.node(owner), id)
		g.dropIfUnreferenced(owner)
	}
	// Then the effects of its own deletion state, on its final dependents.
	if n.waitingOrphan() && !wasOrphan {
		g.fx.orphan = append(g.fx.orphan, id)
	}
	if n.deletingDependents() && !wasForeground {
		g.fx.foreground = append(g.fx.foreground, id)
		g.fx.del = append(g.fx.del, g.depIDs(n)...)
	}
	clear(g.ownOld) // do not pin the caller's or dropped strings
	clear(g.newE)
}

// buildEdges turns the new object's references into g.newE. A reference
// that matches an old one (same owner UID and coordinates) keeps its
// verification; a new one starts unverified or inherits the answer already
// known for its virtual owner's identity. Owners never seen before become
// virtual nodes, except retained orphaned owners, whose absent tombstone is
// recreated (orphans.go). from[i] is the index in g.ownOld that g.newE[i]
// continues, or -1.
func (g *Graph) buildEdges(n *node, refs []OwnerRef) []int32 {
	g.newE = g.newE[:0]
	from := g.newFrom[:0]
	for i := range refs {
		r := &refs[i]
		gvk := g.in.gvk(r.APIVersion, r.Kind)
		if k := g.claimIn(g.newE, gvk, r); k >= 0 {
			// Identical references collapse to the first, which keeps the strongest flags:
			// a blocking duplicate still blocks its owner.
			g.newE[k].bits |= refFlags(r)
			continue
		}
		bits := gvk | refFlags(r)
		oid, known := g.lookup(r.UID)
		f := int32(-1)
		if known {
			for k := range g.ownOld {
				s := &g.ownOld[k]
				if !s.used && s.e.owner == oid && s.e.gvk() == gvk && s.e.name == r.Name {
					s.used = true
					f = int32(k)
					break
				}
			}
		}
		if f >= 0 {
			e := g.ownOld[f].e
			e.bits = e.bits&eVerMask | bits
			g.newE = append(g.newE, e)
		} else {
			var on *node
			if known {
				on = g.node(oid)
			} else {
				oid, on = g.newOwner(r, gvk, n.ns)
			}
			name := on.name
			if name != r.Name {
				name = strings.Clone(r.Name)
			}
			g.newE = append(g.newE, edge{name: name, owner: oid, bits: bits | g.inherit(n, on, gvk, name)})
		}
		from = append(from, f)
	}
	g.newFrom = from
	return from
}

// claimIn returns the index of the edge in es that makes the same claim as r (whose interned
// apiVersion and kind is gvk), or -1.
func (g *Graph) claimIn(es []edge, gvk uint32, r *OwnerRef) int {
	for k := range es {
		if e := &es[k]; e.gvk() == gvk && e.name == r.Name && g.uidIs(e.owner, r.UID) {
			return k
		}
	}
	return -1
}

func (g *Graph) oldHasOwner(owner uint32) bool {
	for i := range g.ownOld {
		if g.ownOld[i].e.owner == owner {
			return true
		}
	}
	return false
}

func hasOwner(es []edge, owner uint32) bool {
	for i := range es {
		if es[i].owner == owner {
			return true
		}
	}
	return false
}

func blocks(es []edge, owner uint32) bool {
	for i := range es {
		if es[i].owner == owner && es[i].bits&eBlock != 0 {
			return true
		}
	}
	return false
}

func firstOwner(es []edge, i int) bool { return !hasOwner(es[:i], es[i].owner) }

func firstSnapOwner(s []ownSnap, i int) bool {
	for j := range s[:i] {
		if s[j].e.owner == s[i].e.owner {
			return false
		}
	}
	return true
}

// remove folds in a deletion. An object that others still reference stays
// as an absent tombstone: its absence is authoritative for all of them. A
// virtual node deleted this way takes the coordinates the event reports. An
// orphan-deleted object keeps fOrphaned as a tombstone, or is remembered in
// the FIFO of retained orphans when released at once.
func (g *Graph) remove(r *Ref) {
	id, ok := g.lookup(r.UID)
	if !ok {
		return
	}
	n := g.node(id)
	if n.flags&fAbsent != 0 {
		return
	}
	g.ownOld = g.ownOld[:0]
	for i, k := 0, g.numEdges(n); i < k; i++ {
		e := g.edgeAt(n, i)
		g.ownOld = append(g.ownOld, ownSnap{e: *e})
		if e.owner != id && g.node(e.owner).deletingDependents() {
			g.fx.recheck = append(g.fx.recheck, e.owner)
		}
	}
	g.snapIncoming(id, n)
	for _, d := range g.depIDs(n) {
		if d != id {
			g.fx.del = append(g.fx.del, d)
		}
	}
	g.setEdges(n, nil)
	for i := range g.ownOld {
		owner := g.ownOld[i].e.owner
		if !firstSnapOwner(g.ownOld, i) {
			continue
		}
		g.removeDep(g.node(owner), id)
		if owner != id {
			g.dropIfUnreferenced(owner)
		}
	}
	if n.deps == 0 {
		g.release(id)
		return
	}
	g.account(n, -1)
	if n.flags&fVirtual != 0 {
		n.gvk, n.ns = g.in.gvk(r.APIVersion, r.Kind), g.in.ns(r.Namespace)
		if n.name != r.Name {
			n.name = strings.Clone(r.Name)
		}
	}
	n.flags = n.flags&(fSideUID|fRVNum|fRVSide|fFresh|fOrphaned) | fAbsent
	g.account(n, 1)
	g.incomingTransitions()
	clear(g.ownOld)
}

// snapIncoming records the state of every reference other objects hold to
// node id, for incomingTransitions. Those references do not change during
// the event, so (dep, i) still names the same reference afterwards.
func (g *Graph) snapIncoming(id uint32, n *node) {
	g.inSnap = g.inSnap[:0]
	for _, d := range g.depIDs(n) {
		if d == id {
			continue // a self-reference is one of the object's own
		}
		dn := g.node(d)
		for i, k := 0, g.numEdges(dn); i < k; i++ {
			if e := g.edgeAt(dn, i); e.owner == id {
				g.inSnap = append(g.inSnap, inSnap{dep: d, i: int32(i), before: g.edgeState(dn.ns, e)})
			}
		}
	}
}

// incomingTransitions records the effects of the references snapIncoming
// saw changing state.
func (g *Graph) incomingTransitions() {
	for _, s := range g.inSnap {
		dn := g.node(s.dep)
		e := g.edgeAt(dn, int(s.i))
		g.transition(s.dep, dn, e, s.before, g.edgeState(dn.ns, e), false, false)
	}
}
