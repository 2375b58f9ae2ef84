package graph

import "k8s.io/apimachinery/pkg/types"

// Owners deleted in the background and in the foreground.
var deleteScenarios = []scenario{
	{
		name: "background: owner deleted, dependents attempted, tombstone until the last goes",
		steps: []step{
			processEvent(observed(obj(rs1))),
			processEvent(observed(obj(pod1, owner(rs1, controller, blocking)))),
			processEvent(observed(obj(pod2, owner(rs1, controller, blocking)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1),
					makeNode(pod1, withOwners(owner(rs1, controller, blocking))),
					makeNode(pod2, withOwners(owner(rs1, controller, blocking))),
				},
				owners:   map[types.UID][]OwnerState{pod1.UID: {OwnerPresent}},
				blocking: map[types.UID]int{rs1.UID: 2},
			}),
			processEvent(deleted(rs1)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, absent),
					makeNode(pod1, withOwners(owner(rs1, controller, blocking))),
					makeNode(pod2, withOwners(owner(rs1, controller, blocking))),
				},
				effects: Effects{AttemptDelete: uids(pod1, pod2)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerAbsent}, pod2.UID: {OwnerAbsent}},
			}),
			// a repeated delete (relist tombstone) changes nothing
			processEvent(deleted(rs1)),
			processEvent(deleted(pod1)),
			assertState(state{
				nodes: []NodeView{makeNode(rs1, absent), makeNode(pod2, withOwners(owner(rs1, controller, blocking)))},
			}),
			processEvent(deleted(pod2)),
			assertState(state{stats: &Stats{PerResource: map[string]int{}}}),
		},
	},
	{
		name: "background: an owner deleted without the orphan finalizer is absent and forgotten",
		steps: []step{
			processEvent(observed(obj(rs1))),
			processEvent(observed(obj(pod1, owner(rs1)))),
			processEvent(observed(withRV(deleting(obj(rs1), 0), "2"))),
			processEvent(deleted(rs1)),
			assertState(state{
				nodes:   []NodeView{makeNode(rs1, absent), makeNode(pod1, withOwners(owner(rs1)))},
				effects: Effects{AttemptDelete: uids(pod1)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerAbsent}},
			}),
			processEvent(deleted(pod1)),
			assertState(state{stats: &Stats{PerResource: map[string]int{}}}),
			// a late dependent: a virtual owner and a live check, as before
			processEvent(observed(obj(pod2, owner(rs1)))),
			assertState(state{
				nodes:   []NodeView{makeNode(rs1, virtual), makeNode(pod2, withOwners(owner(rs1)))},
				effects: Effects{VerifyOwner: []Ref{rs1}},
				owners:  map[types.UID][]OwnerState{pod2.UID: {OwnerUnknown}},
			}),
		},
	},
	{
		name: "foreground: dependents attempted, owner rechecked when blocking stops",
		steps: []step{
			processEvent(observed(obj(rs1))),
			processEvent(observed(obj(pod1, owner(rs1, blocking)))),
			processEvent(observed(obj(pod2, owner(rs1)))),
			processEvent(observed(deleting(obj(rs1), FinalizerForeground))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerForeground)),
					makeNode(pod1, withOwners(owner(rs1, blocking))),
					makeNode(pod2, withOwners(owner(rs1))),
				},
				effects:  Effects{Foreground: uids(rs1), AttemptDelete: uids(pod1, pod2)},
				owners:   map[types.UID][]OwnerState{pod1.UID: {OwnerDeletingDependents}, pod2.UID: {OwnerDeletingDependents}},
				blocking: map[types.UID]int{rs1.UID: 1},
				stats: &Stats{Nodes: 3, Observed: 3, WaitingForeground: 1,
					PerResource: map[string]int{"apps/v1, Kind=ReplicaSet": 1, "v1, Kind=Pod": 2}},
			}),
			// a no-op update of the owner: nothing, again
			processEvent(observed(withRV(deleting(obj(rs1), FinalizerForeground), "2"))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerForeground)),
					makeNode(pod1, withOwners(owner(rs1, blocking))),
					makeNode(pod2, withOwners(owner(rs1))),
				},
			}),
			// a non-blocking dependent goes: the owner is rechecked (in-tree: any dependent)
			processEvent(deleted(pod2)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerForeground)),
					makeNode(pod1, withOwners(owner(rs1, blocking))),
				},
				effects: Effects{RecheckOwner: uids(rs1)},
			}),
			// a dependent that appears while the owner waits is attempted at once
			processEvent(observed(obj(pod3, owner(rs1, blocking)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerForeground)),
					makeNode(pod1, withOwners(owner(rs1, blocking))),
					makeNode(pod3, withOwners(owner(rs1, blocking))),
				},
				effects: Effects{
					AttemptDelete:    uids(pod3),
					InvalidNamespace: []InvalidRef{{Dependent: pod3, Owner: owner(rs1, blocking)}}, // pod3 is in ns2
				},
				blocking: map[types.UID]int{rs1.UID: 2},
			}),
			processEvent(deleted(pod3)),
			// the blocking dependent clears blockOwnerDeletion: recheck
			processEvent(observed(withRV(obj(pod1, owner(rs1)), "3"))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerForeground)),
					makeNode(pod1, withOwners(owner(rs1))),
				},
				effects:  Effects{RecheckOwner: uids(rs1)},
				blocking: map[types.UID]int{rs1.UID: 0},
			}),
			// the collector removed the finalizer; other finalizers keep the owner: being deleted, solid
			processEvent(observed(withRV(deleting(obj(rs1), 0), "4"))),
			assertState(state{
				nodes:  []NodeView{makeNode(rs1, deletingNode(0)), makeNode(pod1, withOwners(owner(rs1)))},
				owners: map[types.UID][]OwnerState{pod1.UID: {OwnerBeingDeleted}},
			}),
		},
	},
}
