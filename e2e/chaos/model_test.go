package chaos

import (
	"fmt"
	"testing"
	"time"
)

// The oracle's rules on small graphs whose outcome Kubernetes documents.
func TestOracle(t *testing.T) {
	kinds := map[string]KindInfo{
		"v1/ConfigMap":  {Namespaced: true, Known: true},
		"x/v1/Gadget":   {Namespaced: false, Known: true},
		"ghost/v1/Nope": {Namespaced: true, Known: false},
		"x/v1/Flash1":   {Namespaced: true, Known: true, Vanished: true},
	}
	cm := func(uid, ns string, del Deletion, refs ...Ref) *Obj {
		return &Obj{UID: uid, GK: "v1/ConfigMap", Namespace: ns, Name: uid, Namespaced: true, Deletion: del, Refs: refs}
	}
	gadget := func(uid string, del Deletion, refs ...Ref) *Obj {
		return &Obj{UID: uid, GK: "x/v1/Gadget", Name: uid, Deletion: del, Refs: refs}
	}
	to := func(o *Obj, block bool) Ref {
		i := len(o.GK) - 1
		for o.GK[i] != '/' {
			i--
		}
		return Ref{APIVersion: o.GK[:i], Kind: o.GK[i+1:], Name: o.Name, UID: o.UID, Block: block}
	}
	never := Ref{APIVersion: "v1", Kind: "ConfigMap", Name: "never", UID: "never"}
	unknown := Ref{APIVersion: "ghost/v1", Kind: "Nope", Name: "p", UID: "p"}

	type want map[string]Fate
	cases := []struct {
		name string
		objs func() []*Obj
		want want
		held []string // FinalizerMayStay
	}{
		{"background: dependents of a gone owner go, a live co-owner keeps one", func() []*Obj {
			o := cm("o", "a", Gone)
			l := cm("l", "a", NotDeleted)
			return []*Obj{o, l, cm("d1", "a", NotDeleted, to(o, false)), cm("d2", "a", NotDeleted, to(o, false), to(l, false))}
		}, want{"d1": MustBeGone, "d2": MustExist, "l": MustExist}, nil},
		{"never-existing UID and cross-namespace owner are absent", func() []*Obj {
			other := cm("x", "b", NotDeleted)
			return []*Obj{other, cm("d1", "a", NotDeleted, never), cm("d2", "a", NotDeleted, to(other, false))}
		}, want{"d1": MustBeGone, "d2": MustBeGone, "x": MustExist}, nil},
		{"same name, other UID: absent", func() []*Obj {
			now := cm("n", "a", NotDeleted)
			stale := to(now, false)
			stale.UID = "old"
			return []*Obj{now, cm("d", "a", NotDeleted, stale)}
		}, want{"d": MustBeGone}, nil},
		{"unresolvable references keep the dependent", func() []*Obj {
			ns := cm("o", "a", NotDeleted)
			return []*Obj{ns, cm("d1", "a", NotDeleted, unknown, never), gadget("g", NotDeleted, to(ns, false), never)}
		}, want{"d1": MustExist, "g": MustExist}, nil},
		{"namespaced dependent of a cluster-scoped owner", func() []*Obj {
			g := gadget("g", DeletedBackground)
			return []*Obj{g, cm("d", "a", NotDeleted, to(g, true))}
		}, want{"g": MustBeGone, "d": MustBeGone}, nil},
		{"orphan: dependents lose the reference and stay", func() []*Obj {
			o := cm("o", "a", DeletedOrphan)
			return []*Obj{o, cm("d", "a", NotDeleted, to(o, true))}
		}, want{"o": MustBeGone, "d": MustExist}, nil},
		{"orphan racing a dangling reference: either", func() []*Obj {
			o := cm("o", "a", DeletedOrphan)
			return []*Obj{o, cm("d", "a", NotDeleted, to(o, false), never)}
		}, want{"o": MustBeGone, "d": Either}, nil},
		{"a collected dependent with its own orphan finalizer orphans its dependents", func() []*Obj {
			o := cm("o", "a", Gone)
			d := cm("d", "a", NotDeleted, to(o, false))
			d.Own = "orphan"
			return []*Obj{o, d, cm("leaf", "a", NotDeleted, to(d, true))}
		}, want{"d": MustBeGone, "leaf": MustExist}, nil},
		{"a collected dependent with its own foregroundDeletion finalizer takes its dependents", func() []*Obj {
			o := cm("o", "a", Gone)
			d := cm("d", "a", NotDeleted, to(o, false))
			d.Own = "foregroundDeletion"
			return []*Obj{o, d, cm("leaf", "a", NotDeleted, to(d, true))}
		}, want{"d": MustBeGone, "leaf": MustBeGone}, nil},
		{"an own orphan finalizer yields to the foreground cascade of a waiting owner", func() []*Obj {
			w := cm("w", "a", DeletedForeground)
			d := cm("d", "a", NotDeleted, to(w, true))
			d.Own = "orphan"
			return []*Obj{w, d, cm("leaf", "a", NotDeleted, to(d, true))}
		}, want{"w": MustBeGone, "d": MustBeGone, "leaf": MustBeGone}, nil},
		{"a reference to a kind whose CRD went: either (collected by a collector that saw it go)", func() []*Obj {
			flash := Ref{APIVersion: "x/v1", Kind: "Flash1", Name: "f", UID: "f"}
			live := cm("l", "a", NotDeleted)
			return []*Obj{live, cm("d", "a", NotDeleted, flash), cm("d2", "a", NotDeleted, flash, to(live, false))}
		}, want{"d": Either, "d2": MustExist, "l": MustExist}, nil},
		{"foreground chain goes entirely", func() []*Obj {
			w := cm("w", "a", DeletedForeground)
			c := cm("c", "a", NotDeleted, to(w, true))
			return []*Obj{w, c, cm("gc", "a", NotDeleted, to(c, true))}
		}, want{"w": MustBeGone, "c": MustBeGone, "gc": MustBeGone}, nil},
		{"foreground: a dependent with another live owner stays and stops blocking", func() []*Obj {
			w := cm("w", "a", DeletedForeground)
			l := cm("l", "a", NotDeleted)
			return []*Obj{w, l, cm("d", "a", NotDeleted, to(w, true), to(l, false))}
		}, want{"w": MustBeGone, "d": MustExist}, nil},
		{"blockOwnerDeletion cycle under foreground completes", func() []*Obj {
			a := cm("a1", "a", DeletedForeground)
			b := cm("b1", "a", NotDeleted)
			a.Refs = []Ref{to(b, true)}
			b.Refs = []Ref{to(a, true)}
			return []*Obj{a, b}
		}, want{"a1": MustBeGone, "b1": MustBeGone}, nil},
		{"a blocking dependent that can never go holds its owner", func() []*Obj {
			w := cm("w", "a", DeletedForeground)
			return []*Obj{w, cm("d", "a", NotDeleted, to(w, true), unknown)}
		}, want{"w": MustExist, "d": MustExist}, []string{"w"}},
		{"a present owner: references to waiting owners go whatever the unresolvable ones", func() []*Obj {
			// CI form, seed 1: pod-170 (a Phantom reference, rc-501 waiting, a present Widget)
			w := cm("w", "a", DeletedForeground)
			l := cm("l", "a", NotDeleted)
			w.Refs = []Ref{{APIVersion: "v1", Kind: "ConfigMap", Name: "d", UID: "d", Block: true}}
			return []*Obj{w, l, cm("d", "a", NotDeleted, unknown, to(w, true), to(l, true))}
		}, want{"w": MustBeGone, "d": MustExist, "l": MustExist}, nil},
		{"a present owner keeps a reference whose UID an unresolvable one names too", func() []*Obj {
			w := cm("w", "a", DeletedForeground)
			l := cm("l", "a", NotDeleted)
			alias := unknown
			alias.UID = "w"
			return []*Obj{w, l, cm("d", "a", NotDeleted, alias, to(w, true), to(l, false))}
		}, want{"w": MustExist, "d": MustExist, "l": MustExist}, []string{"w"}},
		{"no references: never collected", func() []*Obj {
			return []*Obj{cm("d", "a", NotDeleted)}
		}, want{"d": MustExist}, nil},
		{"unknown delete policy: dependents either", func() []*Obj {
			o := cm("o", "a", DeletedUnknown)
			return []*Obj{o, cm("d", "a", NotDeleted, to(o, false))}
		}, want{"o": MustBeGone, "d": Either}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			or := &Oracle{Kinds: kinds, Objs: map[string]*Obj{}, Seed: 7}
			for _, o := range c.objs() {
				or.Objs[o.UID] = o
			}
			v := or.Verdicts()
			for uid, f := range c.want {
				if v[uid].Fate != f {
					t.Errorf("%s: %s, want %s", uid, v[uid].Fate, f)
				}
			}
			for uid, vd := range v {
				if vd.FinalizerMayStay != contains(c.held, uid) {
					t.Errorf("%s: finalizer may stay %v", uid, vd.FinalizerMayStay)
				}
			}
		})
	}
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

