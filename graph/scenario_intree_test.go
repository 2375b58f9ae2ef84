package graph

import "k8s.io/apimachinery/pkg/types"

// The cases of in-tree TestConflictingData, with its identities: references across namespaces
// and scopes, owners seen through another or an unserved API version, and two dependents
// claiming one UID with different coordinates.
var inTreeScenarios = []scenario{
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
}
