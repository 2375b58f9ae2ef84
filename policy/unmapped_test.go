package policy

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// unmappedRef marks o's reference as naming a kind without REST mapping.
func unmappedRef(o Owner) Owner {
	o.Unmapped = true
	return o
}

func retryUnmapped(uids ...types.UID) Decision {
	return Decision{Action: Retry, Reason: ReasonUnmappedOwner, Unmapped: uids}
}

// equalWithUnmapped is equalDecision that also compares Unmapped and After.
func equalWithUnmapped(a, b Decision) bool {
	return equalDecision(a, b) && slices.Equal(a.Unmapped, b.Unmapped) && a.After == b.After
}

// TestDecideUnmappedOwners: the rule for references whose kind has no REST mapping
// (keepUnmappedOwners, and the references removeStaleRefs and collectNever leave alone).
// Names starting with "never deletes" are the cases where a Delete would lose data.
func TestDecideUnmappedOwners(t *testing.T) {
	never := Collect{Mode: CollectNever, Rule: "never"}
	after := Collect{Mode: CollectAfter, After: time.Minute, Rule: "after"}
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "never deletes: the only owner is gone, its reference unmapped",
			in:   Input{Owners: owners(unmappedRef(dangling("o1")))},
			want: retryUnmapped("o1"),
		},
		{
			name: "never deletes: an owner waits for its dependents, its reference unmapped",
			in:   Input{Owners: owners(unmappedRef(waiting("o1"))), HasDependents: true},
			want: retryUnmapped("o1"),
		},
		{
			name: "never deletes: one of two gone owners unmapped",
			in:   Input{Owners: owners(dangling("o1"), unmappedRef(dangling("o2")))},
			want: retryUnmapped("o2"),
		},
		{
			name: "a solid owner: the mapped stale reference goes, the unmapped one stays",
			in:   Input{Owners: owners(solid("o1"), unmappedRef(dangling("o2")), dangling("o3"))},
			want: Decision{Action: RemoveRefs, Reason: ReasonStaleOwnerRefs, Owners: []types.UID{"o3"}, Unmapped: []types.UID{"o2"}},
		},
		{
			name: "a solid owner and only unmapped stale references: kept, retried",
			in:   Input{Owners: owners(solid("o1"), unmappedRef(dangling("o2")))},
			want: retryUnmapped("o2"),
		},
		{
			name: "a solid owner, an unknown one and an unmapped stale reference: kept, retried",
			in:   Input{Owners: owners(solid("o1"), unknown("o2"), unmappedRef(waiting("o3")))},
			want: retryUnmapped("o3"),
		},
		{
			name: "a UID on a mapped and an unmapped reference stays whole (the patch removes every reference with it)",
			in:   Input{Owners: owners(solid("o1"), dangling("o2"), unmappedRef(dangling("o2")), dangling("o3"))},
			want: Decision{Action: RemoveRefs, Reason: ReasonStaleOwnerRefs, Owners: []types.UID{"o3"}, Unmapped: []types.UID{"o2"}},
		},
		{
			name: "references to an orphaned owner go whatever the kinds of the others",
			in:   Input{Owners: owners(orphaned("o1"), unmappedRef(dangling("o2")))},
			want: removeOrphaned(true, "o1"),
		},
		{
			name: "an unverified owner: wait for it, as without the unmapped reference",
			in:   Input{Owners: owners(unknown("o1"), unmappedRef(dangling("o2")))},
			want: wait(),
		},
		{
			name: "being deleted: kept, nothing to retry",
			in:   Input{Owners: owners(unmappedRef(dangling("o1"))), BeingDeleted: true},
			want: keep(ReasonBeingDeleted),
		},
		{
			name: "Unmapped on a solid reference changes nothing",
			in:   Input{Owners: owners(unmappedRef(solid("o1")), dangling("o2"))},
			want: removeRefs("o2"),
		},
		{
			name: "Unmapped on an unknown reference changes nothing",
			in:   Input{Owners: owners(unmappedRef(unknown("o1")))},
			want: wait(),
		},
		{
			name: "collect: Never removes the mapped references to gone owners, not the unmapped",
			in:   Input{Owners: owners(dangling("o1"), unmappedRef(dangling("o2"))), Collect: never},
			want: Decision{Action: RemoveRefs, Reason: ReasonCollectNever, Owners: []types.UID{"o1"}, Unmapped: []types.UID{"o2"}},
		},
		{
			name: "collect: Never with only unmapped references: kept, retried",
			in:   Input{Owners: owners(unmappedRef(dangling("o1"))), Collect: never},
			want: retryUnmapped("o1"),
		},
		{
			name: "never deletes: collect: After asks for no orphaned-at time when it could never delete",
			in:   Input{Owners: owners(unmappedRef(dangling("o1"))), Collect: after, Now: t0},
			want: retryUnmapped("o1"),
		},
		{
			name: "never deletes: collect: After whose delay has passed",
			in:   Input{Owners: owners(unmappedRef(dangling("o1"))), Collect: after, OrphanedAt: t0, Now: t0.Add(time.Hour)},
			want: retryUnmapped("o1"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.in); !equalWithUnmapped(got, tt.want) {
				t.Errorf("Decide() = %v, want %v", got, tt.want)
			}
		})
	}
	if got, want := retryUnmapped("a", "b").String(), "Retry(UnmappedOwner) unmapped=[a b]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	kept := Decision{Action: RemoveRefs, Reason: ReasonStaleOwnerRefs, Owners: []types.UID{"a"}, Unmapped: []types.UID{"b"}}
	if got, want := kept.String(), "RemoveRefs(StaleOwnerRefs) owners=[a] unmapped=[b]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// keptForUnmapped is the model of the rule: what the collector did before the rule was part of