// An orphaned owner named by a reference with other coordinates (here an unserved version, in
// another namespace): the in-tree collector removes it by UID, cascade may keep it; the
// dependent, whose other owner is gone, is "either".
func TestOracleMismatchedOrphanClaim(t *testing.T) {
	or := &Oracle{Kinds: map[string]KindInfo{"v1/ConfigMap": {Namespaced: true, Known: true}}, Objs: map[string]*Obj{}, Seed: 3}
	or.Objs["o"] = &Obj{UID: "o", GK: "v1/ConfigMap", Namespace: "a", Name: "o", Namespaced: true, Deletion: DeletedOrphan}
	or.Objs["d"] = &Obj{UID: "d", GK: "v1/ConfigMap", Namespace: "b", Name: "d", Namespaced: true,
		Refs: []Ref{{APIVersion: "v1alpha9", Kind: "ConfigMap", Name: "o", UID: "o"}, {APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "never"}}}
	v := or.Verdicts()
	if v["d"].Fate != Either || v["o"].Fate != MustBeGone {
		t.Fatalf("d %s, o %s; want either, must be gone", v["d"].Fate, v["o"].Fate)
	}
}

// Found by the CI form (seed 1): a dependent of an owner deleted with orphan, of an owner
// deleted in the background and of a live object that is itself garbage. Whether the collector
// first removes the references that became dangling (the orphaning owner still present) or
// first orphans decides whether the dependent keeps no reference (kept) or only dangling ones
// (collected): either. The oracle must let the dependent act between the other owner going
// and the orphaning, which a pass firing everything at once did not.
func TestOracleOrphanRaceAcrossPasses(t *testing.T) {
	kinds := map[string]KindInfo{"v1/ConfigMap": {Namespaced: true, Known: true}}
	cm := func(uid string, del Deletion, refs ...string) *Obj {
		o := &Obj{UID: uid, GK: "v1/ConfigMap", Namespace: "a", Name: uid, Namespaced: true, Deletion: del}
		for _, r := range refs {
			o.Refs = append(o.Refs, Ref{APIVersion: "v1", Kind: "ConfigMap", Name: r, UID: r})
		}
		return o
	}
	or := &Oracle{Kinds: kinds, Objs: map[string]*Obj{}, Seed: 5}
	for _, o := range []*Obj{cm("o", DeletedOrphan), cm("r", DeletedBackground), cm("s", NotDeleted, "never"), cm("d", NotDeleted, "o", "r", "s")} {
		or.Objs[o.UID] = o
	}
	if v := or.Verdicts(); v["d"].Fate != Either {
		t.Fatalf("d: %s, want either", v["d"].Fate)
	}
}

