package graph

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Graph is the dependency graph over ownerReferences. The zero value is not
// usable; call New. A Graph is not safe for concurrent use: Apply is its only
// mutator and must not run concurrently with anything else; the queries may
// run concurrently with each other. The caller (gc) holds one RWMutex around
// the Graph.
type Graph struct {
	// Nodes live in fixed-size chunks so that growing the graph neither
	// copies nodes nor moves them: a *node stays valid until the node is
	// freed. Node id 0 is never used; 0 means "no node" in edges and lists.
	// A chunk is 256 nodes (22 KiB): an idle fleet member's graph, a few
	// hundred built-in objects, takes one or two, not a 90 KiB chunk of 1,024.
	chunks [][]node
	top    uint32   // highest id ever handed out
	free   []uint32 // freed ids, reused first

	byUID     map[uidKey]uint32 // canonical UUIDs
	bySideUID map[string]uint32 // every other UID spelling
	sideUID   map[uint32]string // id -> UID, for nodes with fSideUID
	sideRV    map[uint32]string // id -> resourceVersion, for nodes with fRVSide

	// deps[i-1] is the dependents list of the node whose deps field is i.
	// Leaves (most objects) have none, so the list lives out of line.
	deps     []depList
	freeDeps []uint32
	// more[i-1] holds owner references 2..n of the node whose more field
	// is i; one reference (the common case) is stored inline.
	more     [][]edge
	freeMore []uint32

	in interner

	// Owners that were released while carrying fOrphaned, remembered so
	// that a late dependent still sees OwnerOrphaned (orphans.go).
	retained retainedFIFO

	// uidPeak is the most entries byUID held since Compact last rebuilt it: a Go map never
	// shrinks, so Compact rebuilds it once it holds less than half of that.
	uidPeak int

	nObserved, nVirtual, nAbsent int
	nOrphan, nForeground         int

	// Scratch state of the Apply in progress, kept to avoid allocating.
	fx      effectBuf
	ownOld  []ownSnap
	inSnap  []inSnap
	newE    []edge
	newFrom []int32
	fresh   []uint32
}

const (
	chunkShift = 8
	chunkSize  = 1 << chunkShift
)

// node is one UID. It is 88 bytes; what does not fit (a second owner
// reference, dependents, odd UIDs or resourceVersions) lives in side tables
// indexed by the small integers below, so that no node carries a map or a
// slice header it does not use.
type node struct {
	uid   uidKey // canonical UUID bytes; unused when fSideUID
	rv    uint64 // resourceVersion when fRVNum
	name  string
	gvk   uint32 // interned (apiVersion, kind)
	ns    uint32 // interned namespace
	deps  uint32 // 1 + index into Graph.deps; 0: no dependents
	more  uint32 // 1 + index into Graph.more; 0: at most one owner reference
	flags uint32
	own0  edge // first owner reference; own0.owner == 0: none
}

// Node flags. Exactly one of fObserved, fVirtual, fAbsent is set on a live
// node.
const (
	fObserved        uint32 = 1 << iota // seen through an informer and not deleted
	fVirtual                            // referenced, not observed (never, or no longer watched)
	fAbsent                             // observed, then deleted: a tombstone
	fDeleting                           // deletionTimestamp set (observed only)
	fOrphan                             // carries the orphan finalizer (observed only)
	fForeground                         // carries the foregroundDeletion finalizer (observed only)
	fRVNum                              // rv holds the resourceVersion
	fRVSide                             // the resourceVersion is in Graph.sideRV
	fSideUID                            // the UID is in Graph.sideUID
	fIDPresent                          // virtual: its identity claim was verified present
	fIDAbsent                           // virtual: its identity claim was verified absent
	fIDCluster                          // the fID* answer was cluster-wide (any namespace)
	fFresh                              // created by the Apply in progress
	fOrphaned                           // observed (or recorded: EventOrphanRecorded) being deleted with the orphan finalizer, ever (sticky; see orphans.go, unwatch.go)
	fIDUnchecked                        // virtual: no live check of its identity claim is under way (unwatch.go)
	fStampOrphan                        // the caller stamped the orphan finalizer (Object.Stamp)
	fStampForeground                    // the caller stamped the foregroundDeletion finalizer (Object.Stamp)

	finShift = 4 // fOrphan == FinalizerOrphan << finShift
	// stampShift: fStampOrphan == FinalizerOrphan << stampShift
	stampShift = 15
	stampMask  = fStampOrphan | fStampForeground
	kindMask   = fObserved | fVirtual | fAbsent
	idMask     = fIDPresent | fIDAbsent | fIDCluster | fIDUnchecked
)

