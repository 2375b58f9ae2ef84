package graph

import "k8s.io/apimachinery/pkg/types"

// effectBuf collects the effects of the Apply in progress as node ids (or
// materialized values where the reference may not outlive the event). flush
// turns it into Effects: deduplicated, first occurrence first.
type effectBuf struct {
	del, orphan, foreground, recheck []uint32
	verify                           []Ref
	invalid                          []InvalidRef
	// settled are dependents whose decision may have been held back by a reference that no
	// longer holds it (settle turns them into del when they have a reference to act on).
	settled []uint32
}

func (b *effectBuf) flush(g *Graph) Effects {
	out := Effects{
		AttemptDelete: g.uids(b.del),
		AttemptOrphan: g.uids(b.orphan),
		Foreground:    g.uids(b.foreground),
		RecheckOwner:  g.uids(b.recheck),
	}
	if len(b.verify) > 0 {
		out.VerifyOwner = append([]Ref(nil), dedupe(b.verify)...)
	}
	if len(b.invalid) > 0 {
		out.InvalidNamespace = append([]InvalidRef(nil), dedupe(b.invalid)...)
	}
	clear(b.verify)
	clear(b.invalid)
	*b = effectBuf{
		del: b.del[:0], orphan: b.orphan[:0], foreground: b.foreground[:0], recheck: b.recheck[:0],
		verify: b.verify[:0], invalid: b.invalid[:0], settled: b.settled[:0],
	}
	return out
}

func (g *Graph) uids(ids []uint32) []types.UID {
	if len(ids) == 0 {
		return nil
	}
	ids = dedupe(ids)
	out := make([]types.UID, len(ids))
	for i, id := range ids {
		out[i] = g.uidOf(id)
	}
	return out
}

// dedupe removes repeated values in place, keeping the first of each.
func dedupe[T comparable](s []T) []T {
	out := s[:0]
	if len(s) <= 16 {
	next:
		for _, x := range s {
			for _, y := range out {
				if x == y {
					continue next
				}
			}
			out = append(out, x)
		}
		return out
	}
	seen := make(map[T]struct{}, len(s))
	for _, x := range s {
		if _, ok := seen[x]; !ok {
			seen[x] = struct{}{}
			out = append(out, x)
		}
	}
	return out
}

// ref is the identity of node id.
func (g *Graph) ref(id uint32, n *node) Ref {
	gv := &g.in.gvks[n.gvk]
	return Ref{APIVersion: gv.apiVersion, Kind: gv.kind, Namespace: g.in.nss[n.ns], Name: n.name, UID: g.uidOf(id)}
}

// ownerRef is reference e as the dependent wrote it.
func (g *Graph) ownerRef(e *edge) OwnerRef {
	gv := &g.in.gvks[e.gvk()]
	return OwnerRef{
		APIVersion: gv.apiVersion, Kind: gv.kind, Name: e.name, UID: g.uidOf(e.owner),
		Controller: e.bits&eController != 0, BlockOwnerDeletion: e.bits&eBlock != 0,
	}
}

// claim is the identity reference e of dependent d claims, in d's namespace.
func (g *Graph) claim(d *node, e *edge) Ref {
	gv := &g.in.gvks[e.gvk()]
	return Ref{APIVersion: gv.apiVersion, Kind: gv.kind, Namespace: g.in.nss[d.ns], Name: e.name, UID: g.uidOf(e.owner)}
}