// Found by the CI form: a Pod deleted without finalizers may stay Terminating (graceful
// deletion, no kubelet); what it owns is then kept by it, so its dependent is "either".
func TestOracleLingeringPod(t *testing.T) {
	or := &Oracle{Kinds: map[string]KindInfo{"v1/Pod": {Namespaced: true, Known: true}, "v1/ConfigMap": {Namespaced: true, Known: true}}, Objs: map[string]*Obj{}, Seed: 9}
	or.Objs["p"] = &Obj{UID: "p", GK: "v1/Pod", Namespace: "a", Name: "p", Namespaced: true, Deletion: DeletedBackground, MayLinger: true}
	or.Objs["d"] = &Obj{UID: "d", GK: "v1/ConfigMap", Namespace: "a", Name: "d", Namespaced: true, Refs: []Ref{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "p"}}}
	v := or.Verdicts()
	if v["p"].Fate != Either || v["d"].Fate != Either {
		t.Fatalf("p %s, d %s; want either, either", v["p"].Fate, v["d"].Fate)
	}
}

// Found by the CI form (seed 1, dep-934): the driver learns of deletions the collector made
// (reading an object back Terminating) later than of the references the collector removed
// before them. Here the collector deleted d in the foreground (its owners: a gone one, one
// waiting forever), y (blocking d, with a solid owner x) lost its reference to d, d went; w and
// x were deleted in the foreground after that, as d's and w's dependents. The driver's record
// holds w's and x's deletions but not y's lost reference: taken as where everything started,
// x was never solid, y could never release d, and d "must exist". A deletion the driver only
// observed may have started at any point of the collector's work: d is "either".
func TestOracleCollectorDeletionsObservedLate(t *testing.T) {
	kinds, unknown, cm, to := cmWorld()
	w := cm("w", DeletedForeground, to("d", false))
	x := cm("x", DeletedForeground, to("w", true))
	w.DeletionObserved, x.DeletionObserved = true, true
	or := &Oracle{Kinds: kinds, Objs: map[string]*Obj{}, Seed: 1}
	for _, o := range []*Obj{
		cm("a", Gone),
		cm("r", DeletedForeground), cm("z", NotDeleted, to("r", true), unknown), // r waits forever
		cm("d", NotDeleted, to("a", false), to("r", false)),
		w, x,
		cm("y", NotDeleted, to("d", true), to("x", true)),
		cm("p", NotDeleted, to("y", true), unknown), // y, once deleted, waits forever
	} {
		or.Objs[o.UID] = o
	}
	if v := or.Verdicts(); v["d"].Fate != Either {
		t.Fatalf("d: %s, want either", v["d"].Fate)
	}
}

