package graph

import "k8s.io/apimachinery/pkg/types"

// Virtual owners: owners never observed, known by the claims references make and by the
// answers of their live checks.
var virtualScenarios = []scenario{
	{
		name: "virtual owner: same claim waits for the pending check, answer inherited, dropped with its last dependent",
		steps: []step{
			processEvent(observed(obj(pod1, owner(rs1)))),
			assertState(state{
				nodes:   []NodeView{makeNode(pod1, withOwners(owner(rs1))), makeNode(rs1, virtual)},
				effects: Effects{VerifyOwner: []Ref{rs1}},
			}),
			processEvent(observed(obj(pod2, owner(rs1)))), // same claim, same namespace: no second check
			processEvent(observed(obj(pod3, owner(rs1)))), // same coordinates from ns2: its own check
			assertState(state{
				nodes: []NodeView{
					makeNode(pod1, withOwners(owner(rs1))), makeNode(pod2, withOwners(owner(rs1))),
					makeNode(pod3, withOwners(owner(rs1))), makeNode(rs1, virtual),
				},
				effects: Effects{VerifyOwner: []Ref{claimIn(rs1, "ns2")}},
			}),
			processEvent(verified(rs1, false)),
			assertState(state{
				nodes: []NodeView{
					makeNode(pod1, withOwners(owner(rs1))), makeNode(pod2, withOwners(owner(rs1))),
					makeNode(pod3, withOwners(owner(rs1))), makeNode(rs1, virtual),
				},
				effects: Effects{AttemptDelete: uids(pod1, pod2)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerAbsent}, pod3.UID: {OwnerUnknown}},
			}),
			// a new dependent with the verified claim inherits the answer
			processEvent(deleted(pod2)),
			processEvent(observed(withRV(obj(pod2, owner(rs1)), "9"))),
			assertState(state{
				nodes: []NodeView{
					makeNode(pod1, withOwners(owner(rs1))), makeNode(pod2, withOwners(owner(rs1))),
					makeNode(pod3, withOwners(owner(rs1))), makeNode(rs1, virtual),
				},
				effects: Effects{AttemptDelete: uids(pod2)},
			}),
			processEvent(deleted(pod1)),
			processEvent(deleted(pod2)),
			processEvent(observed(withRV(obj(pod3), "10"))), // drops its reference
			assertState(state{nodes: []NodeView{makeNode(pod3)}}),
		},
	},
	{
		name: "cluster-wide answer applies in every namespace",
		steps: []step{
			processEvent(observed(obj(pod1, owner(node1)))),
			processEvent(observed(obj(pod3, owner(node1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(pod1, withOwners(owner(node1))), makeNode(pod3, withOwners(owner(node1))),
					makeNode(claimIn(node1, "ns1"), virtual),
				},
				effects: Effects{VerifyOwner: []Ref{claimIn(node1, "ns2")}},
			}),
			processEvent(verified(node1, false)),
			assertState(state{
				nodes: []NodeView{
					makeNode(pod1, withOwners(owner(node1))), makeNode(pod3, withOwners(owner(node1))),
					makeNode(claimIn(node1, "ns1"), virtual),
				},
				effects: Effects{AttemptDelete: uids(pod1, pod3)},
			}),
			processEvent(observed(obj(pod2, owner(node1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(pod1, withOwners(owner(node1))), makeNode(pod2, withOwners(owner(node1))),
					makeNode(pod3, withOwners(owner(node1))), makeNode(claimIn(node1, "ns1"), virtual),
				},
				effects: Effects{AttemptDelete: uids(pod2)},
			}),
		},
	},
}
