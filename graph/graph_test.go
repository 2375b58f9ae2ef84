package graph

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestOwnerStatePredicates(t *testing.T) {
	for s := OwnerUnknown; s <= OwnerOrphaned; s++ {
		if strings.HasPrefix(s.String(), "OwnerState(") {
			t.Errorf("%d has no name", s)
		}
		if s.Orphaned() != (s == OwnerOrphaned) {
			t.Errorf("%s.Orphaned() = %v", s, s.Orphaned())
		}
	}
	if s := OwnerOrphaned; s.Solid() || s.Dangling() || s.Waiting() || s.Undecided() {
		t.Errorf("OwnerOrphaned is solid, dangling, waiting or undecided")
	}
	if OwnerMismatch != 8 || OwnerOrphaned != 9 {
		t.Errorf("OwnerState values changed")
	}
}

func TestRetainedOrphansDefault(t *testing.T) {
	for _, n := range []int{0, -1} {
		if g := NewWithOptions(Options{RetainedOrphans: n}); g.retained.max != DefaultRetainedOrphans {
			t.Errorf("RetainedOrphans %d: bound %d", n, g.retained.max)
		}
	}
	if g := New(); g.retained.max != DefaultRetainedOrphans {
		t.Errorf("New: bound %d", g.retained.max)
	}
}

// TestNoopUpdate pins the contract the event loop relies on: an update that
// changes nothing the collector cares about returns zero Effects, allocates
// nothing, and still records the resourceVersion.
func TestNoopUpdate(t *testing.T) {
	g := New()
	g.Apply(observed(obj(rs1)))
	o := deleting(obj(pod1, owner(rs1, controller, blocking), owner(pod2)), FinalizerOrphan)
	g.Apply(observed(o))
	rvs := []string{"100", "101"}
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		o.ResourceVersion = rvs[i%2]
		i++
		if fx := g.Apply(observed(o)); !fx.IsZero() {
			t.Fatalf("no-op update returned %+v", fx)
		}
	})
	if allocs != 0 {
		t.Errorf("no-op update allocates %v times", allocs)
	}
	v, _ := g.Node(pod1.UID)
	if v.ResourceVersion != rvs[(i-1)%2] {
		t.Errorf("resourceVersion = %q, want %q", v.ResourceVersion, rvs[(i-1)%2])
	}
	for _, rv := range []string{"", "0", "007", "abc", "18446744073709551615", "18446744073709551616"} {
		g.Apply(observed(withRV(o, rv)))
		if v, _ := g.Node(pod1.UID); v.ResourceVersion != rv {
			t.Errorf("resourceVersion %q stored as %q", rv, v.ResourceVersion)
		}
		if err := checkInvariants(g); err != nil {
			t.Fatal(err)
		}
	}
}

func TestUIDRoundTrip(t *testing.T) {
	for _, uid := range []types.UID{
		"8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0001", "00000000-0000-0000-0000-000000000000",
		"8D6EC1F4-6B2C-4F45-9A43-4E5C9D3E0001", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e000", "8d6ec1f4x6b2c-4f45-9a43-4e5c9d3e0001",
		"not-a-uuid", "",
	} {
		g := New()
		r := makeRef("v1", "Pod", "ns1", "p", string(uid))
		g.Apply(observed(obj(pod1, owner(r))))
		deps := g.Dependents(uid)
		if len(deps) != 1 || deps[0].UID != pod1.UID {
			t.Errorf("%q: dependents %v", uid, deps)
		}
		if os := g.Owners(pod1.UID); len(os) != 1 || os[0].UID != uid {
			t.Errorf("%q: owners %v", uid, os)
		}
		if err := checkInvariants(g); err != nil {
			t.Errorf("%q: %v", uid, err)
		}
	}
}

// TestManyDependents exercises owners with more dependents than fit the
// linear dependents list (indexed removal, shrinking), in an order that
// removes from the middle.
func TestManyDependents(t *testing.T) {
	g := New()
	const n = 300
	var pods []Ref
	for i := range n {
		pods = append(pods, makeRef("v1", "Pod", "ns1", fmt.Sprintf("p%d", i), fmt.Sprintf("8d6ec1f4-6b2c-4f45-9a43-%012d", i)))
		g.Apply(observed(obj(pods[i], owner(rs1, blocking))))
	}
	if err := checkInvariants(g); err != nil {
		t.Fatal(err)
	}
	if got := g.BlockingDependents(rs1.UID); got != n {
		t.Fatalf("BlockingDependents = %d, want %d", got, n)
	}
	fx := g.Apply(observed(deleting(obj(rs1), FinalizerForeground)))
	if len(fx.AttemptDelete) != n || len(fx.Foreground) != 1 {
		t.Fatalf("foreground: %d attempts, foreground %v", len(fx.AttemptDelete), fx.Foreground)
	}
	for k := range n {
		i := (k * 7) % n // 7 is coprime with 300: every pod once, out of order
		fx := g.Apply(deleted(pods[i]))
		if len(fx.RecheckOwner) != 1 || fx.RecheckOwner[0] != rs1.UID {
			t.Fatalf("delete %d: recheck %v", i, fx.RecheckOwner)
		}
		if err := checkInvariants(g); err != nil {
			t.Fatalf("after deleting %d: %v", i, err)
		}
		if got := g.BlockingDependents(rs1.UID); got != n-k-1 {
			t.Fatalf("BlockingDependents = %d, want %d", got, n-k-1)
		}
	}
	if v, ok := g.Node(rs1.UID); !ok || v.Dependents != 0 || len(g.deps) != len(g.freeDeps) {
		t.Fatalf("owner after all dependents went: %+v %v", v, ok)
	}
}