// Found by the CI form (seed 1, spr-12 and wid-669): o was deleted in the foreground and the
// collector finished it before the end (its finalizer gone); while it waited, the collector
// deleted its dependent d in the foreground (d has a dependent of its own), and d now waits for
// ever on x, a blocking dependent that can never be collected (a reference to a kind without
// REST mapping). Taking o as deleted in the background, d "must be gone"; the driver cannot
// tell which happened, so d is "either". The same for a custom resource deleted with its CRD,
// Deleted with its CRD while it carried the orphan finalizer, o orphans d (d stays, its reference
// removed) or had been deleted in the foreground by the collector first (d deleted in the
// foreground too, waiting for ever for x): d must exist either way.
func TestOracleMaybeForeground(t *testing.T) {
	kinds, unknown, cm, to := cmWorld()
	for _, tc := range []struct {
		del  Deletion
		want Fate
	}{{DeletedBackground, MustBeGone}, {DeletedMaybeForeground, Either}, {DeletedMaybeOrphan, MustExist}} {
		or := &Oracle{Kinds: kinds, Objs: map[string]*Obj{}, Seed: 1}
		for _, o := range []*Obj{cm("o", tc.del), cm("d", NotDeleted, to("o", true)), cm("x", NotDeleted, to("d", true), unknown)} {
			or.Objs[o.UID] = o
		}
		v := or.Verdicts()
		if v["d"].Fate != tc.want || v["x"].Fate != MustExist {
			t.Errorf("owner %v: d %s, x %s; want d %s, x must exist", tc.del, v["d"].Fate, v["x"].Fate, tc.want)
		}
	}
}

