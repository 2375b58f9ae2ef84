package graph

import "k8s.io/apimachinery/pkg/types"

// Updates: an owner seen through another apiVersion, owner references edited, and stale
// answers and unknown events.
var updateScenarios = []scenario{
	{
		name: "owner changes apiVersion (same UID seen through another version)",
		steps: []step{
			processEvent(observed(obj(role1v1))),
			processEvent(observed(obj(pod1ns1, owner(role1v1)))),
			processEvent(observed(obj(pod2ns1, owner(role1v1beta1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(role1v1), makeNode(pod1ns1, withOwners(owner(role1v1))),
					makeNode(pod2ns1, withOwners(owner(role1v1beta1))),
				},
				effects: Effects{VerifyOwner: []Ref{role1v1beta1}},
				owners:  map[types.UID][]OwnerState{pod1ns1.UID: {OwnerPresent}, pod2ns1.UID: {OwnerMismatch}},
			}),
			processEvent(observed(obj(role1v1beta1))),
			assertState(state{
				nodes: []NodeView{
					makeNode(role1v1beta1), makeNode(pod1ns1, withOwners(owner(role1v1))),
					makeNode(pod2ns1, withOwners(owner(role1v1beta1))),
				},
				effects: Effects{VerifyOwner: []Ref{role1v1}},
				owners:  map[types.UID][]OwnerState{pod1ns1.UID: {OwnerMismatch}, pod2ns1.UID: {OwnerPresent}},
			}),
		},
	},
	{
		name: "owner references edited: added, retargeted, removed; self-reference",
		steps: []step{
			processEvent(observed(obj(rs1))),
			processEvent(observed(obj(pod1, owner(rs1), owner(pod2)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1), makeNode(pod1, withOwners(owner(rs1), owner(pod2))), makeNode(pod2, virtual),
				},
				effects: Effects{VerifyOwner: []Ref{pod2}},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerPresent, OwnerUnknown}},
			}),
			// identical references collapse to the first
			processEvent(observed(obj(pod1, owner(pod2), owner(rs1, blocking), owner(pod2)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1), makeNode(pod1, withOwners(owner(pod2), owner(rs1, blocking))), makeNode(pod2, virtual),
				},
				blocking: map[types.UID]int{rs1.UID: 1},
			}),
			processEvent(observed(obj(pod1, owner(pod1)))),
			assertState(state{
				nodes:  []NodeView{makeNode(rs1), makeNode(pod1, withOwners(owner(pod1)))},
				owners: map[types.UID][]OwnerState{pod1.UID: {OwnerPresent}},
			}),
			processEvent(observed(deleting(obj(pod1, owner(pod1, blocking)), FinalizerForeground))),
			assertState(state{
				nodes:    []NodeView{makeNode(rs1), makeNode(pod1, withOwners(owner(pod1, blocking)), deletingNode(FinalizerForeground))},
				effects:  Effects{Foreground: uids(pod1), AttemptDelete: uids(pod1)},
				blocking: map[types.UID]int{pod1.UID: 1},
			}),
			processEvent(deleted(pod1)),
			assertState(state{nodes: []NodeView{makeNode(rs1)}}),
		},
	},
	{
		name: "stale answers and unknown events are ignored",
		steps: []step{
			processEvent(verified(rs1, false)),
			processEvent(deleted(pod1)),
			processEvent(Event{Type: 0, Object: obj(pod1)}),
			assertState(state{stats: &Stats{PerResource: map[string]int{}}}),
		},
	},
}
