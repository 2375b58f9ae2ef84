package graph

import "slices"

// CompactStats says what one Compact freed and what the graph holds afterwards.
type CompactStats struct {
	FreedKinds, FreedNamespaces int
	Kinds, Namespaces           int // interned entries in use
	// NodeSlots is the size of the node arena (highest id handed out) after trimming.
	NodeSlots int
}

// Compact frees the interned apiVersion/kind pairs and namespaces that nothing in the graph
// uses any more (no node, no owner reference, no retained orphan), so churn of namespaces or
// kinds does not grow memory for good: the strings go, the index maps are rebuilt when they
// held mostly freed entries, and the tables shrink past their last used id. Freed ids are
// reused. It is a mutator like Apply (the caller serializes it with Apply) and returns no
// Effects: nothing a reference means changes. It scans the whole graph: O(nodes + references).
func (g *Graph) Compact() CompactStats {
	in := &g.in
	usedGVK := make([]bool, len(in.gvks))
	usedNS := make([]bool, len(in.nss))
	usedGVK[0], usedNS[0] = true, true
	for id := uint32(1); id <= g.top; id++ {
		n := g.node(id)
		if n.flags&kindMask == 0 {
			continue // free
		}
		usedGVK[n.gvk], usedNS[n.ns] = true, true
		for i, k := 0, g.numEdges(n); i < k; i++ {
			usedGVK[g.edgeAt(n, i).gvk()] = true
		}
	}
	for i := range g.retained.ring {
		if r := &g.retained.ring[i]; r.kind != rHole {
			usedGVK[r.gvk], usedNS[r.ns] = true, true
		}
	}

	var st CompactStats
	// Kinds.
	before := len(in.gvkIdx)
	for id, used := range usedGVK {
		if !used && in.gvks[id] != (gvkEntry{}) {
			delete(in.gvkIdx, in.gvks[id].gvkKey)
			in.gvks[id] = gvkEntry{}
			st.FreedKinds++
		}
	}
	in.gvks = trimTable(in.gvks, usedGVK)
	in.freeGVK = freeIDs(in.freeGVK[:0], usedGVK[:len(in.gvks)])
	if st.FreedKinds > 0 && len(in.gvkIdx) < before/2 {
		in.gvkIdx = resized(in.gvkIdx)
	}
	st.Kinds = len(in.gvkIdx)
	// Namespaces.
	before = len(in.nsIdx)
	for id, used := range usedNS {
		if !used && in.nss[id] != "" {
			delete(in.nsIdx, in.nss[id])
			in.nss[id] = ""
			st.FreedNamespaces++
		}
	}
	in.nss = trimTable(in.nss, usedNS)
	in.freeNS = freeIDs(in.freeNS[:0], usedNS[:len(in.nss)])
	if st.FreedNamespaces > 0 && len(in.nsIdx) < before/2 {
		in.nsIdx = resized(in.nsIdx)
	}
	st.Namespaces = len(in.nsIdx)
	g.trimArena()
	st.NodeSlots = int(g.top)
	return st
}

// trimArena gives back what the node arena and the side tables no longer need after many
// nodes went: the chunks past the highest live node, the dependents and extra-reference lists
// past the highest used one, and the UID index once it holds less than half its peak.
func (g *Graph) trimArena() {
	top := g.top
	for top > 0 && g.node(top).flags&kindMask == 0 {
		top--
	}
	if top < g.top {
		g.free = slices.DeleteFunc(g.free, func(id uint32) bool { return id > top })
		g.top = top
		keep := int(top>>chunkShift) + 1
		clear(g.chunks[keep:])
		g.chunks = g.chunks[:keep]
	}
	maxDeps, maxMore := uint32(0), uint32(0)
	for id := uint32(1); id <= g.top; id++ {
		n := g.node(id)
		maxDeps, maxMore = max(maxDeps, n.deps), max(maxMore, n.more)
	}
	if int(maxDeps) < len(g.deps) {
		g.deps = shrink(g.deps, int(maxDeps))
		g.freeDeps = slices.DeleteFunc(g.freeDeps, func(i uint32) bool { return i >= maxDeps })
	}
	if int(maxMore) < len(g.more) {
		g.more = shrink(g.more, int(maxMore))
		g.freeMore = slices.DeleteFunc(g.freeMore, func(i uint32) bool { return i >= maxMore })
	}
	g.free, g.freeDeps, g.freeMore = shrink(g.free, len(g.free)), shrink(g.freeDeps, len(g.freeDeps)), shrink(g.freeMore, len(g.freeMore))
	if len(g.byUID) < g.uidPeak/2 {
		g.byUID = resized(g.byUID)
		g.uidPeak = len(g.byUID)
	}
}

// shrink truncates s to n and gives the memory back when most of its capacity is unused.
func shrink[T any](s []T, n int) []T {
	clear(s[n:])
	s = s[:n]
	if cap(s) > 64 && n < cap(s)/4 {
		return slices.Clone(s)
	}
	return s
}

// trimTable drops the unused ids at the end of t (id 0 always stays) and gives the memory back
// when most of the table went.
func trimTable[T any](t []T, used []bool) []T {
	n := len(t)
	for n > 1 && !used[n-1] {
		n--
	}
	if n == len(t) {
		return t
	}
	clear(t[n:])
	if n < cap(t)/4 {
		return slices.Clone(t[:n])
	}
	return t[:n]
}

// freeIDs appends the unused ids of used, highest first, so the lowest is reused first.
func freeIDs(out []uint32, used []bool) []uint32 {
	for id := len(used) - 1; id > 0; id-- {
		if !used[id] {
			out = append(out, uint32(id))
		}
	}
	return out
}

// resized returns a copy of m sized for what it holds (a Go map never shrinks, and
// maps.Clone keeps the table it copies).
func resized[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