// cmWorld is the oracle's world of the tests above: ConfigMaps in namespace "a" and a kind
// without REST mapping (unknown: a reference to it), with builders for objects and references.
func cmWorld() (map[string]KindInfo, Ref, func(uid string, del Deletion, refs ...Ref) *Obj, func(uid string, block bool) Ref) {
	kinds := map[string]KindInfo{"v1/ConfigMap": {Namespaced: true, Known: true}, "ghost/v1/Nope": {Namespaced: true, Known: false}}
	unknown := Ref{APIVersion: "ghost/v1", Kind: "Nope", Name: "p", UID: "p"}
	cm := func(uid string, del Deletion, refs ...Ref) *Obj {
		return &Obj{UID: uid, GK: "v1/ConfigMap", Namespace: "a", Name: uid, Namespaced: true, Deletion: del, Refs: refs}
	}
	to := func(uid string, block bool) Ref {
		return Ref{APIVersion: "v1", Kind: "ConfigMap", Name: uid, UID: uid, Block: block}
	}
	return kinds, unknown, cm, to
}

// Found by the CI form (seed 1, rc-775): o was deleted in the foreground, d (its dependent, with
// an owner that never existed) was collected in the background, having no dependent then, and
// only afterwards x, which can never be collected (a reference to a kind without REST mapping),
// was created with a blocking reference to d. On the final snapshot d has a dependent, so the
// oracle had it deleted in the foreground, waiting for x for ever: "must exist". A dependent
// whose reference was written after every owner of d was deleted may have come after the
// decision: d is "either". Written before that, x was there at every decision: d waits.
func TestOracleLateDependent(t *testing.T) {
	kinds, unknown, cm, to := cmWorld()
	t0 := time.Date(2026, 11, 23, 9, 12, 26, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		dependent time.Time
		want      Fate
	}{
		{"dependent written after the owner's deletion", t0.Add(18 * time.Second), Either},
		{"dependent written before the owner's deletion", t0.Add(-time.Second), MustExist},
	} {
		or := &Oracle{Kinds: kinds, Objs: map[string]*Obj{}, Seed: 1}
		o := cm("o", DeletedForeground)
		o.DeletedAt = t0
		d := cm("d", NotDeleted, to("o", true), to("never", false)) // blocking: o waits for d
		d.RefAdded = map[string]time.Time{"o": t0.Add(-8 * time.Second), "never": t0.Add(-2 * time.Second)}
		x := cm("x", NotDeleted, unknown, to("d", true))
		x.RefAdded = map[string]time.Time{"p": tc.dependent, "d": tc.dependent}
		for _, obj := range []*Obj{o, d, x} {
			or.Objs[obj.UID] = obj
		}
		v := or.Verdicts()
		if v["d"].Fate != tc.want || v["x"].Fate != MustExist {
			t.Errorf("%s: d %s, x %s; want d %s, x must exist", tc.name, v["d"].Fate, v["x"].Fate, tc.want)
		}
	}
}

