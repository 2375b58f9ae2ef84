package graph

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestUnobservedPresentClaims: claims on virtual owners verified present are listed, each once
// (cluster-wide answers without a namespace); unanswered, absent and observed owners are not;
// an absent answer to a listed claim takes it off the list and makes its dependents worth
// deciding again.
func TestUnobservedPresentClaims(t *testing.T) {
	g := New()
	ns1owner := makeRef("v1", "ConfigMap", "ns1", "cm", "u-cm")
	node := makeRef("v1", "Node", "", "n1", "u-node")
	unknown := makeRef("v1", "Secret", "ns1", "s", "u-s")
	seen := makeRef("v1", "ConfigMap", "ns1", "seen", "u-seen")
	d1 := makeRef("v1", "Pod", "ns1", "d1", "u-d1")
	d2 := makeRef("v1", "Pod", "ns1", "d2", "u-d2")
	d3 := makeRef("v1", "Pod", "ns2", "d3", "u-d3")
	d4 := makeRef("v1", "Pod", "ns1", "d4", "u-d4")
	g.Apply(observed(obj(seen)))
	for _, ev := range []Event{
		observed(obj(d1, owner(ns1owner), owner(node), owner(unknown), owner(seen))),
		observed(obj(d2, owner(ns1owner))),
		observed(obj(d3, owner(node))),
		verified(claimIn(ns1owner, "ns1"), true),
		verified(claimIn(node, ""), true),
	} {
		g.Apply(ev)
		if err := checkInvariants(g); err != nil {
			t.Fatal(err)
		}
	}
	got := g.UnobservedPresentClaims()
	want := []Ref{claimIn(ns1owner, "ns1"), claimIn(node, "")}
	slices.SortFunc(got, func(a, b Ref) int { return compareRefs(a, b) })
	slices.SortFunc(want, func(a, b Ref) int { return compareRefs(a, b) })
	if !slices.Equal(got, want) {
		t.Fatalf("claims = %v\nwant %v", got, want)
	}

	// The owner went: an absent answer moves its dependents.
	fx := g.Apply(verified(claimIn(ns1owner, "ns1"), false))
	if err := checkInvariants(g); err != nil {
		t.Fatal(err)
	}
	slices.Sort(fx.AttemptDelete)
	if !slices.Equal(fx.AttemptDelete, []types.UID{d1.UID, d2.UID}) {
		t.Errorf("AttemptDelete = %v, want d1 and d2", fx.AttemptDelete)
	}
	if got := g.UnobservedPresentClaims(); !slices.Equal(got, []Ref{claimIn(node, "")}) {
		t.Errorf("claims after the absent answer = %v, want only the node", got)
	}
	// A new dependent inheriting the present answer does not add a second claim.
	g.Apply(observed(obj(d4, owner(node))))
	if got := g.UnobservedPresentClaims(); len(got) != 1 {
		t.Errorf("claims = %v, want the node once", got)
	}
}

func compareRefs(a, b Ref) int {
	if a.UID < b.UID {
		return -1
	}
	if a.UID > b.UID {
		return 1
	}
	if a.Namespace < b.Namespace {
		return -1
	}
	if a.Namespace > b.Namespace {
		return 1
	}
	return 0
}

// TestClaimMade: a claim is made while a reference names that UID with those coordinates from
// that namespace (any namespace for ""); not once the dependent dropped it or went.
func TestClaimMade(t *testing.T) {
	g := New()
	own := makeRef("v1", "ConfigMap", "ns1", "cm", "u-cm")
	d1 := makeRef("v1", "Pod", "ns1", "d1", "u-d1")
	g.Apply(observed(obj(d1, owner(own))))
	for _, tt := range []struct {
		c    Ref
		want bool
	}{
		{claimIn(own, "ns1"), true},
		{claimIn(own, ""), true},
		{claimIn(own, "ns2"), false},
		{makeRef("v1", "ConfigMap", "ns1", "other-name", "u-cm"), false},
		{makeRef("v1", "Secret", "ns1", "cm", "u-cm"), false},
		{makeRef("v1", "ConfigMap", "ns1", "cm", "u-unknown"), false},
	} {
		if got := g.ClaimMade(tt.c); got != tt.want {
			t.Errorf("ClaimMade(%v) = %t, want %t", tt.c, got, tt.want)
		}
	}
	g.Apply(observed(withRV(obj(d1), "2"))) // the reference is dropped
	if g.ClaimMade(claimIn(own, "ns1")) {
		t.Error("claim still made after the dependent dropped its reference")
	}
}

// TestFind: an observed object is found by its coordinates; virtual owners, other namespaces
// and other kinds are not.
func TestFind(t *testing.T) {
	g := New()
	p := makeRef("v1", "Pod", "ns1", "p", "u-p")
	g.Apply(observed(obj(p, owner(makeRef("v1", "ConfigMap", "ns1", "cm", "u-cm")))))
	if uid, ok := g.Find("v1", "Pod", "ns1", "p"); !ok || uid != "u-p" {
		t.Errorf("Find(pod) = %q, %t", uid, ok)
	}
	for _, c := range [][4]string{{"v1", "ConfigMap", "ns1", "cm"}, {"v1", "Pod", "ns2", "p"}, {"v1", "Secret", "ns1", "p"}, {"v1", "Pod", "ns1", "q"}} {
		if uid, ok := g.Find(c[0], c[1], c[2], c[3]); ok {
			t.Errorf("Find(%v) = %q, want nothing", c, uid)
		}
	}
}

// TestClaimAskedAgainAfterItsOnlyReferenceWent: the only reference making a virtual owner's
// identity claim goes while its check is queued (the caller may drop a check nobody needs); a
// later reference making that claim asks again instead of waiting for the dropped check.
func TestClaimAskedAgainAfterItsOnlyReferenceWent(t *testing.T) {
	g := New()
	own := makeRef("example.com/v1", "Gizmo", "ns", "g", "u-g")
	other := makeRef("example.com/v1", "Gizmo", "ns", "other-name", "u-g") // keeps the virtual node alive
	a := makeRef("v1", "Pod", "ns", "a", "u-a")
	b := makeRef("v1", "Pod", "ns", "b", "u-b")
	d := makeRef("v1", "Pod", "ns", "d", "u-d")
	if fx := g.Apply(observed(obj(a, owner(own)))); len(fx.VerifyOwner) != 1 {
		t.Fatalf("first claim: VerifyOwner %v", fx.VerifyOwner)
	}
	g.Apply(observed(obj(b, owner(other))))
	g.Apply(deleted(a)) // the identity claim's only reference goes; its queued check is dropped
	fx := g.Apply(observed(obj(d, owner(own))))
	if len(fx.VerifyOwner) != 1 || fx.VerifyOwner[0] != claimIn(own, "ns") {
		t.Errorf("the claim made again: VerifyOwner %v, want a new check of %v", fx.VerifyOwner, claimIn(own, "ns"))
	}
	// While one reference still makes it undecided, another making it waits for that check.
	e := makeRef("v1", "Pod", "ns", "e", "u-e")
	if fx := g.Apply(observed(obj(e, owner(own)))); len(fx.VerifyOwner) != 0 {
		t.Errorf("a second reference to a claim under check asked again: %v", fx.VerifyOwner)
	}
	if err := checkInvariants(g); err != nil {
		t.Fatal(err)
	}
}
