package graph

import "strings"

// Virtual nodes, claims and their verification.
//
// A reference is a claim: "an object with this UID exists at these
// coordinates (apiVersion, kind, name) in my namespace". The graph keys
// nodes by UID only, as in-tree does, and judges each claim on its own:
//
//   - owner observed, claim agrees with the observed coordinates: the
//     observed state decides (present, being deleted, deleting dependents);
//   - owner observed as a namespaced object in another namespace: invalid
//     for a namespaced dependent (treated as absent, reported), unresolvable
//     for a cluster-scoped one (never collectable, reported);
//   - owner observed, claim disagrees: undecided (OwnerMismatch) until a
//     live check of those exact coordinates answers;
//   - owner never observed, or no longer watched (virtual): undecided
//     (OwnerUnknown) until a live check answers; every distinct claim is
//     checked, not just the first. Verified absent, an owner last observed
//     being deleted with the orphan finalizer is orphaned (unwatch.go);
//   - owner observed deleted (absent tombstone): absent, whatever the claim
//     (the namespace rules above still apply: the tombstone keeps the
//     coordinates it was observed at); orphaned instead if it was observed
//     being deleted with the orphan finalizer (orphans.go).
//
// A virtual node's identity is the first claim that created it, in that
// dependent's namespace (as in-tree). It is verified once when the node is
// created; dependents that later make the same claim in the same namespace
// wait for that answer, and inherit it once it is in.

// newOwner creates the node for an owner UID that a reference names and
// the graph does not hold: a virtual node at the claimed coordinates in the
// dependent's namespace, or, for a retained orphaned owner, its absent
// tombstone at the coordinates it was observed at (alloc restores them).
func (g *Graph) newOwner(r *OwnerRef, gvk, ns uint32) (uint32, *node) {
	id, n := g.alloc(r.UID)
	if n.flags&fOrphaned != 0 {
		n.flags |= fAbsent
	} else {
		n.flags |= fVirtual
		n.gvk, n.ns = gvk, ns
		n.name = strings.Clone(r.Name)
	}
	g.account(n, 1)
	return id, n
}

// inherit returns the verification bits a new reference from dependent d
// to owner o gets: the answer for o's identity claim, if the reference makes
// that claim and the answer applies to d's namespace.
func (g *Graph) inherit(d, o *node, gvk uint32, name string) uint32 {
	if o.flags&fVirtual == 0 || gvk != o.gvk || name != o.name {
		return 0
	}
	if d.ns != o.ns && o.flags&fIDCluster == 0 {
		return 0
	}
	switch {
	case o.flags&fIDPresent != 0:
		return eVerPresent
	case o.flags&fIDAbsent != 0:
		return eVerAbsent
	}
	return 0
}

// verificationPending reports whether a new reference e from d makes a
// claim whose check is already under way: the identity claim of a virtual
// node that existed before this event and has no answer yet, unless no
// check of it was ever asked for (fIDUnchecked). No second VerifyOwner is
// issued for it.
func (g *Graph) verificationPending(d *node, e *edge) bool {
	o := g.node(e.owner)
	if o.flags&(fVirtual|fFresh|fIDPresent|fIDAbsent|fIDUnchecked) != fVirtual ||
		e.gvk() != o.gvk || e.name != o.name || d.ns != o.ns {
		return false
	}
	// The check is under way only while another reference still makes the claim undecided:
	// the caller may drop a check nobody needs any more (every reference making it went), and
	// the next reference to make it must then ask again.
	for _, dep := range g.depIDs(o) {
		dn := g.node(dep)
		if dn == d || dn.ns != o.ns {
			continue
		}
		for i, k := 0, g.numEdges(dn); i < k; i++ {
			if x := g.edgeAt(dn, i); x.owner == e.owner && x.gvk() == o.gvk && x.name == o.name && g.edgeState(dn.ns, x).Undecided() {
				return true
			}
		}
	}
	return false
}

// clearMatchingVerification drops the verification of references that agree
// with the coordinates owner n was just observed at: observation decides
// those from now on.
func (g *Graph) clearMatchingVerification(id uint32, n *node) {
	for _, d := range g.depIDs(n) {
		dn := g.node(d)
		for i, k := 0, g.numEdges(dn); i < k; i++ {
			if e := g.edgeAt(dn, i); e.owner == id && e.gvk() == n.gvk && e.name == n.name {
				e.bits &^= eVerMask
			}
		}
	}
}

// edgeState judges reference e held by a dependent in namespace depNS.
func (g *Graph) edgeState(depNS uint32, e *edge) OwnerState {
	o := g.node(e.owner)
	if o.flags&fVirtual == 0 && o.ns != 0 && o.ns != depNS {
		// Observed (now or before its deletion) as a namespaced object in
		// another namespace.
		if depNS == 0 {
			return OwnerUnresolvable
		}
		return OwnerInvalidNamespace
	}
	switch o.flags & kindMask {
	case fAbsent:
		if o.flags&fOrphaned != 0 {
			return OwnerOrphaned
		}
		return OwnerAbsent
	case fObserved:
		if e.gvk() == o.gvk && e.name == o.name {
			return observedState(o)
		}
		switch e.bits & eVerMask {
		case eVerPresent:
			return observedState(o)
		case eVerAbsent:
			return OwnerAbsent
		}
		return OwnerMismatch
	}
	switch e.bits & eVerMask {
	case eVerPresent:
		return OwnerVerifiedPresent
	case eVerAbsent:
		if o.flags&fOrphaned != 0 {
			return OwnerOrphaned // no longer watched, last observed orphaning (unwatch.go)
		}
		return OwnerAbsent
	}
	return OwnerUnknown
}