// edge is one owner reference of an observed node: the owner's node and the
// coordinates the reference claims. The reverse edge is the dependent's id
// in the owner's dependents list.
type edge struct {
	name  string // claimed name; shares the owner's string when equal
	owner uint32 // owner node id; 0: unused slot
	bits  uint32 // claimed (apiVersion, kind) id | eController | eBlock | verification
}

const (
	eGVKMask    = 1<<28 - 1
	eController = 1 << 28
	eBlock      = 1 << 29
	// Verification of this claim (EventOwnerVerified); meaningful while the
	// owner is virtual, or observed at other coordinates.
	eVerPresent = 1 << 30
	eVerAbsent  = 1 << 31
	eVerMask    = eVerPresent | eVerAbsent
)

func (e *edge) gvk() uint32 { return e.bits & eGVKMask }

// depList is a set of dependent ids. Lists longer than depIndexAt get a
// position index so that removing one dependent of an owner with many
// stays O(1).
type depList struct {
	ids []uint32
	pos map[uint32]int32
}

const depIndexAt = 32

// DefaultRetainedOrphans is the default of Options.RetainedOrphans.
const DefaultRetainedOrphans = 10000

// Options configure a Graph. The zero value gives the defaults.
type Options struct {
	// RetainedOrphans bounds the number of orphan-deleted owners the graph
	// remembers after their last dependent went (see OwnerOrphaned): the
	// most recently released are kept, the oldest forgotten first. About
	// 100 bytes each plus the name. 0 or less: DefaultRetainedOrphans.
	RetainedOrphans int
}

// New returns an empty graph with the default Options.
func New() *Graph { return NewWithOptions(Options{}) }

// NewWithOptions returns an empty graph.
func NewWithOptions(o Options) *Graph {
	if o.RetainedOrphans <= 0 {
		o.RetainedOrphans = DefaultRetainedOrphans
	}
	return &Graph{
		chunks:    [][]node{make([]node, chunkSize)},
		byUID:     make(map[uidKey]uint32),
		bySideUID: make(map[string]uint32),
		sideUID:   make(map[uint32]string),
		sideRV:    make(map[uint32]string),
		in:        newInterner(),
		retained:  retainedFIFO{max: o.RetainedOrphans},
	}
}

// Apply is the only mutator of the graph: it folds one event into the graph
// and returns what the caller should do about it. Apply never blocks, never
// does I/O and is deterministic. An update that changes nothing the collector
// cares about (only resourceVersion, labels, annotations, other finalizers...)
// returns zero Effects without allocating.
func (g *Graph) Apply(ev Event) Effects {
	switch ev.Type {
	case EventObserved:
		if g.observeNoop(&ev.Object) {
			return Effects{}
		}
		g.observe(&ev.Object)
	case EventDeleted:
		g.remove(&ev.Object.Ref)
	case EventOwnerVerified:
		g.verify(&ev.Owner, ev.Present)
	case EventUnwatched:
		g.unwatch(ev.Object.APIVersion, ev.Object.Kind)
	case EventOrphanRecorded:
		g.recordedOrphan(&ev.Object.Ref)
	default:
		return Effects{}
	}
	for _, id := range g.fresh {
		g.node(id).flags &^= fFresh
	}
	g.fresh = g.fresh[:0]
	g.settle()
	return g.fx.flush(g)
}

// ---- arena ----

func (g *Graph) node(id uint32) *node {
	return &g.chunks[id>>chunkShift][id&(chunkSize-1)]
}

func (g *Graph) lookup(uid types.UID) (uint32, bool) {
	if k, ok := parseUID(uid); ok {
		id, ok := g.byUID[k]
		return id, ok
	}
	id, ok := g.bySideUID[string(uid)]
	return id, ok
}

