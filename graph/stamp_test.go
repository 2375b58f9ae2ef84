package graph

import (
	"testing"
)

// The stamp is kept, reported, changed by an update that changes nothing else, cleared with the
// object, and never changes a reference's state (no effects).
func TestStamp(t *testing.T) {
	g := New()
	g.Apply(observed(obj(rs1)))
	dep := obj(pod1, owner(rs1))
	g.Apply(observed(dep))
	other := obj(pod2)
	g.Apply(observed(other))

	kinds := map[KindKey]bool{{APIVersion: rs1.APIVersion, Kind: rs1.Kind}: true}
	got := g.Stampable(kinds)
	if len(got) != 1 || got[0].UID != rs1.UID || got[0].Stamp != 0 {
		t.Fatalf("Stampable before any stamp = %+v, want rs1 alone, unstamped", got)
	}

	stamped := obj(rs1)
	stamped.Stamp, stamped.Finalizers = FinalizerOrphan, FinalizerOrphan
	fx := g.Apply(observed(stamped))
	if v, _ := g.Node(rs1.UID); v.Stamp != FinalizerOrphan || v.Finalizers != FinalizerOrphan {
		t.Fatalf("rs1 after stamping: stamp %v finalizers %v", v.Stamp, v.Finalizers)
	}
	if !fx.IsZero() {
		t.Errorf("stamping an owner (not deleting) had effects: %+v", fx)
	}
	// A stamp on an object of another kind is reported too (so that it can be undone after
	// its resource's rule went away); a stamp-only change is not absorbed as a no-op.
	otherStamped := other
	otherStamped.Stamp = FinalizerForeground
	g.Apply(observed(otherStamped))
	if v, _ := g.Node(pod2.UID); v.Stamp != FinalizerForeground {
		t.Fatalf("pod2 stamp = %v after a stamp-only update", v.Stamp)
	}
	got = g.Stampable(kinds)
	if len(got) != 2 {
		t.Fatalf("Stampable = %+v, want rs1 and the stamped pod2", got)
	}
	for _, s := range got {
		if s.UID == pod1.UID {
			t.Errorf("unstamped pod1 of an unwanted kind reported: %+v", s)
		}
	}
	g.Apply(observed(other)) // the stamp removed
	if v, _ := g.Node(pod2.UID); v.Stamp != 0 {
		t.Errorf("pod2 stamp = %v after the stamp was removed", v.Stamp)
	}
	g.Apply(deleted(rs1))
	if v, ok := g.Node(rs1.UID); ok && v.Stamp != 0 {
		t.Errorf("tombstone of rs1 keeps stamp %v", v.Stamp)
	}
	if got := g.Stampable(kinds); len(got) != 0 {
		t.Errorf("Stampable after rs1 went = %+v", got)
	}
	if err := checkInvariants(g); err != nil {
		t.Fatal(err)
	}
}
