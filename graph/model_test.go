package graph

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// The reference model: the specification in doc.go written as naively as
// possible. Nodes are a map of structs holding their owner references as
// written; dependents are found by scanning every node; effects are derived
// by computing the state of every reference in the graph before and after
// the event and comparing. It shares no code with the Graph beyond the
// exported types.

const (
	mObserved = iota + 1
	mVirtual
	mAbsent
)

const (
	vNone = iota
	vPresent
	vAbsent
)

type mEdge struct {
	OwnerRef
	verify int
}

type mNode struct {
	kind       int
	ref        Ref
	rv         string
	deleting   bool
	finalizers Finalizers
	owners     []mEdge
	idVerify   int  // virtual: answer for its identity claim
	idCluster  bool // that answer was cluster-wide
	// virtual: no check of its identity claim was asked for (it became
	// virtual when its resource stopped being watched, and no reference
	// made that claim since).
	idUnchecked bool
	orphaned    bool // ever observed being deleted with the orphan finalizer
}

// mRetained is one slot of the FIFO of retained orphans: a released
// orphaned node, or a hole where one was taken back.
type mRetained struct {
	ref  Ref
	hole bool
}

type model struct {
	nodes map[types.UID]*mNode
	// fifo holds the last max releases of orphaned nodes, oldest first.
	fifo []mRetained
	max  int
	// How often the interesting paths ran, for the coverage check.
	recreated, evicted, tombstones                        int
	unwatchedVirtual, unwatchedReleased, unwatchedOrphans int
}

func newModel(max int) *model { return &model{nodes: make(map[types.UID]*mNode), max: max} }

// release drops node uid, remembering it if it is orphaned.
func (m *model) release(uid types.UID) {
	n := m.nodes[uid]
	delete(m.nodes, uid)
	if !n.orphaned {
		return
	}
	m.fifo = append(m.fifo, mRetained{ref: n.ref})
	if len(m.fifo) > m.max {
		if !m.fifo[0].hole {
			m.evicted++
		}
		m.fifo = m.fifo[1:]
	}
}

// take removes uid from the FIFO, leaving a hole.
func (m *model) take(uid types.UID) (Ref, bool) {
	for i := range m.fifo {
		if r := &m.fifo[i]; !r.hole && r.ref.UID == uid {
			ref := r.ref
			*r = mRetained{hole: true}
			return ref, true
		}
	}
	return Ref{}, false
}

// sweep releases uid if it is a virtual or absent node nobody references.
func (m *model) sweep(uid types.UID) {
	if n := m.nodes[uid]; n != nil && n.kind != mObserved && len(m.dependents(uid)) == 0 {
		m.release(uid)
	}
}

func sameCoords(av, kind, name string, r Ref) bool {
	return av == r.APIVersion && kind == r.Kind && name == r.Name
}

func (n *mNode) waitingOrphan() bool {
	return n.kind == mObserved && n.deleting && n.finalizers&FinalizerOrphan != 0
}

func (n *mNode) deletingDependents() bool {
	return n.kind == mObserved && n.deleting && n.finalizers&FinalizerForeground != 0
}

