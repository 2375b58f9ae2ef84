package graph

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// Scenario tests in the style of in-tree TestConflictingData: a list of
// steps, each an event followed by an assertion of the whole graph and of
// the effects of that event. The invariants (invariants_test.go) are
// checked after every step.

func makeRef(apiVersion, kind, namespace, name, uid string) Ref {
	return Ref{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name, UID: types.UID(uid)}
}

type refOpt func(*OwnerRef)

func blocking(r *OwnerRef)   { r.BlockOwnerDeletion = true }
func controller(r *OwnerRef) { r.Controller = true }

// owner is a reference to r as a dependent would write it (r.Namespace is
// not part of a reference).
func owner(r Ref, opts ...refOpt) OwnerRef {
	o := OwnerRef{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func obj(r Ref, owners ...OwnerRef) Object {
	return Object{Ref: r, ResourceVersion: "1", Owners: owners}
}

func deleting(o Object, f Finalizers) Object {
	o.Deleting, o.Finalizers = true, f
	return o
}

func withRV(o Object, rv string) Object {
	o.ResourceVersion = rv
	return o
}

func observed(o Object) Event { return Event{Type: EventObserved, Object: o} }
func deleted(r Ref) Event     { return Event{Type: EventDeleted, Object: Object{Ref: r}} }

// verified is the answer to a live check of claim c (coordinates as the
// dependent states them, Namespace where the GET was made).
func verified(c Ref, present bool) Event {
	return Event{Type: EventOwnerVerified, Owner: c, Present: present}
}

// claimIn is the identity that reference r makes from namespace ns.
func claimIn(r Ref, ns string) Ref {
	r.Namespace = ns
	return r
}

// Expected nodes.

type nodeOpt func(*NodeView)

func virtual(v *NodeView)      { v.Virtual = true }
func absent(v *NodeView)       { v.Absent = true }
func orphanedNode(v *NodeView) { v.Absent, v.Orphaned = true, true }
func withOwners(owners ...OwnerRef) nodeOpt {
	return func(v *NodeView) { v.Owners = owners }
}
func deletingNode(f Finalizers) nodeOpt {
	return func(v *NodeView) { v.Deleting, v.Finalizers = true, f }
}

func makeNode(r Ref, opts ...nodeOpt) NodeView {
	v := NodeView{Ref: r}
	for _, f := range opts {
		f(&v)
	}
	return v
}

type state struct {
	nodes    []NodeView                 // every node in the graph
	effects  Effects                    // of the last event
	owners   map[types.UID][]OwnerState // states of some nodes' owner references
	blocking map[types.UID]int          // BlockingDependents of some nodes
	stats    *Stats
}

type step struct {
	name string
	run  func(t *testing.T, g *Graph, last *Effects)
}

func processEvent(ev Event) step {
	return step{fmt.Sprintf("%s %s", ev.Type, ev.Object.Ref.String()+ev.Owner.String()), func(t *testing.T, g *Graph, last *Effects) {
		*last = g.Apply(ev)
		if err := checkInvariants(g); err != nil {
			t.Fatalf("invariants: %v", err)
		}
	}}
}

func assertState(s state) step {
	return step{"assert", func(t *testing.T, g *Graph, last *Effects) {
		var got []NodeView
		for id := uint32(1); id <= g.top; id++ {
			if g.node(id).flags&kindMask == 0 {
				continue
			}
			v, ok := g.Node(g.uidOf(id))
			if !ok {
				t.Fatalf("node %d not found by its UID", id)
			}
			v.ResourceVersion, v.Dependents = "", 0 // not asserted here
			got = append(got, v)
		}
		byUID := func(a, b NodeView) int { return strings.Compare(string(a.UID), string(b.UID)) }
		slices.SortFunc(got, byUID)
		want := slices.Clone(s.nodes)
		slices.SortFunc(want, byUID)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("nodes\n got: %+v\nwant: %+v", got, want)
		}
		if g, w := normalize(*last), normalize(s.effects); !reflect.DeepEqual(g, w) {
			t.Errorf("effects\n got: %+v\nwant: %+v", g, w)
		}
		for uid, want := range s.owners {
			var got []OwnerState
			for _, o := range g.Owners(uid) {
				got = append(got, o.State)
			}
			if !slices.Equal(got, want) {
				t.Errorf("owner states of %s: got %v, want %v", uid, got, want)
			}
		}
		for uid, want := range s.blocking {
			if got := g.BlockingDependents(uid); got != want {
				t.Errorf("BlockingDependents(%s) = %d, want %d", uid, got, want)
			}
		}
		if s.stats != nil {
			if got := g.Stats(); !reflect.DeepEqual(got, *s.stats) {
				t.Errorf("stats\n got: %+v\nwant: %+v", got, *s.stats)
			}
		}
	}}
}

// assertRetained checks the owners the FIFO of retained orphans remembers,
// oldest first.
func assertRetained(want ...Ref) step {
	return step{"assert", func(t *testing.T, g *Graph, _ *Effects) {
		var got []Ref
		for _, r := range retainedRefs(g) {
			if r.UID != holeUID {
				got = append(got, r)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("retained orphans\n got: %v\nwant: %v", got, want)
		}
	}}
}

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

func uids(us ...Ref) []types.UID {
	var out []types.UID
	for _, u := range us {
		out = append(out, u.UID)
	}
	return out
}

var (
	// Canonical UUIDs (stored compact).
	rs1  = makeRef("apps/v1", "ReplicaSet", "ns1", "rs1", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0001")
	pod1 = makeRef("v1", "Pod", "ns1", "pod1", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0002")
	pod2 = makeRef("v1", "Pod", "ns1", "pod2", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0003")
	pod3 = makeRef("v1", "Pod", "ns2", "pod3", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0004")

	// The identities of in-tree TestConflictingData (side-table UIDs).
	pod1ns1 = makeRef("v1", "Pod", "ns1", "podname1", "poduid1")
	pod2ns1 = makeRef("v1", "Pod", "ns1", "podname2", "poduid2")
	pod2ns2 = makeRef("v1", "Pod", "ns2", "podname2", "poduid2")
	node1   = makeRef("v1", "Node", "", "nodename", "nodeuid1")

	role1v1beta1 = makeRef("rbac.authorization.k8s.io/v1beta1", "Role", "ns1", "role1", "roleuid1")
	role1v1      = makeRef("rbac.authorization.k8s.io/v1", "Role", "ns1", "role1", "roleuid1")

	deployment1apps       = makeRef("apps/v1", "Deployment", "ns1", "deployment1", "deploymentuid1")
	deployment1extensions = makeRef("extensions/v1beta1", "Deployment", "ns1", "deployment1", "deploymentuid1") // not served, still referenced

	node1WithNamespace = makeRef("v1", "Node", "ns1", "nodename", "nodeuid1")
	pod1nonamespace    = makeRef("v1", "Pod", "", "podname1", "poduid1")

	badSecretReferenceWithDeploymentUID = makeRef("v1", "Secret", "ns1", "secretname", string(deployment1apps.UID))
	badChildPod                         = makeRef("v1", "Pod", "ns1", "badpod", "badpoduid")
	goodChildPod                        = makeRef("v1", "Pod", "ns1", "goodpod", "goodpoduid")

	rs2 = makeRef("apps/v1", "ReplicaSet", "ns1", "rs2", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0005")

	// A custom resource whose preferred version moves from v1 to v2, and
	// ConfigMaps.
	widget1v1 = makeRef("example.com/v1", "Widget", "ns1", "widget1", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0006")
	widget1v2 = makeRef("example.com/v2", "Widget", "ns1", "widget1", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0006")
	widget2v1 = makeRef("example.com/v1", "Widget", "ns1", "widget2", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0007")
	cm1       = makeRef("v1", "ConfigMap", "ns1", "cm1", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0008")
	cm2       = makeRef("v1", "ConfigMap", "ns1", "cm2", "8d6ec1f4-6b2c-4f45-9a43-4e5c9d3e0009")
)

// unwatched reports that the resource of apiVersion/kind is no longer
// watched.
func unwatched(apiVersion, kind string) Event {
	return Event{Type: EventUnwatched, Object: Object{Ref: Ref{APIVersion: apiVersion, Kind: kind}}}
}

// recorded reports that another process recorded r as being deleted with
// the orphan policy (EventOrphanRecorded).
func recorded(r Ref) Event { return Event{Type: EventOrphanRecorded, Object: Object{Ref: r}} }

func TestScenarios(t *testing.T) {
	scenarios := []struct {
		name   string
		retain int // Options.RetainedOrphans; 0: the default
		steps  []step
	}{
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
		{
			name: "good child in ns1 -> cluster-scoped owner",
			steps: []step{
				// observe namespaced child with not-yet-observed cluster-scoped parent
				processEvent(observed(obj(pod1ns1, owner(node1)))),
				assertState(state{
					nodes:   []NodeView{makeNode(pod1ns1, withOwners(owner(node1))), makeNode(node1WithNamespace, virtual)}, // virtual node1 (child's namespace)
					effects: Effects{VerifyOwner: []Ref{node1WithNamespace}},                                                // claim checked in the child's namespace
					owners:  map[types.UID][]OwnerState{pod1ns1.UID: {OwnerUnknown}},
				}),
				// the collector knows Node is cluster-scoped: checked with no namespace, found
				processEvent(verified(node1, true)),
				assertState(state{
					nodes:  []NodeView{makeNode(pod1ns1, withOwners(owner(node1))), makeNode(node1WithNamespace, virtual)},
					owners: map[types.UID][]OwnerState{pod1ns1.UID: {OwnerVerifiedPresent}},
				}),
				// observe cluster-scoped parent: namespace coordinate corrected, no longer virtual
				processEvent(observed(obj(node1))),
				assertState(state{
					nodes:  []NodeView{makeNode(pod1ns1, withOwners(owner(node1))), makeNode(node1)},
					owners: map[types.UID][]OwnerState{pod1ns1.UID: {OwnerPresent}},
				}),
			},
		},
		{
			name: "bad child in ns1 -> owner in ns2 (child first)",
			steps: []step{
				processEvent(observed(obj(pod1ns1, owner(pod2ns2)))),
				assertState(state{
					nodes:   []NodeView{makeNode(pod1ns1, withOwners(owner(pod2ns2))), makeNode(pod2ns1, virtual)},
					effects: Effects{VerifyOwner: []Ref{pod2ns1}},
				}),
				// the check in ns1 finds nothing: absent for pod1
				processEvent(verified(pod2ns1, false)),
				assertState(state{
					nodes:   []NodeView{makeNode(pod1ns1, withOwners(owner(pod2ns2))), makeNode(pod2ns1, virtual)},
					effects: Effects{AttemptDelete: uids(pod1ns1)},
					owners:  map[types.UID][]OwnerState{pod1ns1.UID: {OwnerAbsent}},
				}),
				// observe parent in ns2: bad child reported, re-decided
				processEvent(observed(obj(pod2ns2))),
				assertState(state{
					nodes: []NodeView{makeNode(pod1ns1, withOwners(owner(pod2ns2))), makeNode(pod2ns2)},
					effects: Effects{
						AttemptDelete:    uids(pod1ns1),
						InvalidNamespace: []InvalidRef{{Dependent: pod1ns1, Owner: owner(pod2ns2)}},
					},
					owners: map[types.UID][]OwnerState{pod1ns1.UID: {OwnerInvalidNamespace}},
				}),
				// the collector deletes pod1; only the good parent remains
				processEvent(deleted(pod1ns1)),
				assertState(state{nodes: []NodeView{makeNode(pod2ns2)}}),
			},
		},
		{
			name: "bad child in ns1 -> owner in ns2 (owner first)",
			steps: []step{
				processEvent(observed(obj(pod2ns2))),
				assertState(state{nodes: []NodeView{makeNode(pod2ns2)}}),
				processEvent(observed(obj(pod1ns1, owner(pod2ns1)))),
				assertState(state{
					nodes: []NodeView{makeNode(pod1ns1, withOwners(owner(pod2ns1))), makeNode(pod2ns2)},
					effects: Effects{
						AttemptDelete:    uids(pod1ns1),
						InvalidNamespace: []InvalidRef{{Dependent: pod1ns1, Owner: owner(pod2ns1)}},
					},
					owners: map[types.UID][]OwnerState{pod1ns1.UID: {OwnerInvalidNamespace}},
				}),
				// a late answer for the claim changes nothing: observation decides
				processEvent(verified(pod2ns1, false)),
				assertState(state{
					nodes:  []NodeView{makeNode(pod1ns1, withOwners(owner(pod2ns1))), makeNode(pod2ns2)},
					owners: map[types.UID][]OwnerState{pod1ns1.UID: {OwnerInvalidNamespace}},
				}),
				processEvent(deleted(pod1ns1)),
				assertState(state{nodes: []NodeView{makeNode(pod2ns2)}}),
			},
		},
		{
			name: "bad cluster-scoped child -> owner in ns1 (child first)",
			steps: []step{
				processEvent(observed(obj(node1, owner(pod1ns1)))),
				assertState(state{
					nodes:   []NodeView{makeNode(node1, withOwners(owner(pod1ns1))), makeNode(pod1nonamespace, virtual)}, // virtual pod1 with no namespace
					effects: Effects{VerifyOwner: []Ref{pod1nonamespace}},                                                // the collector must not check a namespaced kind with no namespace
				}),
				processEvent(observed(obj(pod1ns1))),
				assertState(state{
					nodes:   []NodeView{makeNode(node1, withOwners(owner(pod1ns1))), makeNode(pod1ns1)},
					effects: Effects{InvalidNamespace: []InvalidRef{{Dependent: node1, Owner: owner(pod1ns1)}}}, // reported, never collectable: not attempted
					owners:  map[types.UID][]OwnerState{node1.UID: {OwnerUnresolvable}},
				}),
				// even when the owner goes, the child is only re-decided: its reference stays unresolvable
				processEvent(deleted(pod1ns1)),
				assertState(state{
					nodes:   []NodeView{makeNode(node1, withOwners(owner(pod1ns1))), makeNode(pod1ns1, absent)},
					effects: Effects{AttemptDelete: uids(node1)},
					owners:  map[types.UID][]OwnerState{node1.UID: {OwnerUnresolvable}},
				}),
			},
		},
		{
			name: "bad cluster-scoped child -> owner in ns1 (owner first)",
			steps: []step{
				processEvent(observed(obj(pod1ns1))),
				assertState(state{nodes: []NodeView{makeNode(pod1ns1)}}),
				processEvent(observed(obj(node1, owner(pod1ns1)))),
				assertState(state{
					nodes:   []NodeView{makeNode(node1, withOwners(owner(pod1ns1))), makeNode(pod1ns1)},
					effects: Effects{InvalidNamespace: []InvalidRef{{Dependent: node1, Owner: owner(pod1ns1)}}},
					owners:  map[types.UID][]OwnerState{node1.UID: {OwnerUnresolvable}},
				}),
			},
		},
		{
			name: "good child -> existing owner with non-preferred accessible API version",
			steps: []step{
				processEvent(observed(obj(pod1ns1, owner(role1v1beta1)))),
				assertState(state{
					nodes:   []NodeView{makeNode(pod1ns1, withOwners(owner(role1v1beta1))), makeNode(role1v1beta1, virtual)},
					effects: Effects{VerifyOwner: []Ref{role1v1beta1}},
				}),
				// observe parent via v1: the claim disagrees; its check is already pending
				processEvent(observed(obj(role1v1))),
				assertState(state{
					nodes:  []NodeView{makeNode(pod1ns1, withOwners(owner(role1v1beta1))), makeNode(role1v1)},
					owners: map[types.UID][]OwnerState{pod1ns1.UID: {OwnerMismatch}},
				}),
				// the v1beta1 GET finds the same UID: solid, nothing to do
				processEvent(verified(role1v1beta1, true)),
				assertState(state{
					nodes:  []NodeView{makeNode(pod1ns1, withOwners(owner(role1v1beta1))), makeNode(role1v1)},
					owners: map[types.UID][]OwnerState{pod1ns1.UID: {OwnerPresent}},
				}),
				// observe delete via v1: authoritative for every claim on the UID
				processEvent(deleted(role1v1)),
				assertState(state{
					nodes:   []NodeView{makeNode(pod1ns1, withOwners(owner(role1v1beta1))), makeNode(role1v1, absent)},
					effects: Effects{AttemptDelete: uids(pod1ns1)},
					owners:  map[types.UID][]OwnerState{pod1ns1.UID: {OwnerAbsent}},
				}),
				// the child goes; the tombstone goes with its last dependent
				processEvent(deleted(pod1ns1)),
				assertState(state{}),
			},
		},
		{
			name: "bad child -> existing owner with inaccessible API version",
			steps: []step{
				processEvent(observed(obj(deployment1apps))),
				processEvent(observed(obj(pod1ns1, owner(deployment1extensions)))),
				assertState(state{
					nodes:   []NodeView{makeNode(pod1ns1, withOwners(owner(deployment1extensions))), makeNode(deployment1apps)},
					effects: Effects{VerifyOwner: []Ref{deployment1extensions}},
					owners:  map[types.UID][]OwnerState{pod1ns1.UID: {OwnerMismatch}},
				}),
				processEvent(verified(deployment1extensions, false)),
				assertState(state{
					nodes:   []NodeView{makeNode(pod1ns1, withOwners(owner(deployment1extensions))), makeNode(deployment1apps)},
					effects: Effects{AttemptDelete: uids(pod1ns1)},
					owners:  map[types.UID][]OwnerState{pod1ns1.UID: {OwnerAbsent}},
				}),
			},
		},
		{
			name: "parent with conflicting dependents: bad child first, both verified",
			steps: []step{
				processEvent(observed(obj(badChildPod, owner(badSecretReferenceWithDeploymentUID)))),
				assertState(state{
					nodes:   []NodeView{makeNode(badChildPod, withOwners(owner(badSecretReferenceWithDeploymentUID))), makeNode(badSecretReferenceWithDeploymentUID, virtual)},
					effects: Effects{VerifyOwner: []Ref{badSecretReferenceWithDeploymentUID}},
				}),
				// a second claim on the same UID is checked too
				processEvent(observed(obj(goodChildPod, owner(deployment1apps)))),
				assertState(state{
					nodes: []NodeView{
						makeNode(badChildPod, withOwners(owner(badSecretReferenceWithDeploymentUID))),
						makeNode(goodChildPod, withOwners(owner(deployment1apps))),
						makeNode(badSecretReferenceWithDeploymentUID, virtual),
					},
					effects: Effects{VerifyOwner: []Ref{deployment1apps}},
				}),
				processEvent(verified(badSecretReferenceWithDeploymentUID, false)),
				assertState(state{
					nodes: []NodeView{
						makeNode(badChildPod, withOwners(owner(badSecretReferenceWithDeploymentUID))),
						makeNode(goodChildPod, withOwners(owner(deployment1apps))),
						makeNode(badSecretReferenceWithDeploymentUID, virtual),
					},
					effects: Effects{AttemptDelete: uids(badChildPod)}, // only the child that made that claim
					owners:  map[types.UID][]OwnerState{badChildPod.UID: {OwnerAbsent}, goodChildPod.UID: {OwnerUnknown}},
				}),
				processEvent(verified(deployment1apps, true)),
				assertState(state{
					nodes: []NodeView{
						makeNode(badChildPod, withOwners(owner(badSecretReferenceWithDeploymentUID))),
						makeNode(goodChildPod, withOwners(owner(deployment1apps))),
						makeNode(badSecretReferenceWithDeploymentUID, virtual),
					},
					owners: map[types.UID][]OwnerState{badChildPod.UID: {OwnerAbsent}, goodChildPod.UID: {OwnerVerifiedPresent}},
				}),
				// the real object replaces the virtual node; each claim keeps its verdict
				processEvent(observed(obj(deployment1apps))),
				assertState(state{
					nodes: []NodeView{
						makeNode(badChildPod, withOwners(owner(badSecretReferenceWithDeploymentUID))),
						makeNode(goodChildPod, withOwners(owner(deployment1apps))),
						makeNode(deployment1apps),
					},
					owners: map[types.UID][]OwnerState{badChildPod.UID: {OwnerAbsent}, goodChildPod.UID: {OwnerPresent}},
				}),
				processEvent(deleted(badChildPod)),
				assertState(state{
					nodes: []NodeView{makeNode(goodChildPod, withOwners(owner(deployment1apps))), makeNode(deployment1apps)},
				}),
			},
		},
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
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			g := NewWithOptions(Options{RetainedOrphans: s.retain})
			var last Effects
			for i, st := range s.steps {
				if st.name != "assert" {
					last = Effects{}
				}
				st.run(t, g, &last)
				if t.Failed() {
					t.Fatalf("step %d (%s) failed", i, st.name)
				}
			}
		})
	}
}

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
