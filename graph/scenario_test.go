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
// checked after every step. This file holds the steps, the assertions and
// the identities; the scenarios are in one table a theme:
// scenario_intree_test.go (in-tree TestConflictingData's cases),
// scenario_delete_test.go (background and foreground),
// scenario_orphan_test.go, scenario_virtual_test.go,
// scenario_update_test.go and scenario_unwatched_test.go.

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

type scenario struct {
	name   string
	retain int // Options.RetainedOrphans; 0: the default
	steps  []step
}

// TestScenarios runs the scenarios of every theme (scenario_*_test.go), each on a new graph.
func TestScenarios(t *testing.T) {
	scenarios := slices.Concat(inTreeScenarios, deleteScenarios, orphanScenarios, virtualScenarios, updateScenarios, unwatchedScenarios)
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
