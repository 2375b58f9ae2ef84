package gc

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/policy"
)

// The decision on a dependent. gc gathers its inputs (the graph's view, the kinds the REST
// mapper resolves, the policy's collect rule) and package policy decides: every rule is in
// policy.AttemptToDelete, none is applied after it. The workers (attemptToDelete) and Explain
// both call decide, so what `cascade explain` says is what the workers do.

// decide takes the decision on observed dependent n of resource res, with owners its references
// as the graph sees them. in is the decision's input (the workers carry some decisions out with
// it). An error (the namespace's labels could not be read for the policy's namespace selector)
// means no decision now: decide later.
func (c *Controller) decide(ctx context.Context, res Resource, n graph.NodeView, owners []graph.OwnerView) (in policy.Input, d policy.Decision, err error) {
	in = c.decisionInput(ctx, n, owners)
	if c.opts.Companion { // the in-tree collector decides, and knows no collect rule
		return in, policy.Decide(in), nil
	}
	if err := c.collectInput(ctx, res, n, &in); err != nil { // the policy's collect rule (policy.go)
		return in, policy.Decision{}, err
	}
	return in, policy.Decide(in), nil
}

// decisionInput is what policy.Decide looks at for observed node n with owners, from the
// graph's view, with the kinds of the references the decision may act on resolved: those to
// gone or waiting owners of a dependent not being deleted, the only ones policy.Owner.Unmapped
// matters on. A dependent kept by its owners, or waiting for their verification, costs no
// lookup.
func (c *Controller) decisionInput(ctx context.Context, n graph.NodeView, owners []graph.OwnerView) policy.Input {
	in := policy.Input{
		Owners:              make([]policy.Owner, 0, len(owners)),
		HasDependents:       n.Dependents > 0,
		OrphanFinalizer:     n.Finalizers.Has(graph.FinalizerOrphan),
		ForegroundFinalizer: n.Finalizers.Has(graph.FinalizerForeground),
		BeingDeleted:        n.Deleting,
	}
	for _, o := range owners {
		s := ownerState(o.State)
		unmapped := !n.Deleting && (s == policy.Dangling || s == policy.Waiting) &&
			c.ownerKind(ctx, o.APIVersion, o.Kind, n.Namespace) == kindUnmapped
		in.Owners = append(in.Owners, policy.Owner{UID: o.UID, State: s, Unmapped: unmapped})
	}
	if n.Dependents > 0 {
		in.DependentDeletingDependents = c.anyDependentDeletingDependents(n.UID)
	}
	return in
}

// kindResolution is what cascade makes of an owner reference's apiVersion and kind.
type kindResolution int

const (
	// kindMapped: the REST mapper resolves it.
	kindMapped kindResolution = iota
	// kindUnmapped: the apiVersion does not parse, the kind is empty, or it has no REST
	// mapping: the reference is never resolved, so never removed nor a reason to delete
	// (policy.Owner.Unmapped), as in-tree.
	kindUnmapped
	// kindGone: no REST mapping, but its CRD was seen deleted and nothing serves the kind now
	// (gonekinds.go): no owner of it can exist, so the reference is judged as any other.
	kindGone
)

// ownerKind resolves the kind of an owner reference of a dependent in namespace dependentNS
// ("" for a cluster-scoped one). A kind without REST mapping costs a mapper lookup every time
// (mappings.go) and, when its CRD was seen deleted, a live check (kindGone).
func (c *Controller) ownerKind(ctx context.Context, apiVersion, kind, dependentNS string) kindResolution {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" {
		return kindUnmapped
	}
	gk := gv.WithKind(kind).GroupKind()
	if _, err := c.restMapping(gk, gv.Version); err == nil {
		return kindMapped
	}
	if c.kindGone(ctx, gk, dependentNS) {
		return kindGone
	}
	return kindUnmapped
}

// anyDependentDeletingDependents is the in-tree cycle guard's test: is any dependent of uid
// itself being deleted in the foreground?
func (c *Controller) anyDependentDeletingDependents(uid types.UID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, d := range c.g.Dependents(uid) {
		if n, ok := c.g.Node(d.UID); ok && n.Deleting && n.Finalizers.Has(graph.FinalizerForeground) {
			return true
		}
	}
	return false
}

// ownerState maps the graph's verdict on one reference to the decision's input. Anything the
// graph cannot vouch for is Unknown, which never leads to a delete.
func ownerState(s graph.OwnerState) policy.OwnerState {
	switch {
	case s.Solid():
		return policy.Solid
	case s.Waiting():
		return policy.Waiting
	case s.Dangling():
		return policy.Dangling
	case s.Orphaned():
		return policy.Orphaned
	default: // Unknown, Mismatch (verification pending), Unresolvable (never collectable)
		return policy.Unknown
	}
}