// Found by the CI form (seed 1, cm-771): d references a present owner a and an owner o waiting
// in the foreground, and has a blocking dependent x that can never go. If the collector comes
// to d while a is present, d loses its reference to o and is collected in the background once a
// goes; if it comes to d only after a went (a chain of collections), d is deleted in the
// foreground and waits for x for ever. Random orders seldom delay d that long: the oracle also
// runs every order with the removals of references last. d is "either".
func TestOracleRemovalsLast(t *testing.T) {
	kinds, unknown, cm, to := cmWorld()
	or := &Oracle{Kinds: kinds, Objs: map[string]*Obj{}, Seed: 1}
	objs := []*Obj{cm("g0", Gone), cm("o", DeletedForeground), cm("x", NotDeleted, to("d", true), unknown)}
	for i := 1; i <= 8; i++ { // a = g8, collected after a chain of 8 collections
		objs = append(objs, cm(fmt.Sprintf("g%d", i), NotDeleted, to(fmt.Sprintf("g%d", i-1), false)))
	}
	objs = append(objs, cm("d", NotDeleted, to("g8", false), to("o", true)))
	for _, o := range objs {
		or.Objs[o.UID] = o
	}
	v := or.Verdicts()
	if v["d"].Fate != Either || !v["d"].FinalizerMayStay || v["g8"].Fate != MustBeGone {
		t.Errorf("d %+v, g8 %s; want d either (perhaps waiting in the foreground), g8 must be gone", v["d"], v["g8"].Fate)
	}
}

// TestOracleGoneKind: a reference to a version no API serves of a kind whose CRD went during
// the run may be taken as absent (issue 22.4b: no object of the kind existed meanwhile), so a
// namespaced dependent is "either"; a cluster-scoped dependent of that namespaced kind is kept.
func TestOracleGoneKind(t *testing.T) {
	or := &Oracle{
		Kinds:     map[string]KindInfo{"v1/ConfigMap": {Namespaced: true, Known: true}, "chaos.cascade.dev/v1/Widget": {Namespaced: true, Known: true}},
		GoneKinds: map[string]bool{"chaos.cascade.dev/Widget": true},
		Objs:      map[string]*Obj{}, Seed: 5,
	}
	ref := Ref{APIVersion: "chaos.cascade.dev/v1alpha9", Kind: "Widget", Name: "w", UID: "w"}
	or.Objs["d"] = &Obj{UID: "d", GK: "v1/ConfigMap", Namespace: "a", Name: "d", Namespaced: true, Refs: []Ref{ref}}
	or.Objs["c"] = &Obj{UID: "c", GK: "v1/Namespace", Name: "c", Refs: []Ref{ref}}
	v := or.Verdicts()
	if v["d"].Fate != Either {
		t.Errorf("namespaced dependent: %v, want either", v["d"].Fate)
	}
	if v["c"].Fate != MustExist {
		t.Errorf("cluster-scoped dependent: %v, want must exist", v["c"].Fate)
	}
}

// An owner that carried the orphan finalizer and went unseen (deleted by the collector between
// two of the driver's reads: DeletedUnknown, observed) may have been deleted in the foreground
// (the collector's cycle rule): a dependent whose only reference is to it may be collected, or
// orphaned and kept, not "must exist".
func TestOracleUnseenDeletion(t *testing.T) {
	or := &Oracle{Kinds: map[string]KindInfo{"v1/ConfigMap": {Namespaced: true, Known: true}, "apps/v1/Deployment": {Namespaced: true, Known: true}}, Objs: map[string]*Obj{}, Seed: 9}
	or.Objs["o"] = &Obj{UID: "o", GK: "apps/v1/Deployment", Namespace: "a", Name: "o", Namespaced: true, Own: "orphan", Deletion: DeletedUnknown, DeletionObserved: true}
	or.Objs["d"] = &Obj{UID: "d", GK: "v1/ConfigMap", Namespace: "a", Name: "d", Namespaced: true, Own: "orphan",
		Refs: []Ref{{APIVersion: "apps/v1", Kind: "Deployment", Name: "o", UID: "o", Block: true}}}
	if f := or.Verdicts()["d"].Fate; f != Either {
		t.Errorf("dependent of an owner gone unseen: %v, want either", f)
	}
}
