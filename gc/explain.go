package gc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
)

// Explanation is what cascade knows about one object and what it would do about it now: the
// ownership subgraph around it (its owners and its dependents) with the graph's verdict on
// each reference, and the collector's decision. /debug/graph serves it; `cascade explain`
// prints it.
type Explanation struct {
	// Mode is "companion" when cascade runs beside kube-controller-manager's collector
	// (--mode=companion): the Decision is then what that collector would do (no collect rule
	// applies), and cascade carries none out. Empty: cascade is the collector.
	Mode   string          `json:"mode,omitempty"`
	Object ExplainedObject `json:"object"`
	// State is observed, virtual (referenced, never observed), absent (observed deleted, still
	// referenced) or orphaned (absent, deleted with the orphan policy).
	State string `json:"state"`
	// Resource is the watched resource of the object's kind ("" when not watched) and whether
	// its view is incomplete.
	Resource string `json:"resource,omitempty"`
	Unsynced bool   `json:"unsynced,omitempty"`
	// Deleting and Finalizers (the GC ones the graph tracks) of an observed object.
	Deleting   bool             `json:"deleting,omitempty"`
	Finalizers []string         `json:"finalizers,omitempty"`
	Owners     []ExplainedOwner `json:"owners,omitempty"`
	// Decision is what the collector would decide now (observed objects with owners, of a
	// watched resource).
	Decision *ExplainedDecision `json:"decision,omitempty"`
	// Dependents are the objects that reference this one; BlockingDependents how many of them
	// block its foreground deletion.
	Dependents         []ExplainedDependent `json:"dependents,omitempty"`
	BlockingDependents int                  `json:"blockingDependents"`
	// OtherNamespaceDependents counts the dependents left out of Dependents because they are
	// not in the namespace the asker was authorized for (the aggregated API's namespaced path):
	// a reader of one namespace learns how many, not which.
	OtherNamespaceDependents int `json:"otherNamespaceDependents,omitempty"`
}

// KeepNamespace leaves in e only the dependents in namespace ns, counting the others in
// OtherNamespaceDependents: what a reader authorized in ns alone may see.
func (e *Explanation) KeepNamespace(ns string) {
	kept := e.Dependents[:0:0]
	for _, d := range e.Dependents {
		if d.Namespace == ns {
			kept = append(kept, d)
		} else {
			e.OtherNamespaceDependents++
		}
	}
	e.Dependents = kept
}

// ExplainedObject identifies an object.
type ExplainedObject struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
}

// ExplainedOwner is one owner reference and the graph's verdict on it.
type ExplainedOwner struct {
	ExplainedObject
	Controller         bool `json:"controller,omitempty"`
	BlockOwnerDeletion bool `json:"blockOwnerDeletion,omitempty"`
	// State is the graph's verdict (graph.OwnerState) and Meaning says it in words.
	State   string `json:"state"`
	Meaning string `json:"meaning"`
	// UnknownKind: the owner's apiVersion/kind has no REST mapping: never collected on it.
	UnknownKind bool `json:"unknownKind,omitempty"`
	// Finalizers of an observed owner being deleted (the GC ones).
	Finalizers []string `json:"finalizers,omitempty"`
}

// ExplainedDecision is the decision the workers take on the current view (policy.Decide's).
type ExplainedDecision struct {
	Action      string      `json:"action"`
	Reason      string      `json:"reason"`
	Owners      []types.UID `json:"owners,omitempty"`
	Propagation string      `json:"propagation,omitempty"`
	// Unmapped are the owners whose references are kept because their kind has no REST mapping.
	Unmapped []types.UID `json:"unmapped,omitempty"`
	// Error says why no decision can be taken now (Action and Reason are empty): the workers
	// retry it.
	Error string `json:"error,omitempty"`
}

// ExplainedDependent is one object that references the explained one.
type ExplainedDependent struct {
	ExplainedObject
	// Blocking: it references the object with blockOwnerDeletion=true.
	Blocking bool `json:"blocking,omitempty"`
	Deleting bool `json:"deleting,omitempty"`
	// Finalizers are the live object's (read for blocking dependents only, at most
	// maxExplainedReads of them): what holds a dependent that is being deleted.
	Finalizers []string `json:"finalizers,omitempty"`
	// Unsynced: its resource's view is incomplete.
	Unsynced bool `json:"unsynced,omitempty"`
}

// ModeCompanion is Explanation.Mode in --mode=companion.
const ModeCompanion = client.ModeCompanion

// maxExplainedReads bounds the live GETs one explanation makes.
const maxExplainedReads = 10

