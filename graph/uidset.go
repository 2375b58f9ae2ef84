package graph

import "k8s.io/apimachinery/pkg/types"

// UIDSet is a set of UIDs kept as compactly as the graph keeps them: 16 bytes a canonical UUID
// (any other UID as its string). A relist records in one the UIDs it saw, to find the objects
// it no longer holds (ObservedOfExcept) without a second copy of the list.
type UIDSet struct {
	compact map[uidKey]struct{}
	other   map[types.UID]struct{}
}

// NewUIDSet returns an empty set sized for about n UIDs.
func NewUIDSet(n int) *UIDSet {
	return &UIDSet{compact: make(map[uidKey]struct{}, n), other: map[types.UID]struct{}{}}
}

// Add puts uid in the set.
func (s *UIDSet) Add(uid types.UID) {
	if k, ok := parseUID(uid); ok {
		s.compact[k] = struct{}{}
		return
	}
	s.other[uid] = struct{}{}
}

// Remove takes uid out of the set.
func (s *UIDSet) Remove(uid types.UID) {
	if k, ok := parseUID(uid); ok {
		delete(s.compact, k)
		return
	}
	delete(s.other, uid)
}

// Has reports whether uid is in the set.
func (s *UIDSet) Has(uid types.UID) bool {
	if k, ok := parseUID(uid); ok {
		_, in := s.compact[k]
		return in
	}
	_, in := s.other[uid]
	return in
}

// Len is the number of UIDs in the set.
func (s *UIDSet) Len() int { return len(s.compact) + len(s.other) }

// ObservedOfExcept returns the observed objects of one kind whose UIDs are not in seen: after a
// complete list of the kind, the objects whose deletion was missed. It allocates only for
// what it returns (ObservedOf would copy every object of the kind).
func (g *Graph) ObservedOfExcept(apiVersion, kind string, seen *UIDSet) []Ref {
	gvk, ok := g.in.lookupGVK(apiVersion, kind)
	if !ok {
		return nil
	}
	var out []Ref
	for id := uint32(1); id <= g.top; id++ {
		n := g.node(id)
		if n.flags&fObserved == 0 || n.gvk != gvk {
			continue
		}
		var in bool
		if n.flags&fSideUID != 0 {
			_, in = seen.other[types.UID(g.sideUID[id])]
		} else {
			_, in = seen.compact[n.uid]
		}
		if !in {
			out = append(out, g.ref(id, n))
		}
	}
	return out
}
