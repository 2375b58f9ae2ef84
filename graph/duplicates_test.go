package graph

import "testing"

// TestDuplicateReferencesKeepStrongestBlock: identical references collapse to one that keeps
// the strongest blockOwnerDeletion (and controller), whichever comes first, so a blocking
// duplicate still blocks a foreground owner; dropping it unblocks the owner (RecheckOwner).
func TestDuplicateReferencesKeepStrongestBlock(t *testing.T) {
	g := New()
	own := makeRef("apps/v1", "ReplicaSet", "ns", "rs", "u-rs")
	dep := makeRef("v1", "Pod", "ns", "p", "u-p")
	g.Apply(observed(deleting(obj(own), FinalizerForeground)))
	g.Apply(observed(obj(dep, owner(own), owner(own, blocking, controller))))
	if err := checkInvariants(g); err != nil {
		t.Fatal(err)
	}
	if n := g.BlockingDependents(own.UID); n != 1 {
		t.Errorf("BlockingDependents = %d, want 1: the blocking duplicate must count", n)
	}
	v, _ := g.Node(dep.UID)
	if len(v.Owners) != 1 || !v.Owners[0].BlockOwnerDeletion || !v.Owners[0].Controller {
		t.Errorf("owners = %+v, want one reference, blocking and controller", v.Owners)
	}
	fx := g.Apply(observed(withRV(obj(dep, owner(own)), "2")))
	if n := g.BlockingDependents(own.UID); n != 0 {
		t.Errorf("BlockingDependents after the blocking duplicate went = %d, want 0", n)
	}
	if len(fx.RecheckOwner) != 1 || fx.RecheckOwner[0] != own.UID {
		t.Errorf("RecheckOwner = %v, want the owner", fx.RecheckOwner)
	}
}