var ownerMeanings = map[graph.OwnerState]string{
	graph.OwnerUnknown:            "never observed and not verified yet: the dependent waits",
	graph.OwnerVerifiedPresent:    "never observed (its kind is not watched), found present by a live GET: keeps the dependent",
	graph.OwnerPresent:            "observed, present: keeps the dependent",
	graph.OwnerBeingDeleted:       "observed, being deleted (not in the foreground): still keeps the dependent",
	graph.OwnerDeletingDependents: "observed, being deleted in the foreground: waits for its dependents",
	graph.OwnerAbsent:             "gone (observed deleted, or verified absent): the reference is dangling",
	graph.OwnerInvalidNamespace:   "observed in another namespace: invalid for this dependent (OwnerRefInvalidNamespace), counts as gone",
	graph.OwnerUnresolvable:       "a namespaced owner named by a cluster-scoped dependent: never collected on it",
	graph.OwnerMismatch:           "its UID is observed at other coordinates; this claim is being verified: the dependent waits",
	graph.OwnerOrphaned:           "gone, deleted with the orphan policy: the reference is removed, never a reason to delete",
}

func explainedObject(r graph.Ref) ExplainedObject {
	return ExplainedObject{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID}
}

func finalizerNames(f graph.Finalizers) []string {
	var out []string
	if f.Has(graph.FinalizerOrphan) {
		out = append(out, "orphan")
	}
	if f.Has(graph.FinalizerForeground) {
		out = append(out, "foregroundDeletion")
	}
	return out
}

// Explain returns the explanation of uid, or false when the graph does not know it.
func (c *Controller) Explain(ctx context.Context, uid types.UID) (Explanation, bool) {
	c.mu.RLock()
	n, ok := c.g.Node(uid)
	var owners []graph.OwnerView
	var deps []graph.Ref
	var depOwners [][]graph.OwnerView
	var ownerNodes []graph.NodeView
	blocking := 0
	if ok {
		owners = c.g.Owners(uid)
		deps = c.g.Dependents(uid)
		for _, d := range deps {
			depOwners = append(depOwners, c.g.Owners(d.UID))
		}
		for _, o := range owners {
			on, _ := c.g.Node(o.UID)
			ownerNodes = append(ownerNodes, on)
		}
		blocking = c.g.BlockingDependents(uid)
	}
	c.mu.RUnlock()
	if !ok {
		return Explanation{}, false
	}
	e := Explanation{Object: explainedObject(n.Ref), Deleting: n.Deleting, Finalizers: finalizerNames(n.Finalizers), BlockingDependents: blocking}
	if c.opts.Companion {
		e.Mode = ModeCompanion
	}
	switch {
	case n.Virtual:
		e.State = "virtual"
	case n.Absent && n.Orphaned:
		e.State = "orphaned"
	case n.Absent:
		e.State = "absent"
	default:
		e.State = "observed"
	}
	if res, unsynced := c.monitors.kindUnsynced(n.APIVersion, n.Kind); res.GVR.Resource != "" {
		e.Resource, e.Unsynced = GVRString(res.GVR), unsynced
	}
	for i, o := range owners {
		eo := ExplainedOwner{
			ExplainedObject:    ExplainedObject{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID},
			Controller:         o.Controller,
			BlockOwnerDeletion: o.BlockOwnerDeletion,
			State:              o.State.String(),
			Meaning:            ownerMeanings[o.State],
		}
		if on := ownerNodes[i]; !on.Virtual && !on.Absent {
			eo.Namespace = on.Namespace
			eo.Finalizers = finalizerNames(on.Finalizers)
		}
		switch c.ownerKind(ctx, o.APIVersion, o.Kind, n.Namespace) { // as the decision resolves it (decide.go)
		case kindGone:
			eo.UnknownKind = true
			eo.Meaning += " (no REST mapping: its CRD was seen deleted and nothing serves the kind now: taken as absent)"
		case kindUnmapped:
			eo.UnknownKind = true
			eo.Meaning += " (no REST mapping for this apiVersion/kind: never collected on it)"
		}
		e.Owners = append(e.Owners, eo)
	}
	// The workers' decision (decide.go): they decide on observed objects with owners, of a
	// watched resource.
	if res, ok := c.monitors.resourceFor(n.APIVersion, n.Kind); ok && !n.Virtual && !n.Absent && len(owners) > 0 {
		if _, d, err := c.decide(ctx, res, n, owners); err != nil {
			msg := err.Error()
			if c.opts.ErrorText != nil {
				msg = c.opts.ErrorText(msg)
			}
			e.Decision = &ExplainedDecision{Error: msg}
		} else {
			e.Decision = &ExplainedDecision{Action: d.Action.String(), Reason: string(d.Reason), Owners: d.Owners,
				Propagation: string(d.Propagation), Unmapped: d.Unmapped}
		}
	}
	reads := 0
	for i, d := range deps {
		ed := ExplainedDependent{ExplainedObject: explainedObject(d)}
		ed.Blocking = slices.ContainsFunc(depOwners[i], func(o graph.OwnerView) bool { return o.UID == uid && o.BlockOwnerDeletion })
		if res, unsynced := c.monitors.kindUnsynced(d.APIVersion, d.Kind); unsynced {
			ed.Unsynced = true
		} else if ed.Blocking && reads < maxExplainedReads && res.GVR.Resource != "" {
			reads++
			ns := d.Namespace
			if !res.Namespaced {
				ns = ""
			}
			if live, err := c.opts.Client.Get(ctx, res.GVR, ns, d.Name); err == nil && live.UID == d.UID {
				ed.Deleting, ed.Finalizers = live.DeletionTimestamp != nil, live.Finalizers
			}
		}
		e.Dependents = append(e.Dependents, ed)
	}
	return e, true
}

