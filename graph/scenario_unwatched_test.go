package graph

import "k8s.io/apimachinery/pkg/types"

// Resources that stop being watched (EventUnwatched): their objects become virtual owners or
// are released, and what they held is decided again.

// unwatched reports that the resource of apiVersion/kind is no longer
// watched.
func unwatched(apiVersion, kind string) Event {
	return Event{Type: EventUnwatched, Object: Object{Ref: Ref{APIVersion: apiVersion, Kind: kind}}}
}

var unwatchedScenarios = []scenario{
	{
		name: "unwatched: an owner of a stopped kind becomes virtual, each claim on it is verified",
		steps: []step{
			processEvent(observed(obj(widget1v1))),
			processEvent(observed(obj(cm1, owner(widget1v1)))),
			// cm2 claims the v2 coordinates: checked, found
			processEvent(observed(obj(cm2, owner(widget1v2)))),
			processEvent(verified(widget1v2, true)),
			assertState(state{
				nodes:  []NodeView{makeNode(widget1v1), makeNode(cm1, withOwners(owner(widget1v1))), makeNode(cm2, withOwners(owner(widget1v2)))},
				owners: map[types.UID][]OwnerState{cm1.UID: {OwnerPresent}, cm2.UID: {OwnerPresent}},
			}),
			// The v1 monitor stopped: neither solid nor absent, every
			// claim is checked again (cm1's is also widget1's identity).
			processEvent(unwatched("example.com/v1", "Widget")),
			assertState(state{
				nodes:   []NodeView{makeNode(widget1v1, virtual), makeNode(cm1, withOwners(owner(widget1v1))), makeNode(cm2, withOwners(owner(widget1v2)))},
				effects: Effects{VerifyOwner: []Ref{widget1v1, widget1v2}},
				owners:  map[types.UID][]OwnerState{cm1.UID: {OwnerUnknown}, cm2.UID: {OwnerUnknown}},
				stats:   &Stats{Nodes: 3, Observed: 2, Virtual: 1, PerResource: map[string]int{"v1, Kind=ConfigMap": 2}},
			}),
			// v1 is still served: the live check finds it
			processEvent(verified(widget1v1, true)),
			assertState(state{
				nodes:  []NodeView{makeNode(widget1v1, virtual), makeNode(cm1, withOwners(owner(widget1v1))), makeNode(cm2, withOwners(owner(widget1v2)))},
				owners: map[types.UID][]OwnerState{cm1.UID: {OwnerVerifiedPresent}, cm2.UID: {OwnerUnknown}},
			}),
			// The list at v2 observes it again: observation decides
			// (cm1's claim keeps its answer, cm2's agrees with v2).
			processEvent(observed(obj(widget1v2))),
			assertState(state{
				nodes:  []NodeView{makeNode(widget1v2), makeNode(cm1, withOwners(owner(widget1v1))), makeNode(cm2, withOwners(owner(widget1v2)))},
				owners: map[types.UID][]OwnerState{cm1.UID: {OwnerPresent}, cm2.UID: {OwnerPresent}},
			}),
			// A late answer to cm2's claim changes nothing.
			processEvent(verified(widget1v2, false)),
			assertState(state{
				nodes:  []NodeView{makeNode(widget1v2), makeNode(cm1, withOwners(owner(widget1v1))), makeNode(cm2, withOwners(owner(widget1v2)))},
				owners: map[types.UID][]OwnerState{cm1.UID: {OwnerPresent}, cm2.UID: {OwnerPresent}},
			}),
			processEvent(deleted(widget1v2)),
			assertState(state{
				nodes:   []NodeView{makeNode(widget1v2, absent), makeNode(cm1, withOwners(owner(widget1v1))), makeNode(cm2, withOwners(owner(widget1v2)))},
				effects: Effects{AttemptDelete: uids(cm1, cm2)},
				owners:  map[types.UID][]OwnerState{cm1.UID: {OwnerAbsent}, cm2.UID: {OwnerAbsent}},
			}),
		},
	},
	{
		name: "unwatched: an owner of a stopped kind deleted meanwhile is verified absent",
		steps: []step{
			processEvent(observed(obj(widget1v1))),
			processEvent(observed(obj(cm1, owner(widget1v1)))),
			processEvent(unwatched("example.com/v1", "Widget")),
			// the list at v2 does not hold it: it stays virtual
			processEvent(observed(obj(widget2v1))),
			processEvent(verified(widget1v1, false)),
			assertState(state{
				nodes:   []NodeView{makeNode(widget1v1, virtual), makeNode(widget2v1), makeNode(cm1, withOwners(owner(widget1v1)))},
				effects: Effects{AttemptDelete: uids(cm1)},
				owners:  map[types.UID][]OwnerState{cm1.UID: {OwnerAbsent}},
			}),
			// a new dependent making the same claim inherits the answer
			processEvent(observed(obj(cm2, owner(widget1v1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(widget1v1, virtual), makeNode(widget2v1),
					makeNode(cm1, withOwners(owner(widget1v1))), makeNode(cm2, withOwners(owner(widget1v1))),
				},
				effects: Effects{AttemptDelete: uids(cm2)},
				owners:  map[types.UID][]OwnerState{cm2.UID: {OwnerAbsent}},
			}),
		},
	},
	{
		name: "unwatched: the identity nobody claims is checked once a reference claims it",
		steps: []step{
			processEvent(observed(obj(widget1v1))),
			processEvent(observed(obj(cm2, owner(widget1v2)))),
			// Only cm2 refers to widget1, at v2, and its check is still
			// pending (a mismatch): nothing new to ask. Nobody claims
			// widget1's identity (v1): no GET nobody needs.
			processEvent(unwatched("example.com/v1", "Widget")),
			assertState(state{
				nodes:  []NodeView{makeNode(widget1v1, virtual), makeNode(cm2, withOwners(owner(widget1v2)))},
				owners: map[types.UID][]OwnerState{cm2.UID: {OwnerUnknown}},
			}),
			// The first reference claiming it asks for the check...
			processEvent(observed(obj(cm1, owner(widget1v1)))),
			assertState(state{
				nodes:   []NodeView{makeNode(widget1v1, virtual), makeNode(cm1, withOwners(owner(widget1v1))), makeNode(cm2, withOwners(owner(widget1v2)))},
				effects: Effects{VerifyOwner: []Ref{widget1v1}},
				owners:  map[types.UID][]OwnerState{cm1.UID: {OwnerUnknown}},
			}),
			// ...the next one waits for that answer, and inherits it.
			processEvent(observed(obj(pod1ns1, owner(widget1v1)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(widget1v1, virtual), makeNode(cm1, withOwners(owner(widget1v1))),
					makeNode(cm2, withOwners(owner(widget1v2))), makeNode(pod1ns1, withOwners(owner(widget1v1))),
				},
				owners: map[types.UID][]OwnerState{pod1ns1.UID: {OwnerUnknown}},
			}),
			processEvent(verified(widget1v1, true)),
			assertState(state{
				nodes: []NodeView{
					makeNode(widget1v1, virtual), makeNode(cm1, withOwners(owner(widget1v1))),
					makeNode(cm2, withOwners(owner(widget1v2))), makeNode(pod1ns1, withOwners(owner(widget1v1))),
				},
				owners: map[types.UID][]OwnerState{cm1.UID: {OwnerVerifiedPresent}, cm2.UID: {OwnerUnknown}, pod1ns1.UID: {OwnerVerifiedPresent}},
			}),
		},
	},
	{
		name: "unwatched: a blocking dependent of a stopped kind stops blocking; observed again, it is decided again",
		steps: []step{
			processEvent(observed(deleting(obj(rs1), FinalizerForeground))),
			processEvent(observed(obj(widget1v1, owner(rs1, blocking)))),
			processEvent(observed(obj(pod1, owner(rs1, blocking)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerForeground)),
					makeNode(widget1v1, withOwners(owner(rs1, blocking))), makeNode(pod1, withOwners(owner(rs1, blocking))),
				},
				effects:  Effects{AttemptDelete: uids(pod1)},
				blocking: map[types.UID]int{rs1.UID: 2},
			}),
			// widget1 is referenced by nobody: released
			processEvent(unwatched("example.com/v1", "Widget")),
			assertState(state{
				nodes:    []NodeView{makeNode(rs1, deletingNode(FinalizerForeground)), makeNode(pod1, withOwners(owner(rs1, blocking)))},
				effects:  Effects{RecheckOwner: uids(rs1)},
				blocking: map[types.UID]int{rs1.UID: 1},
			}),
			processEvent(observed(obj(widget1v2, owner(rs1, blocking)))),
			assertState(state{
				nodes: []NodeView{
					makeNode(rs1, deletingNode(FinalizerForeground)),
					makeNode(widget1v2, withOwners(owner(rs1, blocking))), makeNode(pod1, withOwners(owner(rs1, blocking))),
				},
				effects:  Effects{AttemptDelete: uids(widget1v2)},
				owners:   map[types.UID][]OwnerState{widget1v2.UID: {OwnerDeletingDependents}},
				blocking: map[types.UID]int{rs1.UID: 2},
			}),
		},
	},
	{
		name: "unwatched: a dependent of a stopped kind whose owner went meanwhile is decided again",
		steps: []step{
			processEvent(observed(obj(cm1))),
			processEvent(observed(obj(widget1v1, owner(cm1)))),
			processEvent(unwatched("example.com/v1", "Widget")),
			assertState(state{nodes: []NodeView{makeNode(cm1)}}),
			processEvent(deleted(cm1)),
			assertState(state{}),
			processEvent(observed(obj(widget1v2, owner(cm1)))),
			assertState(state{
				nodes:   []NodeView{makeNode(cm1, virtual), makeNode(widget1v2, withOwners(owner(cm1)))},
				effects: Effects{VerifyOwner: []Ref{cm1}},
			}),
			processEvent(verified(cm1, false)),
			assertState(state{
				nodes:   []NodeView{makeNode(cm1, virtual), makeNode(widget1v2, withOwners(owner(cm1)))},
				effects: Effects{AttemptDelete: uids(widget1v2)},
				owners:  map[types.UID][]OwnerState{widget1v2.UID: {OwnerAbsent}},
			}),
		},
	},
	{
		name: "unwatched: an owner last observed orphaning stays orphaned",
		steps: []step{
			processEvent(observed(deleting(obj(widget1v1), FinalizerOrphan))),
			processEvent(observed(obj(cm1, owner(widget1v1)))),
			processEvent(observed(deleting(obj(widget2v1), FinalizerOrphan))),
			processEvent(unwatched("example.com/v1", "Widget")),
			assertState(state{
				nodes:   []NodeView{makeNode(widget1v1, virtual), makeNode(cm1, withOwners(owner(widget1v1)))},
				effects: Effects{VerifyOwner: []Ref{widget1v1}},
				owners:  map[types.UID][]OwnerState{cm1.UID: {OwnerUnknown}},
				stats:   &Stats{Nodes: 2, Observed: 1, Virtual: 1, RetainedOrphans: 1, PerResource: map[string]int{"v1, Kind=ConfigMap": 1}},
			}),
			// widget2 had no dependent: remembered like any released orphaned owner
			assertRetained(widget2v1),
			// gone: cm1 loses the reference, it is never deleted because of it
			processEvent(verified(widget1v1, false)),
			assertState(state{
				nodes:   []NodeView{makeNode(widget1v1, virtual), makeNode(cm1, withOwners(owner(widget1v1)))},
				effects: Effects{AttemptDelete: uids(cm1)},
				owners:  map[types.UID][]OwnerState{cm1.UID: {OwnerOrphaned}},
			}),
		},
	},
	{
		name: "unwatched: tombstones, other kinds and unknown kinds are untouched",
		steps: []step{
			processEvent(observed(obj(widget2v1))),
			processEvent(observed(obj(cm2, owner(widget2v1)))),
			processEvent(deleted(widget2v1)),
			processEvent(observed(obj(cm1, owner(cm2)))),
			processEvent(unwatched("example.com/v1", "Widget")),
			processEvent(unwatched("v9", "Nothing")),
			assertState(state{
				nodes:  []NodeView{makeNode(widget2v1, absent), makeNode(cm2, withOwners(owner(widget2v1))), makeNode(cm1, withOwners(owner(cm2)))},
				owners: map[types.UID][]OwnerState{cm2.UID: {OwnerAbsent}, cm1.UID: {OwnerPresent}},
			}),
			// the ConfigMaps' own resource stops being watched: cm1 is
			// released, cm2 (cm1's owner) too once cm1 dropped its
			// reference; the tombstone goes with its last dependent
			processEvent(unwatched("v1", "ConfigMap")),
			assertState(state{stats: &Stats{PerResource: map[string]int{}}}),
		},
	},
}
