package policy

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var (
	t0      = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	never   = Collect{Mode: CollectNever, Rule: "rules[0]"}
	after1m = Collect{Mode: CollectAfter, After: time.Minute, Rule: "rules[0]"}
)

// TestDecideCollect: the collect rules replace a delete, and only a delete.
func TestDecideCollect(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "Never: every owner gone: the refs go, the dependent stays",
			in:   Input{Owners: owners(dangling("o1"), dangling("o2")), Collect: never},
			want: Decision{Action: RemoveRefs, Reason: ReasonCollectNever, Owners: []types.UID{"o1", "o2"}},
		},
		{
			name: "Never: an owner waiting in the foreground loses the ref instead of waiting for a delete",
			in:   Input{Owners: owners(waiting("o1")), HasDependents: true, Collect: never},
			want: Decision{Action: RemoveRefs, Reason: ReasonCollectNever, Owners: []types.UID{"o1"}},
		},
		{
			name: "Never: a solid owner: stale refs go as built in",
			in:   Input{Owners: owners(solid("o1"), dangling("o2")), Collect: never},
			want: removeRefs("o2"),
		},
		{
			name: "Never: an unverified owner: wait as built in",
			in:   Input{Owners: owners(dangling("o1"), unknown("o2")), Collect: never},
			want: wait(),
		},
		{
			name: "Never: an orphaned owner: its ref goes as built in",
			in:   Input{Owners: owners(orphaned("o1")), Collect: never},
			want: removeOrphaned(false, "o1"),
		},
		{
			name: "Never: being deleted: kept as built in",
			in:   Input{Owners: owners(dangling("o1")), BeingDeleted: true, Collect: never},
			want: keep(ReasonBeingDeleted),
		},
		{
			name: "After: not recorded yet: record now, decide again after the delay",
			in:   Input{Owners: owners(dangling("o1")), Collect: after1m, Now: t0},
			want: Decision{Action: RecordOrphanedAt, Reason: ReasonCollectAfter, After: time.Minute},
		},
		{
			name: "After: recorded 20s ago: 40s left",
			in:   Input{Owners: owners(dangling("o1")), Collect: after1m, OrphanedAt: t0, Now: t0.Add(20 * time.Second)},
			want: Decision{Action: Requeue, Reason: ReasonCollectAfter, After: 40 * time.Second},
		},
		{
			name: "After: the delay passed: deleted as built in",
			in:   Input{Owners: owners(dangling("o1")), Collect: after1m, OrphanedAt: t0, Now: t0.Add(time.Minute)},
			want: deleteWith(ReasonOwnersGone, metav1.DeletePropagationBackground),
		},
		{
			name: "After: the delay passed: the dependent's own finalizer still picks the propagation",
			in:   Input{Owners: owners(dangling("o1")), OrphanFinalizer: true, Collect: after1m, OrphanedAt: t0, Now: t0.Add(time.Hour)},
			want: deleteWith(ReasonOwnersGone, metav1.DeletePropagationOrphan),
		},
		{
			name: "After: a recorded time in the future counts as now",
			in:   Input{Owners: owners(dangling("o1")), Collect: after1m, OrphanedAt: t0.Add(time.Hour), Now: t0},
			want: Decision{Action: Requeue, Reason: ReasonCollectAfter, After: time.Minute},
		},
		{
			name: "After: a foreground owner waits for the delay too",
			in:   Input{Owners: owners(waiting("o1")), HasDependents: true, Collect: after1m, OrphanedAt: t0, Now: t0.Add(30 * time.Second)},
			want: Decision{Action: Requeue, Reason: ReasonCollectAfter, After: 30 * time.Second},
		},
		{
			name: "After: a solid owner: kept as built in, nothing recorded",
			in:   Input{Owners: owners(solid("o1")), Collect: after1m, Now: t0},
			want: keep(ReasonSolidOwner),
		},
		{
			name: "no rule: deleted as built in",
			in:   Input{Owners: owners(dangling("o1")), Now: t0},
			want: deleteWith(ReasonOwnersGone, metav1.DeletePropagationBackground),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			if !equalDecision(got, tt.want) || got.After != tt.want.After {
				t.Errorf("Decide() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCollectRulesNeverAddDeletes is the safety property of the policy: over every input of
// TestDecideInvariants's kind, with every collect rule and times around its delay, a decision
// is a Delete only when the decision without the policy is the same Delete; and where the
// built-in decision is not a Delete, the policy changes nothing.
func TestCollectRulesNeverAddDeletes(t *testing.T) {
	states := []OwnerState{Unknown, Solid, Dangling, Waiting, Orphaned}
	var lists [][]Owner
	for _, a := range states {
		lists = append(lists, owners(Owner{UID: "a", State: a}))
		for _, b := range states {
			lists = append(lists, owners(Owner{UID: "a", State: a}, Owner{UID: "b", State: b}), owners(Owner{UID: "a", State: a}, Owner{UID: "a", State: b}))
		}
	}
	lists = append(lists, nil)
	collects := []Collect{{}, never, after1m, {Mode: CollectMode(9)}}
	times := []struct{ at, now time.Time }{{}, {t0, t0}, {t0, t0.Add(time.Minute)}, {t0, t0.Add(-time.Hour)}, {time.Time{}, t0}}
	n := 0
	for _, list := range lists {
		for flags := range 1 << 5 {
			base := Input{
				Owners: list, HasDependents: flags&1 != 0, DependentDeletingDependents: flags&2 != 0,
				OrphanFinalizer: flags&4 != 0, ForegroundFinalizer: flags&8 != 0, BeingDeleted: flags&16 != 0,
			}
			builtin := Decide(base)
			for _, c := range collects {
				for _, tm := range times {
					in := base
					in.Collect, in.OrphanedAt, in.Now = c, tm.at, tm.now
					got := Decide(in)
					n++
					switch {
					case got.Action == Delete && !equalDecision(got, builtin):
						t.Fatalf("%+v: %v, but without the policy %v", in, got, builtin)
					case builtin.Action != Delete && !equalDecision(got, builtin):
						t.Fatalf("%+v: %v changes %v, which is not a delete", in, got, builtin)
					case got.Action == RemoveRefs && got.Reason == ReasonCollectNever && !slices.Equal(got.Owners, base.removable()):
						t.Fatalf("%+v: Never removes %v, want the gone owners %v", in, got.Owners, base.removable())
					}
				}
			}
		}
	}
	t.Logf("checked %d inputs", n)
}

func TestOrphanedAtAnnotation(t *testing.T) {
	v := FormatOrphanedAt(t0.Add(1500*time.Millisecond), []types.UID{"u2", "u1", "u2"})
	if want := "2026-05-01T10:00:02Z owners=u1,u2"; v != want {
		t.Fatalf("FormatOrphanedAt() = %q, want %q (rounded up, owners sorted once)", v, want)
	}
	if got := FormatOrphanedAt(t0.In(time.FixedZone("x", 3600)), []types.UID{"u1"}); got != "2026-05-01T10:00:00Z owners=u1" {
		t.Errorf("FormatOrphanedAt() = %q, want UTC and no rounding of a whole second", got)
	}
	for _, tt := range []struct {
		value  string
		owners []types.UID
		want   time.Time
		ok     bool
	}{
		{v, []types.UID{"u1", "u2"}, t0.Add(2 * time.Second), true},
		{v, []types.UID{"u2", "u1"}, t0.Add(2 * time.Second), true},
		{v, []types.UID{"u1"}, time.Time{}, false}, // other owners: recorded for another loss
		{v, []types.UID{"u1", "u2", "u3"}, time.Time{}, false},
		{"2026-05-01T10:00:00Z", []types.UID{"u1"}, time.Time{}, false},
		{"yesterday owners=u1", []types.UID{"u1"}, time.Time{}, false},
		{"", nil, time.Time{}, false},
	} {
		got, ok := ParseOrphanedAt(tt.value, tt.owners)
		if !got.Equal(tt.want) || ok != tt.ok {
			t.Errorf("ParseOrphanedAt(%q, %v) = %v, %t; want %v, %t", tt.value, tt.owners, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseCollect(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Collect
		ok   bool
	}{
		{"Never", Collect{Mode: CollectNever}, true},
		{"After 20s", Collect{Mode: CollectAfter, After: 20 * time.Second}, true},
		{"After 1h30m", Collect{Mode: CollectAfter, After: 90 * time.Minute}, true},
		{"After 1s", Collect{Mode: CollectAfter, After: time.Second}, true},
		{"After 999ms", Collect{}, false},
		{"After", Collect{}, false},
		{"after 1m", Collect{}, false},
		{"", Collect{}, false},
	} {
		got, err := ParseCollect(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseCollect(%q) = %+v, %v; want %+v, ok %t", tt.in, got, err, tt.want, tt.ok)
		}
	}
	if CollectNever.String() != "Never" || CollectAfter.String() != "After" || CollectAsBuiltIn.String() != "AsBuiltIn" || CollectMode(7).String() != "CollectMode(?)" {
		t.Error("CollectMode strings")
	}
	if got := (Decision{Action: Requeue, Reason: ReasonCollectAfter, After: time.Second}).String(); got != "Requeue(CollectAfter) after=1s" {
		t.Errorf("String() = %q", got)
	}
	if RecordOrphanedAt.String() != "RecordOrphanedAt" {
		t.Error("RecordOrphanedAt string")
	}
}

// TestRemovableInPlaceMatchesMaps: the in-place comparison of short reference lists answers as
// the map version does, over every list of up to three references from five states and three
// UIDs, for each set of states the rules ask about.
func TestRemovableInPlaceMatchesMaps(t *testing.T) {
	states := []OwnerState{Unknown, Solid, Dangling, Waiting, Orphaned}
	var lists [][]Owner
	var build func(prefix []Owner)
	build = func(prefix []Owner) {
		lists = append(lists, slices.Clone(prefix))
		if len(prefix) == 3 {
			return
		}
		for _, s := range states {
			for _, u := range []types.UID{"a", "b", "c"} {
				build(append(prefix, Owner{UID: u, State: s}))
			}
		}
	}
	build(nil)
	for _, list := range lists {
		in := Input{Owners: list}
		for _, st := range [][]OwnerState{{Orphaned}, {Dangling, Waiting}} {
			if got, want := in.removableWith(st...), in.removableWithMaps(st); !slices.Equal(got, want) {
				t.Fatalf("%v %v: %v, want %v", list, st, got, want)
			}
		}
	}
	long := Input{}
	for i := range smallOwnerList + 4 {
		long.Owners = append(long.Owners, Owner{UID: types.UID(rune('a' + i%5)), State: states[i%len(states)]})
	}
	if got := long.removableWith(Dangling, Waiting); !slices.Equal(got, long.removableWithMaps([]OwnerState{Dangling, Waiting})) {
		t.Errorf("long list: %v", got)
	}
}