// findObject resolves resource (plural, or plural.group) namespace/name to an observed UID.
func (c *Controller) findObject(resource, namespace, name string) (types.UID, error) {
	res, group, _ := strings.Cut(resource, ".")
	var found *Resource
	for gvr, r := range c.Resources() {
		if gvr.Resource == res && gvr.Group == group {
			found = &r
			break
		}
	}
	if found == nil {
		return "", fmt.Errorf("resource %q is not watched", resource)
	}
	if !found.Namespaced {
		namespace = ""
	}
	c.mu.RLock()
	uid, ok := c.g.Find(found.GVR.GroupVersion().String(), found.Kind, namespace, name)
	c.mu.RUnlock()
	if !ok {
		return "", fmt.Errorf("%s %s/%s is not in the graph", resource, namespace, name)
	}
	return uid, nil
}

// ExplainNamed is Explain for the object of resource (plural[.group]) named namespace/name (the
// namespace is ignored for a cluster-scoped resource); the error says why there is none: the
// resource is not watched, or the graph does not have the object.
func (c *Controller) ExplainNamed(ctx context.Context, resource, namespace, name string) (Explanation, error) {
	uid, err := c.findObject(resource, namespace, name)
	if err != nil {
		return Explanation{}, err
	}
	e, ok := c.Explain(ctx, uid)
	if !ok {
		return Explanation{}, fmt.Errorf("%s %s/%s is not in the graph", resource, namespace, name)
	}
	return e, nil
}

// DebugGraph serves /debug/graph: ?uid=UID, or ?resource=RESOURCE[.GROUP]&namespace=NS&name=NAME,
// and &format=dot for Graphviz instead of JSON.
func (c *Controller) DebugGraph(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	uid := types.UID(q.Get("uid"))
	if uid == "" {
		if q.Get("resource") == "" || q.Get("name") == "" {
			http.Error(w, "give uid=, or resource=, name= (and namespace=)", http.StatusBadRequest)
			return
		}
		var err error
		if uid, err = c.findObject(q.Get("resource"), q.Get("namespace"), q.Get("name")); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
	}
	e, ok := c.Explain(r.Context(), uid)
	if !ok {
		http.Error(w, fmt.Sprintf("uid %s is not in the graph", uid), http.StatusNotFound)
		return
	}
	if q.Get("format") == "dot" {
		w.Header().Set("Content-Type", "text/vnd.graphviz")
		_, _ = w.Write([]byte(e.DOT()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(e)
}

// DOT renders the subgraph: owners above, dependents below, one edge per reference.
func (e Explanation) DOT() string {
	var b strings.Builder
	label := func(o ExplainedObject) string {
		return fmt.Sprintf("%s\\n%s/%s", o.Kind, o.Namespace, o.Name)
	}
	fmt.Fprintf(&b, "digraph cascade {\n  rankdir=BT;\n  %q [label=%q, style=bold];\n", e.Object.UID, label(e.Object)+"\\n"+e.State)
	for _, o := range e.Owners {
		fmt.Fprintf(&b, "  %q [label=%q];\n  %q -> %q [label=%q];\n", o.UID, label(o.ExplainedObject), e.Object.UID, o.UID, o.State)
	}
	for _, d := range e.Dependents {
		style := ""
		if d.Blocking {
			style = ", style=bold"
		}
		fmt.Fprintf(&b, "  %q [label=%q];\n  %q -> %q [label=%q%s];\n", d.UID, label(d.ExplainedObject), d.UID, e.Object.UID, "owner", style)
	}
	b.WriteString("}\n")
	return b.String()
}