// dependents returns the distinct observed nodes referencing uid, sorted.
func (m *model) dependents(uid types.UID) []types.UID {
	var out []types.UID
	for duid, d := range m.nodes {
		for _, e := range d.owners {
			if e.UID == uid {
				out = append(out, duid)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func (m *model) state(d *mNode, e *mEdge) OwnerState {
	o := m.nodes[e.UID]
	obs := func() OwnerState {
		switch {
		case !o.deleting:
			return OwnerPresent
		case o.finalizers&FinalizerForeground != 0:
			return OwnerDeletingDependents
		}
		return OwnerBeingDeleted
	}
	if o.kind != mVirtual && o.ref.Namespace != "" && o.ref.Namespace != d.ref.Namespace {
		if d.ref.Namespace == "" {
			return OwnerUnresolvable
		}
		return OwnerInvalidNamespace
	}
	switch o.kind {
	case mAbsent:
		if o.orphaned {
			return OwnerOrphaned
		}
		return OwnerAbsent
	case mObserved:
		if sameCoords(e.APIVersion, e.Kind, e.Name, o.ref) {
			return obs()
		}
		switch e.verify {
		case vPresent:
			return obs()
		case vAbsent:
			return OwnerAbsent
		}
		return OwnerMismatch
	}
	switch e.verify {
	case vPresent:
		return OwnerVerifiedPresent
	case vAbsent:
		if o.orphaned {
			return OwnerOrphaned
		}
		return OwnerAbsent
	}
	return OwnerUnknown
}

type edgeKey struct {
	dep                    types.UID
	uid                    types.UID
	apiVersion, kind, name string
}

// claimedByOther reports whether, before the event, a reference of another dependent in
// namespace ns made claim k and was undecided: only then is a check of it under way.
func claimedByOther(before map[edgeKey]edgeInfo, k edgeKey, ns string) bool {
	for kk, bi := range before {
		if kk.dep != k.dep && kk.uid == k.uid && kk.apiVersion == k.apiVersion && kk.kind == k.kind && kk.name == k.name &&
			bi.dep.ref.Namespace == ns && bi.state.Undecided() {
			return true
		}
	}
	return false
}

type edgeInfo struct {
	state OwnerState
	ref   OwnerRef
	dep   *mNode
}

func (m *model) edgeStates() map[edgeKey]edgeInfo {
	out := make(map[edgeKey]edgeInfo)
	for duid, d := range m.nodes {
		for i := range d.owners {
			e := &d.owners[i]
			out[edgeKey{duid, e.UID, e.APIVersion, e.Kind, e.Name}] = edgeInfo{m.state(d, e), e.OwnerRef, d}
		}
	}
	return out
}

type nodeBefore struct {
	kind               int
	ref                Ref
	orphan, foreground bool
	idVerify           int
	idUnchecked        bool
	owners, blocks     map[types.UID]bool
	dependents         []types.UID
}

func (m *model) apply(ev Event) Effects {
	before := m.edgeStates()
	nb := make(map[types.UID]nodeBefore, len(m.nodes))
	for uid, n := range m.nodes {
		b := nodeBefore{kind: n.kind, ref: n.ref, orphan: n.waitingOrphan(), foreground: n.deletingDependents(),
			idVerify: n.idVerify, idUnchecked: n.idUnchecked, owners: map[types.UID]bool{}, blocks: map[types.UID]bool{}}
		for _, e := range n.owners {
			b.owners[e.UID] = true
			if e.BlockOwnerDeletion {
				b.blocks[e.UID] = true
			}
		}
		nb[uid] = b
	}
	var target types.UID
	var oldOwners []types.UID // the target's owners before the event, in order
	// EventUnwatched: the owners the unwatched nodes referenced, and the
	// identities of those that became virtual.
	var unwatchedOwners []types.UID
	if ev.Type == EventObserved || ev.Type == EventDeleted {
		if n := m.nodes[ev.Object.UID]; n != nil {
			for _, e := range n.owners {
				if !slices.Contains(oldOwners, e.UID) {
					oldOwners = append(oldOwners, e.UID)
				}
			}
		}
	}
	switch ev.Type {
	case EventObserved:
		target = ev.Object.UID
		m.observe(ev.Object)
	case EventDeleted:
		target = ev.Object.UID
		if n := m.nodes[target]; n != nil && n.kind != mAbsent {
			b := nb[target]
			b.dependents = m.dependents(target)
			nb[target] = b
		}
		m.delete(ev.Object.Ref)
	case EventOwnerVerified:
		m.verify(ev.Owner, ev.Present)
	case EventUnwatched:
		unwatchedOwners = m.unwatch(ev.Object.APIVersion, ev.Object.Kind)
	default:
		return Effects{}
	}
	// Release what nobody references any more, in the order the graph
	// does (it matters to the FIFO): the owners the target dropped, in
	// reference order, then the target; then anything else, by UID.
	for _, uid := range oldOwners {
		if uid != target {
			m.sweep(uid)
		}
	}
	if ev.Type == EventObserved || ev.Type == EventDeleted {
		m.sweep(target)
	}
	var rest []types.UID
	for uid := range m.nodes {
		rest = append(rest, uid)
	}
	slices.Sort(rest)
	for _, uid := range rest {
		m.sweep(uid)
	}
	after := m.edgeStates()

	var fx Effects
	del := map[types.UID]bool{}
	orphan := map[types.UID]bool{}
	fg := map[types.UID]bool{}
	recheck := map[types.UID]bool{}
	verify := map[Ref]bool{}
	invalid := map[InvalidRef]bool{}
	for k, a := range after {
		b, existed := before[k]
		if existed && b.state == a.state {
			continue
		}
		switch a.state {
		case OwnerAbsent, OwnerInvalidNamespace, OwnerOrphaned, OwnerDeletingDependents:
			del[k.dep] = true
		}
		inv := func(s OwnerState) bool { return s == OwnerInvalidNamespace || s == OwnerUnresolvable }
		if inv(a.state) && (!existed || !inv(b.state)) {
			invalid[InvalidRef{Dependent: a.dep.ref, Owner: a.ref}] = true
		}
		if a.state.Undecided() && (!existed || !b.state.Undecided()) {
			o := m.nodes[k.uid]
			ob, oExisted := nb[k.uid]
			pending := !existed && oExisted && ob.kind == mVirtual && o.kind == mVirtual &&
				sameCoords(k.apiVersion, k.kind, k.name, o.ref) && a.dep.ref.Namespace == o.ref.Namespace &&
				ob.idVerify == vNone && !ob.idUnchecked && claimedByOther(before, k, o.ref.Namespace)
			if !pending {
				verify[Ref{APIVersion: k.apiVersion, Kind: k.kind, Namespace: a.dep.ref.Namespace, Name: k.name, UID: k.uid}] = true
			}
		}
	}
	if b, ok := nb[target]; ok && ev.Type == EventDeleted && b.kind != mAbsent {
		for _, d := range b.dependents {
			if d != target {
				del[d] = true
			}
		}
		for o := range b.owners {
			if n := m.nodes[o]; o != target && n != nil && n.deletingDependents() {
				recheck[o] = true
			}
		}
	}
	if n := m.nodes[target]; ev.Type == EventObserved && n != nil {
		b := nb[target]
		if n.waitingOrphan() && !b.orphan {
			orphan[target] = true
		}
		if n.deletingDependents() && !b.foreground {
			fg[target] = true
			for _, d := range m.dependents(target) {
				del[d] = true
			}
		}
		after := map[types.UID]bool{}
		for _, e := range n.owners {
			if e.BlockOwnerDeletion {
				after[e.UID] = true
			}
			if o := m.nodes[e.UID]; !b.owners[e.UID] && o.waitingOrphan() {
				orphan[e.UID] = true
			}
		}
		for o := range b.blocks {
			if on := m.nodes[o]; !after[o] && on != nil && on.deletingDependents() {
				recheck[o] = true
			}
		}
	}
	for _, o := range unwatchedOwners {
		if n := m.nodes[o]; n != nil && n.deletingDependents() {
			recheck[o] = true
		}
	}
	// A dependent whose decision a reference may have held back (it left an undecided or
	// unresolvable state for one that is neither, or the dependent dropped a reference) is
	// decided again if it has a reference the collector acts on.
	mHolds := func(s OwnerState) bool { return s.Undecided() || s == OwnerUnresolvable }
	mActs := func(s OwnerState) bool {
		return s == OwnerAbsent || s == OwnerInvalidNamespace || s == OwnerOrphaned || s == OwnerDeletingDependents
	}
	settled := map[types.UID]bool{}
	for k, a := range after {
		if b, existed := before[k]; existed && mHolds(b.state) && !mHolds(a.state) && !mActs(a.state) {
			settled[k.dep] = true
		}
	}
	if ev.Type == EventObserved {
		for k := range before {
			if _, kept := after[k]; k.dep == target && !kept {
				settled[target] = true
			}
		}
	}
	for d := range settled {
		if n := m.nodes[d]; n == nil || n.kind != mObserved {
			continue
		}
		for k, a := range after {
			if k.dep == d && mActs(a.state) {
				del[d] = true
			}
		}
	}
	// A check of a virtual node's identity is under way once asked for.
	for r := range verify {
		if o := m.nodes[r.UID]; o != nil && o.kind == mVirtual && sameCoords(r.APIVersion, r.Kind, r.Name, o.ref) && r.Namespace == o.ref.Namespace {
			o.idUnchecked = false
		}
	}
	fx.AttemptDelete = setToSlice(del)
	fx.AttemptOrphan = setToSlice(orphan)
	fx.Foreground = setToSlice(fg)
	fx.RecheckOwner = setToSlice(recheck)
	for r := range verify {
		fx.VerifyOwner = append(fx.VerifyOwner, r)
	}
	for r := range invalid {
		fx.InvalidNamespace = append(fx.InvalidNamespace, r)
	}
	return normalize(fx)
}

func (m *model) observe(o Object) {
	uid := o.UID
	n := m.nodes[uid]
	if n == nil {
		n = &mNode{}
		if _, ok := m.take(uid); ok {
			n.orphaned = true // a stale observation keeps the mark
		}
		m.nodes[uid] = n
	}
	orphaned := n.orphaned
	fresh := map[types.UID]bool{}
	identityChanged := n.kind != mObserved || n.ref.APIVersion != o.APIVersion || n.ref.Kind != o.Kind ||
		n.ref.Namespace != o.Namespace || n.ref.Name != o.Name
	var old []mEdge
	if n.kind == mObserved {
		old = n.owners
	}
	*n = mNode{kind: mObserved, ref: o.Ref, rv: o.ResourceVersion, deleting: o.Deleting, finalizers: o.Finalizers & finalizerMask}
	n.orphaned = orphaned || n.waitingOrphan()
	used := make([]bool, len(old))
	var owners []mEdge
	for _, r := range o.Owners {
		if k := slices.IndexFunc(owners, func(e mEdge) bool { return sameClaim(&e.OwnerRef, &r) }); k >= 0 {
			// Identical references collapse to the first, with the strongest flags.
			owners[k].Controller = owners[k].Controller || r.Controller
			owners[k].BlockOwnerDeletion = owners[k].BlockOwnerDeletion || r.BlockOwnerDeletion
			continue
		}
		k := slices.IndexFunc(old, func(e mEdge) bool { return sameClaim(&e.OwnerRef, &r) })
		for k >= 0 && used[k] {
			j := slices.IndexFunc(old[k+1:], func(e mEdge) bool { return sameClaim(&e.OwnerRef, &r) })
			if j < 0 {
				k = -1
			} else {
				k += 1 + j
			}
		}
		if k >= 0 {
			used[k] = true
			e := old[k]
			e.Controller, e.BlockOwnerDeletion = r.Controller, r.BlockOwnerDeletion
			owners = append(owners, e)
			continue
		}
		on := m.nodes[r.UID]
		if on == nil {
			if ref, ok := m.take(r.UID); ok {
				// A retained orphan: its tombstone, as it was observed.
				on = &mNode{kind: mAbsent, ref: ref, orphaned: true}
				m.recreated++
			} else {
				on = &mNode{kind: mVirtual, ref: Ref{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: o.Namespace, Name: r.Name, UID: r.UID}}
			}
			m.nodes[r.UID] = on
			fresh[r.UID] = true
		}
		v := vNone
		if on.kind == mVirtual && sameCoords(r.APIVersion, r.Kind, r.Name, on.ref) && (o.Namespace == on.ref.Namespace || on.idCluster) {
			v = on.idVerify
		}
		owners = append(owners, mEdge{OwnerRef: r, verify: v})
	}
	n.owners = owners
	if identityChanged {
		for _, d := range m.nodes {
			for i := range d.owners {
				if e := &d.owners[i]; e.UID == uid && sameCoords(e.APIVersion, e.Kind, e.Name, n.ref) {
					e.verify = vNone
				}
			}
		}
	}
}

func (m *model) delete(r Ref) {
	uid := r.UID
	n := m.nodes[uid]
	if n == nil || n.kind == mAbsent {
		return
	}
	n.owners = nil
	if n.kind == mVirtual && len(m.dependents(uid)) > 0 {
		n.ref = r
	}
	// With no dependents left, apply's sweep releases the tombstone.
	n.kind, n.deleting, n.finalizers, n.idVerify, n.idCluster, n.idUnchecked = mAbsent, false, 0, vNone, false, false
	if n.orphaned && len(m.dependents(uid)) > 0 {
		m.tombstones++
	}
}

// unwatch makes every observed node of apiVersion/kind stop being observed
// (EventUnwatched), in UID order: first each drops its references (owners
// nobody references any more are released, in reference order), then each
// is released if nothing references it, else becomes a virtual node at its
// coordinates with no verification and no check of its identity asked for,
// keeping the orphaned mark. It returns the owners the nodes referenced.
func (m *model) unwatch(apiVersion, kind string) (owners []types.UID) {
	var xs []types.UID
	for uid, n := range m.nodes {
		if n.kind == mObserved && n.ref.APIVersion == apiVersion && n.ref.Kind == kind {
			xs = append(xs, uid)
		}
	}
	slices.Sort(xs)
	for _, uid := range xs {
		n := m.nodes[uid]
		var own []types.UID
		for _, e := range n.owners {
			if !slices.Contains(own, e.UID) {
				own = append(own, e.UID)
			}
		}
		n.owners = nil
		for _, o := range own {
			owners = append(owners, o)
			if o != uid {
				m.sweep(o)
			}
		}
	}
	for _, uid := range xs {
		n := m.nodes[uid]
		if len(m.dependents(uid)) == 0 {
			m.release(uid)
			m.unwatchedReleased++
			continue
		}
		*n = mNode{kind: mVirtual, ref: n.ref, orphaned: n.orphaned, idUnchecked: true}
		for _, d := range m.nodes {
			for i := range d.owners {
				if d.owners[i].UID == uid {
					d.owners[i].verify = vNone
				}
			}
		}
		m.unwatchedVirtual++
		if n.orphaned {
			m.unwatchedOrphans++
		}
	}
	return owners
}

func (m *model) verify(c Ref, present bool) {
	o := m.nodes[c.UID]
	if o == nil || o.kind == mAbsent {
		return
	}
	v := vAbsent
	if present {
		v = vPresent
	}
	for _, d := range m.nodes {
		if c.Namespace != "" && d.ref.Namespace != c.Namespace {
			continue
		}
		for i := range d.owners {
			e := &d.owners[i]
			if e.UID != c.UID || !sameCoords(e.APIVersion, e.Kind, e.Name, c) {
				continue
			}
			if o.kind == mObserved && sameCoords(e.APIVersion, e.Kind, e.Name, o.ref) {
				continue
			}
			e.verify = v
		}
	}
	if o.kind == mVirtual && sameCoords(c.APIVersion, c.Kind, c.Name, o.ref) && (c.Namespace == "" || c.Namespace == o.ref.Namespace) {
		o.idVerify, o.idCluster, o.idUnchecked = v, c.Namespace == "", false
	}
}

// ---- the model's answers to the queries ----

func (m *model) node(uid types.UID) (NodeView, bool) {
	n := m.nodes[uid]
	if n == nil {
		return NodeView{}, false
	}
	v := NodeView{Ref: n.ref, ResourceVersion: n.rv, Deleting: n.deleting, Finalizers: n.finalizers,
		Virtual: n.kind == mVirtual, Absent: n.kind == mAbsent, Orphaned: n.kind == mAbsent && n.orphaned,
		Dependents: len(m.dependents(uid))}
	for _, e := range n.owners {
		v.Owners = append(v.Owners, e.OwnerRef)
	}
	return v, true
}

func (m *model) owners(uid types.UID) []OwnerView {
	n := m.nodes[uid]
	if n == nil {
		return nil
	}
	var out []OwnerView
	for i := range n.owners {
		out = append(out, OwnerView{OwnerRef: n.owners[i].OwnerRef, State: m.state(n, &n.owners[i])})
	}
	return out
}

func (m *model) dependentRefs(uid types.UID) []Ref {
	var out []Ref
	for _, d := range m.dependents(uid) {
		out = append(out, m.nodes[d].ref)
	}
	return sortRefs(out)
}

func (m *model) blocking(uid types.UID) int {
	c := 0
	for _, d := range m.nodes {
		if slices.ContainsFunc(d.owners, func(e mEdge) bool { return e.UID == uid && e.BlockOwnerDeletion }) {
			c++
		}
	}
	return c
}

func (m *model) stats() Stats {
	s := Stats{PerResource: map[string]int{}}
	for _, n := range m.nodes {
		s.Nodes++
		switch n.kind {
		case mObserved:
			s.Observed++
			s.PerResource[n.ref.APIVersion+", Kind="+n.ref.Kind]++
		case mVirtual:
			s.Virtual++
		case mAbsent:
			s.Absent++
		}
		if n.waitingOrphan() {
			s.WaitingOrphan++
		}
		if n.deletingDependents() {
			s.WaitingForeground++
		}
	}
	for _, r := range m.fifo {
		if !r.hole {
			s.RetainedOrphans++
		}
	}
	return s
}

// retained lists the FIFO's slots oldest first, as retainedRefs does.
func (m *model) retained() []Ref {
	out := make([]Ref, 0, len(m.fifo))
	for _, r := range m.fifo {
		if r.hole {
			out = append(out, Ref{UID: holeUID})
		} else {
			out = append(out, r.ref)
		}
	}
	return out
}

func (m *model) deletingOwners() []types.UID {
	var out []types.UID
	for uid, n := range m.nodes {
		if n.kind == mObserved && n.deleting && n.finalizers != 0 {
			out = append(out, uid)
		}
	}
	slices.Sort(out)
	return out
}

// ---- comparison ----

func setToSlice(s map[types.UID]bool) []types.UID {
	var out []types.UID
	for u := range s {
		out = append(out, u)
	}
	return out
}

func sortRefs(rs []Ref) []Ref {
	slices.SortFunc(rs, func(a, b Ref) int { return strings.Compare(a.String(), b.String()) })
	return rs
}

// normalize sorts every list of e so that effects compare as sets, and
// turns empty lists into nil.
func normalize(e Effects) Effects {
	sortUIDs := func(s []types.UID) []types.UID {
		if len(s) == 0 {
			return nil
		}
		s = slices.Clone(s)
		slices.Sort(s)
		return s
	}
	e.AttemptDelete = sortUIDs(e.AttemptDelete)
	e.AttemptOrphan = sortUIDs(e.AttemptOrphan)
	e.Foreground = sortUIDs(e.Foreground)
	e.RecheckOwner = sortUIDs(e.RecheckOwner)
	if len(e.VerifyOwner) == 0 {
		e.VerifyOwner = nil
	} else {
		e.VerifyOwner = sortRefs(slices.Clone(e.VerifyOwner))
	}
	if len(e.InvalidNamespace) == 0 {
		e.InvalidNamespace = nil
	} else {
		e.InvalidNamespace = slices.Clone(e.InvalidNamespace)
		slices.SortFunc(e.InvalidNamespace, func(a, b InvalidRef) int {
			return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
		})
	}
	return e
}

func hasDuplicates(e Effects) bool {
	dupU := func(s []types.UID) bool {
		s = slices.Clone(s)
		slices.Sort(s)
		return len(slices.Compact(s)) != len(s)
	}
	if dupU(e.AttemptDelete) || dupU(e.AttemptOrphan) || dupU(e.Foreground) || dupU(e.RecheckOwner) {
		return true
	}
	seen := map[any]bool{}
	for _, r := range e.VerifyOwner {
		if seen[r] {
			return true
		}
		seen[r] = true
	}
	for _, r := range e.InvalidNamespace {
		if seen[r] {
			return true
		}
		seen[r] = true
	}
	return false
}

// compare applies ev to both and reports the first disagreement in the
// effects, the invariants or any query over the given UIDs.
func compare(g *Graph, m *model, ev Event, uids []types.UID) error {
	got := g.Apply(ev)
	want := m.apply(ev)
	if hasDuplicates(got) {
		return fmt.Errorf("effects hold duplicates: %+v", got)
	}
	if ng := normalize(got); !reflect.DeepEqual(ng, want) {
		return fmt.Errorf("effects differ\n got: %+v\nwant: %+v", ng, want)
	}
	if err := checkInvariants(g); err != nil {
		return err
	}
	for _, uid := range uids {
		gv, gok := g.Node(uid)
		mv, mok := m.node(uid)
		if gok != mok || !reflect.DeepEqual(gv, mv) {
			return fmt.Errorf("Node(%s) differs\n got: %+v %v\nwant: %+v %v", uid, gv, gok, mv, mok)
		}
		if go_, mo := g.Owners(uid), m.owners(uid); !reflect.DeepEqual(go_, mo) {
			return fmt.Errorf("Owners(%s) differs\n got: %+v\nwant: %+v", uid, go_, mo)
		}
		if gd, md := sortRefs(g.Dependents(uid)), m.dependentRefs(uid); !reflect.DeepEqual(gd, md) {
			return fmt.Errorf("Dependents(%s) differs\n got: %+v\nwant: %+v", uid, gd, md)
		}
		if gb, mb := g.BlockingDependents(uid), m.blocking(uid); gb != mb {
			return fmt.Errorf("BlockingDependents(%s) = %d, want %d", uid, gb, mb)
		}
	}
	if gs, ms := g.Stats(), m.stats(); !reflect.DeepEqual(gs, ms) {
		return fmt.Errorf("Stats differ\n got: %+v\nwant: %+v", gs, ms)
	}
	if gr, mr := retainedRefs(g), m.retained(); !slices.Equal(gr, mr) {
		return fmt.Errorf("retained orphans differ\n got: %+v\nwant: %+v", gr, mr)
	}
	gd := g.DeletingOwners()
	slices.Sort(gd)
	if md := m.deletingOwners(); !slices.Equal(gd, md) {
		return fmt.Errorf("DeletingOwners = %v, want %v", gd, md)
	}
	return nil
}

// ---- random event sequences ----

// chooser draws small integers: from a PRNG in the property test, from the
// fuzzer's bytes in FuzzGraph.
type chooser interface{ intn(n int) int }

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }

type byteChooser struct {
	data []byte
	done bool
}

func (c *byteChooser) intn(n int) int {
	if len(c.data) == 0 {
		c.done = true
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b) % n
}

// A small universe so that random sequences collide often: few UIDs (both
// compact and side-table spellings), kinds that share a group, namespaces
// including cluster scope.
var (
	genUIDs = []types.UID{
		"6f1e0000-0000-4000-8000-000000000001",
		"6f1e0000-0000-4000-8000-000000000002",
		"6f1e0000-0000-4000-8000-000000000003",
		"6f1e0000-0000-4000-8000-000000000004",
		"6f1e0000-0000-4000-8000-000000000005",
		"6F1E0000-0000-4000-8000-000000000006", // upper case: side table
		"uid-7",
		"",
	}
	genGVKs = [][2]string{{"v1", "Pod"}, {"apps/v1", "ReplicaSet"}, {"extensions/v1beta1", "ReplicaSet"}, {"v1", "Node"}}
	genNSs  = []string{"", "ns1", "ns2"}
	genRVs  = []string{"", "0", "007", "x1"}
)

// home is the identity each UID usually has.
func home(i int) Ref {
	gvk := genGVKs[i%len(genGVKs)]
	return Ref{APIVersion: gvk[0], Kind: gvk[1], Namespace: genNSs[i%len(genNSs)], Name: fmt.Sprintf("n%d", i%3), UID: genUIDs[i]}
}

func randomRef(c chooser) Ref {
	i := c.intn(len(genUIDs))
	r := home(i)
	if c.intn(8) == 0 {
		gvk := genGVKs[c.intn(len(genGVKs))]
		r.APIVersion, r.Kind = gvk[0], gvk[1]
	}
	if c.intn(10) == 0 {
		r.Namespace = genNSs[c.intn(len(genNSs))]
	}
	if c.intn(10) == 0 {
		r.Name = fmt.Sprintf("n%d", c.intn(3))
	}
	return r
}

type generator struct {
	c  chooser
	m  *model
	rv int
}

func (gen *generator) nextRV() string {
	gen.rv++
	if gen.c.intn(16) == 0 {
		return genRVs[gen.c.intn(len(genRVs))]
	}
	return strconv.Itoa(gen.rv)
}

func (gen *generator) event() Event {
	c := gen.c
	switch k := c.intn(20); {
	case k < 9:
		o := Object{Ref: randomRef(c), ResourceVersion: gen.nextRV(), Deleting: c.intn(4) == 0}
		if o.Deleting {
			o.Finalizers = Finalizers(c.intn(4))
		}
		for range c.intn(4) {
			r := randomRef(c)
			o.Owners = append(o.Owners, OwnerRef{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID,
				Controller: c.intn(2) == 0, BlockOwnerDeletion: c.intn(2) == 0})
		}
		return Event{Type: EventObserved, Object: o}
	case k < 12:
		// Re-observe a known object: mostly a no-op update, sometimes with
		// one GC-relevant change.
		n, uid := gen.pick(func(n *mNode) bool { return n.kind == mObserved })
		if n == nil {
			return Event{Type: EventDeleted, Object: Object{Ref: randomRef(c)}}
		}
		o := Object{Ref: n.ref, ResourceVersion: gen.nextRV(), Deleting: n.deleting, Finalizers: n.finalizers}
		o.UID = uid
		for _, e := range n.owners {
			o.Owners = append(o.Owners, e.OwnerRef)
		}
		switch c.intn(6) {
		case 0:
			o.Deleting, o.Finalizers = true, Finalizers(1+c.intn(3))
		case 3:
			// The orphaner (or a client switching to another policy)
			// removes the orphan finalizer; other finalizers may keep the
			// object Terminating.
			o.Finalizers &^= FinalizerOrphan
		case 1:
			if len(o.Owners) > 0 {
				i := c.intn(len(o.Owners))
				o.Owners[i].BlockOwnerDeletion = !o.Owners[i].BlockOwnerDeletion
			}
		case 2:
			if len(o.Owners) > 0 {
				o.Owners = o.Owners[1:]
			}
		}
		return Event{Type: EventObserved, Object: o}
	case k < 15:
		if n, uid := gen.pick(func(n *mNode) bool { return n.kind != mAbsent }); n != nil && c.intn(5) > 0 {
			r := n.ref
			r.UID = uid
			return Event{Type: EventDeleted, Object: Object{Ref: r}}
		}
		return Event{Type: EventDeleted, Object: Object{Ref: randomRef(c)}}
	case k < 19:
		// Answer a check for an existing claim, mostly.
		d, _ := gen.pick(func(n *mNode) bool { return len(n.owners) > 0 })
		if d == nil || c.intn(6) == 0 {
			return Event{Type: EventOwnerVerified, Owner: randomRef(c), Present: c.intn(2) == 0}
		}
		e := d.owners[c.intn(len(d.owners))]
		claim := Ref{APIVersion: e.APIVersion, Kind: e.Kind, Namespace: d.ref.Namespace, Name: e.Name, UID: e.UID}
		if c.intn(3) == 0 {
			claim.Namespace = ""
		}
		return Event{Type: EventOwnerVerified, Owner: claim, Present: c.intn(2) == 0}
	default:
		switch c.intn(4) {
		case 0:
			return Event{Type: EventType(c.intn(2) * 200), Object: Object{Ref: randomRef(c)}}
		case 1:
			// A resource of an apiVersion and kind nobody has.
			return Event{Type: EventUnwatched, Object: Object{Ref: Ref{APIVersion: "v9", Kind: "Nothing"}}}
		}
		gvk := genGVKs[c.intn(len(genGVKs))]
		return Event{Type: EventUnwatched, Object: Object{Ref: Ref{APIVersion: gvk[0], Kind: gvk[1]}}}
	}
}

// pick returns a random node of the model satisfying ok, deterministically.
func (gen *generator) pick(ok func(*mNode) bool) (*mNode, types.UID) {
	var uids []types.UID
	for uid, n := range gen.m.nodes {
		if ok(n) {
			uids = append(uids, uid)
		}
	}
	if len(uids) == 0 {
		return nil, ""
	}
	slices.Sort(uids)
	uid := uids[gen.c.intn(len(uids))]
	return gen.m.nodes[uid], uid
}

// runSequence drives n events (or until the chooser is exhausted) through
// a Graph and the model, comparing after each, with a FIFO of retain
// retained orphans. It returns the model, whose counters tell which paths
// ran.
func runSequence(c chooser, n int, done func() bool, retain int) (*model, error) {
	g, m := NewWithOptions(Options{RetainedOrphans: retain}), newModel(retain)
	gen := &generator{c: c, m: m}
	queried := append(slices.Clone(genUIDs), "not-there")
	var trace []Event
	for i := 0; i < n && !done(); i++ {
		ev := gen.event()
		trace = append(trace, ev)
		if i%7 == 6 {
			g.Compact() // freed interned ids are reused: every answer must stay the model's
		}
		if err := compare(g, m, ev, queried); err != nil {
			var b strings.Builder
			for j, ev := range trace {
				fmt.Fprintf(&b, "  %d: %s\n", j, formatEvent(ev))
			}
			return m, fmt.Errorf("after event %d: %v\ntrace:\n%s", i, err, b.String())
		}
	}
	return m, nil
}

// TestGraphMatchesModel drives random event sequences through the Graph and
// the naive model and compares every answer after every event.
func TestGraphMatchesModel(t *testing.T) {
	seeds, length := 300, 200
	if testing.Short() || raceEnabled {
		seeds = 60
	}
	// Small FIFOs so that eviction happens, and the default.
	retains := []int{1, 2, 3, DefaultRetainedOrphans}
	var recreated, evicted, tombstones, unwVirtual, unwReleased, unwOrphans int
	for seed := range seeds {
		c := randChooser{rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))}
		m, err := runSequence(c, length, func() bool { return false }, retains[seed%len(retains)])
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		recreated += m.recreated
		evicted += m.evicted
		tombstones += m.tombstones
		unwVirtual += m.unwatchedVirtual
		unwReleased += m.unwatchedReleased
		unwOrphans += m.unwatchedOrphans
	}
	t.Logf("unwatched objects: %d became virtual (%d orphaned), %d released", unwVirtual, unwOrphans, unwReleased)
	if unwVirtual == 0 || unwReleased == 0 || unwOrphans == 0 {
		t.Errorf("the generator did not exercise unwatched resources: %d virtual (%d orphaned), %d released", unwVirtual, unwOrphans, unwReleased)
	}
	t.Logf("orphaned tombstones %d, recreated from the FIFO %d, evicted %d", tombstones, recreated, evicted)
	if recreated == 0 || evicted == 0 || tombstones == 0 {
		t.Errorf("the generator did not exercise orphan deletion: %d tombstones, %d recreated, %d evicted", tombstones, recreated, evicted)
	}
}

// FuzzGraph interprets the input as a sequence of choices that generate
// events, and checks the Graph against the model after each.
func FuzzGraph(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("an ownerReference names an owner that was never observed"))
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		b := make([]byte, 512)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		// Long inputs add little: cap the sequence so every input runs fast.
		if _, err := runSequence(c, 150, func() bool { return c.done }, 2); err != nil {
			t.Fatal(err)
		}
	})
}

func formatEvent(ev Event) string {
	switch ev.Type {
	case EventObserved:
		o := ev.Object
		return fmt.Sprintf("Observed %s rv=%q deleting=%v fin=%s owners=%+v", o.Ref, o.ResourceVersion, o.Deleting, o.Finalizers, o.Owners)
	case EventDeleted:
		return fmt.Sprintf("Deleted %s", ev.Object.Ref)
	case EventOwnerVerified:
		return fmt.Sprintf("OwnerVerified %s present=%v", ev.Owner, ev.Present)
	case EventUnwatched:
		return fmt.Sprintf("Unwatched %s, Kind=%s", ev.Object.APIVersion, ev.Object.Kind)
	}
	return ev.Type.String()
}