func invalidNS(s OwnerState) bool { return s == OwnerInvalidNamespace || s == OwnerUnresolvable }

func observedState(o *node) OwnerState {
	switch {
	case o.flags&fDeleting == 0:
		return OwnerPresent
	case o.flags&fForeground != 0:
		return OwnerDeletingDependents
	}
	return OwnerBeingDeleted
}

// transition records the effects of reference e of dependent dep going from
// before to after (isNew: the reference did not exist before the event).
//
//   - entering Absent, InvalidNamespace, Orphaned or DeletingDependents:
//     the dependent is worth re-deciding (AttemptDelete);
//   - entering InvalidNamespace or Unresolvable: report it;
//   - entering an undecided state: check the claim (VerifyOwner), unless
//     the same check is already pending;
//   - leaving a state that holds the decision back (undecided or
//     unresolvable) for one that does not: see settle.
func (g *Graph) transition(dep uint32, dn *node, e *edge, before, after OwnerState, isNew, pending bool) {
	if !isNew && before == after {
		return
	}
	switch {
	case actionable(after):
		g.fx.del = append(g.fx.del, dep)
	case !isNew && holds(before) && !holds(after):
		g.fx.settled = append(g.fx.settled, dep) // see settle
	}
	if invalidNS(after) && (isNew || !invalidNS(before)) {
		g.fx.invalid = append(g.fx.invalid, InvalidRef{Dependent: g.ref(dep, dn), Owner: g.ownerRef(e)})
	}
	if after.Undecided() && (isNew || !before.Undecided()) && !pending {
		g.fx.verify = append(g.fx.verify, g.claim(dn, e))
		if o := g.node(e.owner); o.flags&fIDUnchecked != 0 && e.gvk() == o.gvk && e.name == o.name && dn.ns == o.ns {
			o.flags &^= fIDUnchecked // its identity is being checked now
		}
	}
}

// verify folds in the answer to a VerifyOwner: the live check of claim c.
// It applies to every reference making that claim from c's namespace (from
// every namespace when c.Namespace is ""). Observation beats a live check:
// references that agree with an observed owner, and every reference to an
// owner observed deleted, ignore it.
func (g *Graph) verify(c *Ref, present bool) {
	id, ok := g.lookup(c.UID)
	if !ok {
		return
	}
	o := g.node(id)
	if o.flags&(fObserved|fVirtual) == 0 {
		return
	}
	gvk, ok := g.in.lookupGVK(c.APIVersion, c.Kind)
	if !ok {
		return // no reference makes this claim
	}
	cluster := c.Namespace == ""
	var ns uint32
	if !cluster {
		if ns, ok = g.in.lookupNS(c.Namespace); !ok {
			return
		}
	}
	set := uint32(eVerAbsent)
	if present {
		set = eVerPresent
	}
	observed := o.flags&fObserved != 0
	for _, d := range g.depIDs(o) {
		dn := g.node(d)
		if !cluster && dn.ns != ns {
			continue
		}
		for i, k := 0, g.numEdges(dn); i < k; i++ {
			e := g.edgeAt(dn, i)
			if e.owner != id || e.gvk() != gvk || e.name != c.Name {
				continue
			}
			if observed && gvk == o.gvk && e.name == o.name {
				continue
			}
			before := g.edgeState(dn.ns, e)
			e.bits = e.bits&^eVerMask | set
			g.transition(d, dn, e, before, g.edgeState(dn.ns, e), false, false)
		}
	}
	if !observed && gvk == o.gvk && c.Name == o.name && (cluster || ns == o.ns) {
		f := fIDAbsent
		if present {
			f = fIDPresent
		}
		if cluster {
			f |= fIDCluster
		}
		o.flags = o.flags&^idMask | f
	}
}

// actionable reports whether the collector acts on a reference in state s (deletes its
// dependent, or removes the reference): entering it puts the dependent in AttemptDelete.
func actionable(s OwnerState) bool {
	switch s {
	case OwnerAbsent, OwnerInvalidNamespace, OwnerOrphaned, OwnerDeletingDependents:
		return true
	}
	return false
}

// holds reports whether a reference in state s holds its dependent's decision back: nothing
// can be decided on it (undecided: a live check is pending; unresolvable: never), so a
// dependent without a solid owner waits.
func holds(s OwnerState) bool { return s.Undecided() || s == OwnerUnresolvable }

// settle puts in AttemptDelete the dependents recorded in fx.settled (a reference of theirs
// stopped holding the decision back, or they dropped references) that have a reference the
// collector acts on. Effects are otherwise edge-triggered on the references entering such a
// state: a dependent whose decision waited for another reference, or was kept by a solid owner
// it no longer references, would never be decided again (found by the chaos suite: a ConfigMap
// with an owner observed deleted waited on a reference to an owner whose resource was no longer
// watched; that owner was observed again being deleted with orphan, and orphaning it dropped
// the reference: the ConfigMap was left with a reference to an absent owner, never collected).
func (g *Graph) settle() {
	for _, id := range g.fx.settled {
		n := g.node(id)
		if n.flags&fObserved == 0 {
			continue
		}
		for i, k := 0, g.numEdges(n); i < k; i++ {
			if actionable(g.edgeState(n.ns, g.edgeAt(n, i))) {
				g.fx.del = append(g.fx.del, id)
				break
			}
		}
	}
}