// alloc creates a node with no kind for uid, which must not be in the graph.
// If uid is a retained orphaned owner, the node takes its entry out of the
// FIFO: it carries fOrphaned and the remembered coordinates.
func (g *Graph) alloc(uid types.UID) (uint32, *node) {
	var id uint32
	if n := len(g.free); n > 0 {
		id = g.free[n-1]
		g.free = g.free[:n-1]
	} else {
		g.top++
		id = g.top
		if int(id>>chunkShift) == len(g.chunks) {
			g.chunks = append(g.chunks, make([]node, chunkSize))
		}
	}
	n := g.node(id)
	if k, ok := parseUID(uid); ok {
		n.uid = k
		g.byUID[k] = id
		g.uidPeak = max(g.uidPeak, len(g.byUID))
	} else {
		s := strings.Clone(string(uid))
		n.flags = fSideUID
		g.bySideUID[s] = id
		g.sideUID[id] = s
	}
	n.flags |= fFresh
	g.fresh = append(g.fresh, id)
	if g.retained.live > 0 {
		if r, ok := g.retained.take(uid); ok {
			n.flags |= fOrphaned
			n.gvk, n.ns, n.name = r.gvk, r.ns, r.name
		}
	}
	return id, n
}

// release frees a node that has no owner references and no dependents. An
// orphan-deleted owner is remembered in the FIFO of retained orphans.
func (g *Graph) release(id uint32) {
	n := g.node(id)
	if n.flags&fOrphaned != 0 {
		g.retained.push(g, id, n)
	}
	g.account(n, -1)
	if n.flags&fSideUID != 0 {
		delete(g.bySideUID, g.sideUID[id])
		delete(g.sideUID, id)
	} else {
		delete(g.byUID, n.uid)
	}
	if n.flags&fRVSide != 0 {
		delete(g.sideRV, id)
	}
	g.setEdges(n, nil)
	if n.deps != 0 {
		g.dropDepList(n)
	}
	*n = node{}
	g.free = append(g.free, id)
}

func (g *Graph) uidOf(id uint32) types.UID {
	n := g.node(id)
	if n.flags&fSideUID != 0 {
		return types.UID(g.sideUID[id])
	}
	return n.uid.uid()
}

// uidIs reports whether node id has UID uid, without allocating.
func (g *Graph) uidIs(id uint32, uid types.UID) bool {
	n := g.node(id)
	if n.flags&fSideUID != 0 {
		return g.sideUID[id] == string(uid)
	}
	k, ok := parseUID(uid)
	return ok && k == n.uid
}

func (g *Graph) setRV(id uint32, n *node, rv string) {
	if v, ok := parseRV(rv); ok {
		if n.flags&fRVSide != 0 {
			delete(g.sideRV, id)
		}
		n.rv = v
		n.flags = n.flags&^fRVSide | fRVNum
		return
	}
	n.rv = 0
	n.flags &^= fRVNum
	if rv == "" {
		if n.flags&fRVSide != 0 {
			delete(g.sideRV, id)
			n.flags &^= fRVSide
		}
		return
	}
	if n.flags&fRVSide != 0 && g.sideRV[id] == rv {
		return
	}
	g.sideRV[id] = strings.Clone(rv)
	n.flags |= fRVSide
}

func (g *Graph) rvOf(id uint32, n *node) string {
	switch {
	case n.flags&fRVNum != 0:
		return uitoa(n.rv)
	case n.flags&fRVSide != 0:
		return g.sideRV[id]
	}
	return ""
}

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}

// account adds (sign 1) or removes (sign -1) n from the counters.
func (g *Graph) account(n *node, sign int) {
	switch n.flags & kindMask {
	case fObserved:
		g.nObserved += sign
		g.in.gvks[n.gvk].observed += sign
		if n.flags&fDeleting != 0 {
			if n.flags&fOrphan != 0 {
				g.nOrphan += sign
			}
			if n.flags&fForeground != 0 {
				g.nForeground += sign
			}
		}
	case fVirtual:
		g.nVirtual += sign
	case fAbsent:
		g.nAbsent += sign
	}
}

func (n *node) finalizers() Finalizers { return Finalizers(n.flags>>finShift) & finalizerMask }

func (n *node) stamp() Finalizers { return Finalizers(n.flags>>stampShift) & finalizerMask }

func (n *node) waitingOrphan() bool {
	return n.flags&(fObserved|fDeleting|fOrphan) == fObserved|fDeleting|fOrphan
}

