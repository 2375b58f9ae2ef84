package graph

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// Owners deleted with the orphan policy: the orphan finalizer, dependents still in flight or
// arriving late, the bounded FIFO of released orphaned owners, and the record another process
// keeps of them (EventOrphanRecorded).

// orphanDelete is the life of an owner deleted with the orphan policy once
// its known dependents are orphaned: the orphan finalizer is seen, then
// removed (another finalizer may keep it Terminating), then it is deleted.
func orphanDelete(r Ref) []step {
	return []step{
		processEvent(observed(withRV(deleting(obj(r), FinalizerOrphan), "2"))),
		processEvent(observed(withRV(deleting(obj(r), 0), "3"))),
		processEvent(deleted(r)),
	}
}

// recorded reports that another process recorded r as being deleted with
// the orphan policy (EventOrphanRecorded).
func recorded(r Ref) Event { return Event{Type: EventOrphanRecorded, Object: Object{Ref: r}} }

var orphanScenarios = []scenario{
	{
		name: "orphan: entered, no-op update, late dependent, already deleting when first observed",
		steps: []step{
			processEvent(observed(obj(pod1, owner(rs1)))),
			processEvent(observed(withRV(deleting(obj(rs1), FinalizerOrphan), "5"))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerOrphan)),
					makeNode(pod1, withOwners(owner(rs1))),
				},
				effects: Effects{AttemptOrphan: uids(rs1)}, // already deleting at first observation: level-triggered
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerBeingDeleted}},
				stats: &Stats{Nodes: 2, Observed: 2, WaitingOrphan: 1,
					PerResource: map[string]int{"apps/v1, Kind=ReplicaSet": 1, "v1, Kind=Pod": 1}},
			}),
			processEvent(observed(withRV(deleting(obj(rs1), FinalizerOrphan), "6"))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerOrphan)),
					makeNode(pod1, withOwners(owner(rs1))),
				},
			}),
			// a dependent that appears later must be orphaned too
			processEvent(observed(obj(pod2, owner(rs1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerOrphan)),
					makeNode(pod1, withOwners(owner(rs1))),
					makeNode(pod2, withOwners(owner(rs1))),
				},
				effects: Effects{AttemptOrphan: uids(rs1)},
			}),
			// the orphaner removes the references, then the finalizer; the owner goes
			processEvent(observed(withRV(obj(pod1), "7"))),
			processEvent(observed(withRV(obj(pod2), "8"))),
			processEvent(deleted(rs1)),
			assertState(state{nodes: []NodeView{makeNode(pod1), makeNode(pod2)}}),
		},
	},
	{
		name: "orphan: a dependent still in flight when the owner goes sees OwnerOrphaned",
		steps: []step{
			processEvent(observed(obj(rs1))),
			processEvent(observed(obj(pod1, owner(rs1, controller, blocking)))),
			processEvent(observed(obj(pod2, owner(rs1, controller, blocking)))),
			processEvent(observed(withRV(deleting(obj(rs1), FinalizerOrphan), "2"))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerOrphan)),
					makeNode(pod1, withOwners(owner(rs1, controller, blocking))),
					makeNode(pod2, withOwners(owner(rs1, controller, blocking))),
				},
				effects: Effects{AttemptOrphan: uids(rs1)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerBeingDeleted}, pod2.UID: {OwnerBeingDeleted}},
			}),
			// the orphaner removes the reference of the dependent it knows of
			processEvent(observed(withRV(obj(pod1), "3"))),
			// the orphan finalizer goes; another finalizer keeps the owner
			// Terminating: still solid, and still marked
			processEvent(observed(withRV(deleting(obj(rs1), 0), "4"))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(0)),
					makeNode(pod1),
					makeNode(pod2, withOwners(owner(rs1, controller, blocking))),
				},
				owners: map[types.UID][]OwnerState{pod2.UID: {OwnerBeingDeleted}},
			}),
			// the owner goes while pod2 still references it (its update
			// was in flight): orphaned, not absent; pod2 is re-decided
			// (the collector removes the reference)
			processEvent(deleted(rs1)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, orphanedNode),
					makeNode(pod1),
					makeNode(pod2, withOwners(owner(rs1, controller, blocking))),
				},
				effects: Effects{AttemptDelete: uids(pod2)},
				owners:  map[types.UID][]OwnerState{pod2.UID: {OwnerOrphaned}},
				stats: &Stats{Nodes: 3, Observed: 2, Absent: 1,
					PerResource: map[string]int{"v1, Kind=Pod": 2}},
			}),
			// the reference is removed: the tombstone is released and retained
			processEvent(observed(withRV(obj(pod2), "5"))),
			assertState(state{
				nodes: []NodeView{makeNode(pod1), makeNode(pod2)},
				stats: &Stats{Nodes: 2, Observed: 2, RetainedOrphans: 1,
					PerResource: map[string]int{"v1, Kind=Pod": 2}},
			}),
			assertRetained(rs1),
		},
	},
	{
		name: "orphan: a late dependent of a released orphaned owner gets its tombstone back",
		steps: slices.Concat(orphanDelete(rs1), []step{
			// no dependent left: released at once, remembered
			assertState(state{stats: &Stats{RetainedOrphans: 1, PerResource: map[string]int{}}}),
			assertRetained(rs1),
			// a dependent created before the deletion arrives late: no
			// virtual node, no live check
			processEvent(observed(obj(pod1, owner(rs1, controller, blocking)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, orphanedNode),
					makeNode(pod1, withOwners(owner(rs1, controller, blocking))),
				},
				effects: Effects{AttemptDelete: uids(pod1)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerOrphaned}},
				stats: &Stats{Nodes: 2, Observed: 1, Absent: 1,
					PerResource: map[string]int{"v1, Kind=Pod": 1}},
			}),
			assertRetained(),
			processEvent(observed(obj(pod2, owner(rs1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, orphanedNode),
					makeNode(pod1, withOwners(owner(rs1, controller, blocking))),
					makeNode(pod2, withOwners(owner(rs1))),
				},
				effects: Effects{AttemptDelete: uids(pod2)},
				owners:  map[types.UID][]OwnerState{pod2.UID: {OwnerOrphaned}},
			}),
			// from another namespace the namespace rule still decides
			processEvent(observed(obj(pod3, owner(rs1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, orphanedNode),
					makeNode(pod1, withOwners(owner(rs1, controller, blocking))),
					makeNode(pod2, withOwners(owner(rs1))),
					makeNode(pod3, withOwners(owner(rs1))),
				},
				effects: Effects{
					AttemptDelete:    uids(pod3),
					InvalidNamespace: []InvalidRef{{Dependent: pod3, Owner: owner(rs1)}},
				},
				owners: map[types.UID][]OwnerState{pod3.UID: {OwnerInvalidNamespace}},
			}),
			// a stale answer to a live check changes nothing
			processEvent(verified(rs1, true)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, orphanedNode),
					makeNode(pod1, withOwners(owner(rs1, controller, blocking))),
					makeNode(pod2, withOwners(owner(rs1))),
					makeNode(pod3, withOwners(owner(rs1))),
				},
				owners: map[types.UID][]OwnerState{pod1.UID: {OwnerOrphaned}},
			}),
			processEvent(deleted(pod3)),
			processEvent(observed(withRV(obj(pod1), "4"))),
			processEvent(deleted(pod2)),
			assertState(state{nodes: []NodeView{makeNode(pod1)}}),
			assertRetained(rs1),
		}),
	},
	{
		name: "orphan: a cluster-scoped owner recreated from the FIFO serves every namespace",
		steps: slices.Concat(orphanDelete(node1), []step{
			assertRetained(node1),
			processEvent(observed(obj(pod1, owner(node1)))),
			assertState(state{
				nodes:   []NodeView{makeNode(node1, orphanedNode), makeNode(pod1, withOwners(owner(node1)))},
				effects: Effects{AttemptDelete: uids(pod1)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerOrphaned}},
			}),
			processEvent(observed(obj(pod3, owner(node1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(node1, orphanedNode),
					makeNode(pod1, withOwners(owner(node1))),
					makeNode(pod3, withOwners(owner(node1))),
				},
				effects: Effects{AttemptDelete: uids(pod3)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerOrphaned}, pod3.UID: {OwnerOrphaned}},
			}),
		}),
	},
	{
		name:   "orphan: the FIFO forgets the oldest beyond its bound",
		retain: 2,
		steps: slices.Concat(orphanDelete(rs1), orphanDelete(role1v1), orphanDelete(deployment1apps), []step{
			assertRetained(role1v1, deployment1apps),
			// rs1 is forgotten: a late dependent is judged as before
			processEvent(observed(obj(pod1, owner(rs1)))),
			assertState(state{
				nodes:   []NodeView{makeNode(rs1, virtual), makeNode(pod1, withOwners(owner(rs1)))},
				effects: Effects{VerifyOwner: []Ref{rs1}},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerUnknown}},
			}),
			// role1 is remembered; recreating it takes it out of the FIFO...
			processEvent(observed(obj(pod2ns1, owner(role1v1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, virtual), makeNode(pod1, withOwners(owner(rs1))),
					makeNode(role1v1, orphanedNode), makeNode(pod2ns1, withOwners(owner(role1v1))),
				},
				effects: Effects{AttemptDelete: uids(pod2ns1)},
				owners:  map[types.UID][]OwnerState{pod2ns1.UID: {OwnerOrphaned}},
			}),
			assertRetained(deployment1apps),
			// ...and releasing it again makes it the newest
			processEvent(observed(withRV(obj(pod2ns1), "4"))),
			assertRetained(deployment1apps, role1v1),
			processEvent(deleted(pod1)),
			assertRetained(deployment1apps, role1v1), // a virtual node is not retained
		}, orphanDelete(rs2), []step{
			assertRetained(role1v1, rs2),
			assertState(state{
				nodes: []NodeView{makeNode(pod2ns1)},
				stats: &Stats{Nodes: 1, Observed: 1, RetainedOrphans: 2,
					PerResource: map[string]int{"v1, Kind=Pod": 1}},
			}),
		}),
	},
	{
		// A new leader that never saw rs1's deletion loads the previous
		// leader's record before a dependent created just before the
		// deletion reaches its graph: the dependent keeps its life, only
		// the reference goes.
		name: "recorded orphan: a dependent arriving later sees OwnerOrphaned, no live check",
		steps: []step{
			processEvent(recorded(rs1)),
			assertState(state{stats: &Stats{RetainedOrphans: 1, PerResource: map[string]int{}}}),
			assertRetained(rs1),
			processEvent(recorded(rs1)), // twice: remembered once
			assertRetained(rs1),
			processEvent(observed(obj(pod1, owner(rs1, controller, blocking)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, orphanedNode),
					makeNode(pod1, withOwners(owner(rs1, controller, blocking))),
				},
				effects: Effects{AttemptDelete: uids(pod1)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerOrphaned}},
			}),
			assertRetained(),
		},
	},
	{
		name: "recorded orphan: an absent tombstone becomes orphaned, its dependents are re-decided",
		steps: []step{
			processEvent(observed(obj(rs1))),
			processEvent(observed(obj(pod1, owner(rs1)))),
			// the deletion is seen without the orphan finalizer (a relist
			// after the finalizer went): absent
			processEvent(deleted(rs1)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, absent),
					makeNode(pod1, withOwners(owner(rs1))),
				},
				effects: Effects{AttemptDelete: uids(pod1)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerAbsent}},
			}),
			processEvent(recorded(rs1)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, orphanedNode),
					makeNode(pod1, withOwners(owner(rs1))),
				},
				effects: Effects{AttemptDelete: uids(pod1)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerOrphaned}},
			}),
			processEvent(recorded(rs1)), // nothing new
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, orphanedNode),
					makeNode(pod1, withOwners(owner(rs1))),
				},
				owners: map[types.UID][]OwnerState{pod1.UID: {OwnerOrphaned}},
			}),
		},
	},
	{
		name: "recorded orphan: a virtual owner is orphaned once verified absent, never made absent by the record",
		steps: []step{
			processEvent(observed(obj(pod1, owner(rs1)))),
			processEvent(recorded(rs1)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, virtual),
					makeNode(pod1, withOwners(owner(rs1))),
				},
				owners: map[types.UID][]OwnerState{pod1.UID: {OwnerUnknown}},
			}),
			processEvent(verified(rs1, false)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, virtual),
					makeNode(pod1, withOwners(owner(rs1))),
				},
				effects: Effects{AttemptDelete: uids(pod1)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerOrphaned}},
			}),
		},
	},
	{
		name: "recorded orphan: an observed owner keeps its state, and its deletion leaves an orphaned tombstone",
		steps: []step{
			processEvent(observed(obj(rs1))),
			processEvent(observed(obj(pod1, owner(rs1)))),
			processEvent(recorded(rs1)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1),
					makeNode(pod1, withOwners(owner(rs1))),
				},
				owners: map[types.UID][]OwnerState{pod1.UID: {OwnerPresent}},
			}),
			processEvent(deleted(rs1)),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, orphanedNode),
					makeNode(pod1, withOwners(owner(rs1))),
				},
				effects: Effects{AttemptDelete: uids(pod1)},
				owners:  map[types.UID][]OwnerState{pod1.UID: {OwnerOrphaned}},
			}),
		},
	},
}
