package graph

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestObservedOfExcept: after a relist, the observed objects of the kind that the list did not
// hold are returned, canonical and non-canonical UIDs alike; other kinds, virtual owners and
// deleted objects never are.
func TestObservedOfExcept(t *testing.T) {
	g := New()
	uids := []types.UID{
		"00000000-0000-0000-0000-000000000001", // canonical, listed
		"00000000-0000-0000-0000-000000000002", // canonical, not listed
		"not-a-uuid-listed",
		"NOT-A-UUID-MISSING",
	}
	for i, uid := range uids {
		g.Apply(Event{Type: EventObserved, Object: Object{Ref: Ref{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: fmt.Sprint("o", i), UID: uid},
			ResourceVersion: "1", Owners: []OwnerRef{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "00000000-0000-0000-0000-0000000000ff"}}}})
	}
	g.Apply(Event{Type: EventObserved, Object: Object{Ref: Ref{APIVersion: "v1", Kind: "Secret", Namespace: "ns", Name: "s", UID: "00000000-0000-0000-0000-000000000003"}, ResourceVersion: "1"}})
	seen := NewUIDSet(2)
	seen.Add(uids[0])
	seen.Add(uids[2])
	seen.Add("00000000-0000-0000-0000-0000000000aa") // listed, not in the graph: no matter
	if seen.Len() != 3 || !seen.Has(uids[2]) || seen.Has(uids[3]) {
		t.Fatalf("set: len %d, has %q %t, has %q %t", seen.Len(), uids[2], seen.Has(uids[2]), uids[3], seen.Has(uids[3]))
	}
	got := g.ObservedOfExcept("v1", "ConfigMap", seen)
	if len(got) != 2 || got[0].UID != uids[1] || got[1].UID != uids[3] || got[1].Name != "o3" {
		t.Errorf("ObservedOfExcept = %v, want o1 and o3", got)
	}
	seen.Remove(uids[0])
	if got := g.ObservedOfExcept("v1", "ConfigMap", seen); len(got) != 3 {
		t.Errorf("after Remove(o0): %v, want o0, o1, o3", got)
	}
	if got := g.ObservedOfExcept("v1", "Pod", NewUIDSet(0)); len(got) != 0 {
		t.Errorf("virtual nodes are not observed: %v", got)
	}
	if got := g.ObservedOfExcept("v1", "Nothing", seen); got != nil {
		t.Errorf("unknown kind: %v", got)
	}
}