func (n *node) deletingDependents() bool {
	return n.flags&(fObserved|fDeleting|fForeground) == fObserved|fDeleting|fForeground
}

// ---- owner references of a node ----

func (g *Graph) numEdges(n *node) int {
	switch {
	case n.own0.owner == 0:
		return 0
	case n.more == 0:
		return 1
	}
	return 1 + len(g.more[n.more-1])
}

// edgeAt returns owner reference i of n. The pointer is valid until the
// node's references are replaced.
func (g *Graph) edgeAt(n *node, i int) *edge {
	if i == 0 {
		return &n.own0
	}
	return &g.more[n.more-1][i-1]
}

// setEdges replaces n's owner references with a copy of es. It does not
// touch the owners' dependents lists.
func (g *Graph) setEdges(n *node, es []edge) {
	if len(es) == 0 {
		n.own0 = edge{}
	} else {
		n.own0 = es[0]
	}
	if len(es) <= 1 {
		if n.more != 0 {
			g.more[n.more-1] = nil
			g.freeMore = append(g.freeMore, n.more-1)
			n.more = 0
		}
		return
	}
	rest := es[1:]
	if n.more == 0 {
		if k := len(g.freeMore); k > 0 {
			n.more = g.freeMore[k-1] + 1
			g.freeMore = g.freeMore[:k-1]
		} else {
			g.more = append(g.more, nil)
			n.more = uint32(len(g.more))
		}
	}
	cur := g.more[n.more-1]
	if cap(cur) < len(rest) || cap(cur) > 2*len(rest) {
		cur = make([]edge, len(rest))
	}
	cur = cur[:len(rest)]
	copy(cur, rest)
	g.more[n.more-1] = cur
}

// ---- dependents lists ----

func (g *Graph) depIDs(n *node) []uint32 {
	if n.deps == 0 {
		return nil
	}
	return g.deps[n.deps-1].ids
}

func (g *Graph) addDep(n *node, dep uint32) {
	if n.deps == 0 {
		if k := len(g.freeDeps); k > 0 {
			n.deps = g.freeDeps[k-1] + 1
			g.freeDeps = g.freeDeps[:k-1]
		} else {
			g.deps = append(g.deps, depList{})
			n.deps = uint32(len(g.deps))
		}
	}
	l := &g.deps[n.deps-1]
	l.ids = append(l.ids, dep)
	if l.pos != nil {
		l.pos[dep] = int32(len(l.ids) - 1)
	} else if len(l.ids) > depIndexAt {
		l.pos = make(map[uint32]int32, len(l.ids))
		for i, d := range l.ids {
			l.pos[d] = int32(i)
		}
	}
}

func (g *Graph) removeDep(n *node, dep uint32) {
	l := &g.deps[n.deps-1]
	i := -1
	if l.pos != nil {
		if p, ok := l.pos[dep]; ok {
			i = int(p)
			delete(l.pos, dep)
		}
	} else {
		for j, d := range l.ids {
			if d == dep {
				i = j
				break
			}
		}
	}
	if i < 0 {
		return
	}
	last := len(l.ids) - 1
	if i != last {
		moved := l.ids[last]
		l.ids[i] = moved
		if l.pos != nil {
			l.pos[moved] = int32(i)
		}
	}
	l.ids = l.ids[:last]
	switch {
	case last == 0:
		g.dropDepList(n)
	case cap(l.ids) > 64 && last < cap(l.ids)/4:
		l.ids = append([]uint32(nil), l.ids...)
		if last <= depIndexAt/2 {
			l.pos = nil
		}
	}
}

func (g *Graph) dropDepList(n *node) {
	g.deps[n.deps-1] = depList{}
	g.freeDeps = append(g.freeDeps, n.deps-1)
	n.deps = 0
}

// hasEdgeTo reports whether node n has an owner reference to owner.
func (g *Graph) hasEdgeTo(n *node, owner uint32) bool {
	for i, k := 0, g.numEdges(n); i < k; i++ {
		if g.edgeAt(n, i).owner == owner {
			return true
		}
	}
	return false
}

// dropIfUnreferenced frees a virtual or absent node nobody references.
func (g *Graph) dropIfUnreferenced(id uint32) {
	n := g.node(id)
	if n.flags&(fVirtual|fAbsent) != 0 && n.deps == 0 {
		g.release(id)
	}
}
