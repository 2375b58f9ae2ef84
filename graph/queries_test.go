package graph

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestQueriesAreReadOnly runs every query from several goroutines at once;
// under -race this proves they never write, so the caller may serve them
// under a read lock.
func TestQueriesAreReadOnly(t *testing.T) {
	g := New()
	for _, ev := range []Event{
		observed(obj(pod1, owner(rs1, blocking))),
		observed(obj(pod2, owner(rs1), owner(node1))),
		observed(deleting(obj(rs1), FinalizerForeground)),
		observed(obj(pod1ns1, owner(pod2ns1))),
	} {
		g.Apply(ev)
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				for _, u := range []types.UID{pod1.UID, pod2.UID, rs1.UID, node1.UID, pod2ns1.UID} {
					g.Node(u)
					g.Owners(u)
					g.Dependents(u)
					g.BlockingDependents(u)
				}
				g.Stats()
				g.DeletingOwners()
			}
		}()
	}
	for range 4 {
		<-done
	}
	if err := checkInvariants(g); err != nil {
		t.Fatal(err)
	}
}

func TestObservedOf(t *testing.T) {
	g := New()
	for i, kind := range []string{"ConfigMap", "ConfigMap", "Secret"} {
		uid := types.UID(fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i+1))
		g.Apply(Event{Type: EventObserved, Object: Object{Ref: Ref{APIVersion: "v1", Kind: kind, Namespace: "ns", Name: fmt.Sprint("o", i), UID: uid},
			ResourceVersion: "1", Owners: []OwnerRef{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "00000000-0000-0000-0000-0000000000ff"}}}})
	}
	g.Apply(Event{Type: EventDeleted, Object: Object{Ref: Ref{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "o0", UID: "00000000-0000-0000-0000-000000000001"}}})
	got := g.ObservedOf("v1", "ConfigMap")
	if len(got) != 1 || got[0].Name != "o1" || got[0].Namespace != "ns" || got[0].UID != "00000000-0000-0000-0000-000000000002" {
		t.Errorf("ObservedOf(v1, ConfigMap) = %v, want only o1 (o0 deleted; the virtual Pod owner and the Secret excluded)", got)
	}
	if got := g.ObservedOf("v1", "Pod"); len(got) != 0 {
		t.Errorf("virtual nodes are not observed: %v", got)
	}
	if got := g.ObservedOf("v1", "Nothing"); got != nil {
		t.Errorf("unknown kind: %v", got)
	}
}