// the chain, after a decision taken without Owner.Unmapped. A RemoveRefs other than for
// orphaned owners loses the UIDs with an unmapped reference (kept and retried when none is
// left), and a Delete is refused (kept and retried). One change: collect: After (RecordOrphanedAt,
// Requeue), which the workers never checked, so a dependent whose delay had passed was deleted
// whatever its references named, is kept and retried as a Delete is.
func keptForUnmapped(in Input) Decision {
	plain := in
	plain.Owners = make([]Owner, len(in.Owners))
	var unmapped []types.UID
	for i, o := range in.Owners {
		plain.Owners[i] = Owner{UID: o.UID, State: o.State}
		if o.Unmapped && (o.State == Dangling || o.State == Waiting) && !slices.Contains(unmapped, o.UID) {
			unmapped = append(unmapped, o.UID)
		}
	}
	d := Decide(plain)
	if len(unmapped) == 0 {
		return d
	}
	switch d.Action {
	case RemoveRefs:
		if d.Reason == ReasonOwnerOrphaned {
			return d
		}
		var ok, kept []types.UID
		for _, uid := range d.Owners {
			if slices.Contains(unmapped, uid) {
				kept = append(kept, uid)
			} else {
				ok = append(ok, uid)
			}
		}
		if len(ok) == 0 {
			return retryUnmapped(unmapped...)
		}
		d.Owners, d.Unmapped = ok, kept
		return d
	case Delete, RecordOrphanedAt, Requeue:
		return retryUnmapped(unmapped...)
	}
	return d
}

// TestDecideUnmappedMatchesModel checks the chain against keptForUnmapped over every input with
// up to three references drawn from five states, two UIDs and both Unmapped values, under the
// flags that choose between keeping and deleting (in the foreground), and each kind of collect rule.
func TestDecideUnmappedMatchesModel(t *testing.T) {
	var choices []Owner
	for _, s := range []OwnerState{Unknown, Solid, Dangling, Waiting, Orphaned} {
		for _, u := range []types.UID{"a", "b"} {
			choices = append(choices, Owner{UID: u, State: s}, Owner{UID: u, State: s, Unmapped: true})
		}
	}
	var lists [][]Owner
	var build func(prefix []Owner)
	build = func(prefix []Owner) {
		lists = append(lists, slices.Clone(prefix))
		if len(prefix) == 3 {
			return
		}
		for _, c := range choices {
			build(append(prefix, c))
		}
	}
	build(nil)
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	collects := []struct {
		c       Collect
		at, now time.Time
	}{
		{},
		{c: Collect{Mode: CollectNever}},
		{c: Collect{Mode: CollectAfter, After: time.Minute}, now: t0},                          // no time recorded yet
		{c: Collect{Mode: CollectAfter, After: time.Minute}, at: t0, now: t0.Add(time.Second)}, // waiting
		{c: Collect{Mode: CollectAfter, After: time.Minute}, at: t0, now: t0.Add(time.Hour)},   // delay passed
	}
	n := 0
	for _, list := range lists {
		for flags := range 1 << 2 {
			for _, c := range collects {
				in := Input{
					Owners: list, HasDependents: flags&1 != 0, BeingDeleted: flags&2 != 0,
					Collect: c.c, OrphanedAt: c.at, Now: c.now,
				}
				got, want := Decide(in), keptForUnmapped(in)
				if !equalWithUnmapped(got, want) {
					t.Fatalf("%+v: %v, want %v", in, got, want)
				}
				if got.Action == Delete && in.hasUnmapped() {
					t.Fatalf("%+v: %v with an unmapped reference", in, got)
				}
				n++
			}
		}
	}
	t.Logf("checked %d inputs", n)
}

// TestRulesNeverDeleteForUnmapped runs every rule of AttemptToDelete on its own: none deletes a
// dependent with an unmapped reference to a gone or waiting owner (the last reference of each
// input), nor removes that reference, whatever the order of the chain.
func TestRulesNeverDeleteForUnmapped(t *testing.T) {
	inputs := []Input{
		{Owners: owners(unmappedRef(dangling("o1")))},
		{Owners: owners(unmappedRef(waiting("o1"))), HasDependents: true},
		{Owners: owners(dangling("o1"), unmappedRef(waiting("o2"))), HasDependents: true, DependentDeletingDependents: true},
		{Owners: owners(unmappedRef(dangling("o1"))), OrphanFinalizer: true},
		{Owners: owners(unmappedRef(dangling("o1"))), Collect: Collect{Mode: CollectAfter, After: time.Second}, OrphanedAt: time.Unix(1, 0), Now: time.Unix(100, 0)},
	}
	for i, rule := range AttemptToDelete {
		for _, in := range inputs {
			if d, ok := rule(in); ok && (d.Action == Delete || d.Action == RemoveRefs && slices.Contains(d.Owners, in.Owners[len(in.Owners)-1].UID)) {
				t.Errorf("rule %d: %v on %+v", i, d, in)
			}
		}
	}
}
