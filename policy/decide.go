package policy

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// OwnerState is what the caller verified about one owner reference of a
// dependent. The zero value is Unknown, so an owner nobody classified is
// treated as the safe case.
type OwnerState int

const (
	// Unknown means the owner could not be classified yet: it has not been
	// verified, its kind has no REST mapping, the dependent is cluster-scoped
	// but the owner kind is namespaced, or its informer has not synced. An
	// Unknown owner blocks deletion of the dependent.
	Unknown OwnerState = iota
	// Solid means the owner exists and is not being deleted in the foreground.
	Solid
	// Dangling means the owner is verified absent: observed deleted, a 404 from
	// a synced resource, or an object with another UID at its coordinates.
	Dangling
	// Waiting means the owner exists, is being deleted and carries the
	// foregroundDeletion finalizer: it waits for its dependents to go
	// (the in-tree waitingForDependentsDeletion).
	Waiting
	// Orphaned means the owner is gone and was deleted with the orphan policy:
	// its dependents were to be kept. A reference to it is removed, and is
	// never a reason to delete the dependent.
	Orphaned
)

func (s OwnerState) String() string {
	switch s {
	case Unknown:
		return "Unknown"
	case Solid:
		return "Solid"
	case Dangling:
		return "Dangling"
	case Waiting:
		return "Waiting"
	case Orphaned:
		return "Orphaned"
	default:
		return fmt.Sprintf("OwnerState(%d)", int(s))
	}
}

// verified reports whether s is one of the states a caller can only reach by
// checking the owner. Out-of-range values count as Unknown.
func (s OwnerState) verified() bool {
	return s == Solid || s == Dangling || s == Waiting || s == Orphaned
}

// Owner is one owner reference of the dependent, reduced to what the decision
// needs.
type Owner struct {
	UID   types.UID
	State OwnerState
	// Unmapped is true when the reference's apiVersion and kind name no kind the caller can
	// resolve (no REST mapping, or they do not parse) and the kind is not known to be gone. The
	// in-tree collector cannot resolve such a reference and keeps the dependent; so does
	// cascade, whatever State says: the reference is never removed and never a reason to delete
	// (unmapped.go). It only matters on a Dangling or Waiting reference of a dependent that is
	// not being deleted; the caller may leave it unset on the others.
	Unmapped bool
}

// Input is everything the attempt-to-delete decision looks at. It is a plain
// value built by the caller from its view of the dependent; the decision never
// fetches anything.
type Input struct {
	// Owners holds one entry per owner reference of the dependent, in the order
	// of metadata.ownerReferences.
	Owners []Owner
	// HasDependents is true when the dependent is itself the owner of at least
	// one object.
	HasDependents bool
	// DependentDeletingDependents is true when at least one of the dependent's
	// own dependents is being deleted in the foreground (deletionTimestamp set
	// and foregroundDeletion finalizer present). It is the in-tree cycle guard.
	DependentDeletingDependents bool
	// OrphanFinalizer is true when the dependent carries
	// metav1.FinalizerOrphanDependents.
	OrphanFinalizer bool
	// ForegroundFinalizer is true when the dependent carries
	// metav1.FinalizerDeleteDependents.
	ForegroundFinalizer bool
	// BeingDeleted is true when the dependent has a deletionTimestamp.
	BeingDeleted bool

	// Collect is the policy's collect rule for the dependent (its resource and namespace). The
	// zero value collects as built in. Collect rules only ever turn a Delete into something
	// milder: they never cause a delete the built-in rules would not.
	Collect Collect
	// OrphanedAt is when cascade first found every owner of the dependent gone, as recorded on
	// the dependent (OrphanedAtAnnotation); zero when unknown or not read. Only collect: After
	// reads it.
	OrphanedAt time.Time
	// Now is the clock, read only by time-based rules (collect: After).
	Now time.Time
}

// Action is what the caller must do with the dependent.
type Action int

const (
	// Keep: nothing to do; forget the item until the next event.
	Keep Action = iota
	// Wait: the decision cannot be made yet: an owner is being verified, and its answer brings
	// the dependent back. Nothing to do until then.
	Wait
	// RemoveRefs: patch the owner references listed in Decision.Owners out of
	// the dependent.
	RemoveRefs
	// Delete: delete the dependent with Decision.Propagation.
	Delete
	// Requeue: keep the dependent for now and decide again after Decision.After.
	Requeue
	// RecordOrphanedAt: the decision needs Input.OrphanedAt. Read it from the live dependent;
	// if it is not recorded there, record Input.Now (OrphanedAtAnnotation) and decide again
	// after Decision.After.
	RecordOrphanedAt
	// Retry: keep the dependent and decide again later, with backoff: the decision depends on
	// a change nothing the caller watches announces (an owner reference's kind gaining a REST
	// mapping when its CRD is created again).
	Retry
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "Keep"
	case Wait:
		return "Wait"
	case RemoveRefs:
		return "RemoveRefs"
	case Delete:
		return "Delete"
	case Requeue:
		return "Requeue"
	case RecordOrphanedAt:
		return "RecordOrphanedAt"
	case Retry:
		return "Retry"
	default:
		return fmt.Sprintf("Action(%d)", int(a))
	}
}

// Reason says which rule produced a Decision. Values are stable and
// CamelCase so they can be used as log values and metric labels.
type Reason string

const (
	// ReasonBeingDeleted: the dependent already has a deletionTimestamp.
	// Deletion is a one-way trip; a dependent deleting its own dependents is
	// handled by the foreground finalizer processing, not here.
	ReasonBeingDeleted Reason = "BeingDeleted"
	// ReasonNoOwners: the dependent has no owner references.
	ReasonNoOwners Reason = "NoOwners"
	// ReasonSolidOwner: at least one owner exists and no reference can be
	// removed.
	ReasonSolidOwner Reason = "SolidOwner"
	// ReasonOwnerOrphaned: some owners were deleted with the orphan policy;
	// the references to them are removed, whatever the other owners are.
	ReasonOwnerOrphaned Reason = "OwnerOrphaned"
	// ReasonStaleOwnerRefs: a solid owner exists and some references point at
	// owners that are gone or waiting for their dependents.
	ReasonStaleOwnerRefs Reason = "StaleOwnerRefs"
	// ReasonUnverifiedOwner: no owner is solid and at least one is Unknown.
	ReasonUnverifiedOwner Reason = "UnverifiedOwner"
	// ReasonOwnerWaitingForDependents: no owner is solid, one waits for its
	// dependents and the dependent has dependents of its own: cascade the
	// foreground deletion down the tree.
	ReasonOwnerWaitingForDependents Reason = "OwnerWaitingForDependents"
	// ReasonOwnersGone: every owner is verified dangling or waiting.
	ReasonOwnersGone Reason = "OwnersGone"
	// ReasonCollectNever: every owner is gone and the policy says collect: Never for the
	// dependent; the references to the owners are removed instead of deleting it.
	ReasonCollectNever Reason = "CollectNever"
	// ReasonCollectAfter: every owner is gone and the policy says collect: After for the
	// dependent, whose delay has not passed yet.
	ReasonCollectAfter Reason = "CollectAfter"
	// ReasonUnmappedOwner: references to owners that are gone or waiting name a kind without
	// REST mapping (Owner.Unmapped, listed in Decision.Unmapped): they are never removed and
	// never a reason to delete, so the dependent is kept and retried (the kind may come back).
	ReasonUnmappedOwner Reason = "UnmappedOwner"
	// ReasonUndecided: no rule matched. The default chain is total, so this
	// only appears with a custom Chain.
	ReasonUndecided Reason = "Undecided"
)

// Decision is the outcome of evaluating a Chain.
type Decision struct {
	Action Action
	Reason Reason
	// Owners lists the owner UIDs to patch out (RemoveRefs only), each once,
	// in the order of Input.Owners.
	Owners []types.UID
	// Propagation is the propagation policy of the DELETE (Delete only).
	Propagation metav1.DeletionPropagation
	// DecideAgain asks the caller to decide again once the patch is done
	// (RemoveRefs only): references to other owners remain that this decision
	// did not settle.
	DecideAgain bool
	// UnblockOwnerRefs asks the caller to set blockOwnerDeletion=false on the
	// dependent's owner references before the DELETE (Delete only). It breaks
	// a potential cycle of objects all waiting for each other in the
	// foreground. The in-tree GC notes the detection has false positives.
	UnblockOwnerRefs bool
	// After is when to decide again (Requeue and RecordOrphanedAt only).
	After time.Duration
	// Unmapped lists the owner UIDs kept because their references name a kind without REST
	// mapping (Owner.Unmapped), each once, in the order of Input.Owners: with Retry, why the
	// dependent is kept; with RemoveRefs, the references to gone owners left in place.
	Unmapped []types.UID
}

func (d Decision) String() string {
	switch d.Action {
	case RemoveRefs:
		s := fmt.Sprintf("%s(%s) owners=%v", d.Action, d.Reason, d.Owners)
		if d.DecideAgain {
			s += " decideAgain"
		}
		if len(d.Unmapped) > 0 {
			s += fmt.Sprintf(" unmapped=%v", d.Unmapped)
		}
		return s
	case Delete:
		return fmt.Sprintf("%s(%s) propagation=%s unblock=%t", d.Action, d.Reason, d.Propagation, d.UnblockOwnerRefs)
	case Requeue, RecordOrphanedAt:
		return fmt.Sprintf("%s(%s) after=%s", d.Action, d.Reason, d.After)
	case Retry:
		return fmt.Sprintf("%s(%s) unmapped=%v", d.Action, d.Reason, d.Unmapped)
	default:
		return fmt.Sprintf("%s(%s)", d.Action, d.Reason)
	}
}

// Func is one rule. It returns ok=false when it does not apply to the input.
// Every rule is self-contained: it checks all the conditions it relies on,
// so reordering a Chain can change which rule wins but never makes a rule
// delete an object it would otherwise not.
type Func func(Input) (d Decision, ok bool)

// Chain is an ordered list of rules; the first rule that applies decides.
type Chain []Func

// Evaluate returns the decision of the first rule in c that applies, or Keep
// with ReasonUndecided when none does.
func (c Chain) Evaluate(in Input) Decision {
	for _, rule := range c {
		if d, ok := rule(in); ok {
			return d
		}
	}
	return Decision{Action: Keep, Reason: ReasonUndecided}
}

// AttemptToDelete is the in-tree attemptToDeleteItem decision (reference
// §1.7 and §2.5) plus cascade's rule for owners it could not verify, the
// in-tree keeping of references it cannot resolve (no REST mapping), and the
// policy's collect rules, which apply only where a delete would follow.
var AttemptToDelete = Chain{
	removeOrphanedRefs,     // an owner deleted with the orphan policy: remove the refs to it, never delete for it
	keepBeingDeleted,       // a deletionTimestamp is a one-way trip; foreground owners belong to finalizers/
	keepWithoutOwners,      // no owner references: not ours to collect
	keepWithSolidOwner,     // a solid owner and nothing removable: in-tree "at least one existing owner"
	removeStaleRefs,        // a solid owner plus verified dangling/waiting refs: patch those refs out (not the unmapped)
	waitForUnknownOwner,    // no solid owner and one we cannot verify: never delete, wait for the verification
	collectNever,           // policy collect: Never: remove the refs to the gone owners instead of deleting (not the unmapped)
	keepUnmappedOwners,     // what is left to remove, or to delete for, names a kind without REST mapping: keep, retry
	collectAfter,           // policy collect: After d: keep until d after the owners were found gone
	deleteInForeground,     // an owner waits for dependents and the item has dependents: cascade foreground
	deleteWithOwnFinalizer, // every owner gone or waiting: policy from the item's own finalizers
}

// Decide evaluates AttemptToDelete.
func Decide(in Input) Decision {
	return AttemptToDelete.Evaluate(in)
}

func removeOrphanedRefs(in Input) (Decision, bool) {
	uids := in.removableWith(Orphaned)
	if len(uids) == 0 {
		return Decision{}, false
	}
	again := false
	for _, o := range in.Owners {
		if !slices.Contains(uids, o.UID) {
			again = true
			break
		}
	}
	return Decision{Action: RemoveRefs, Reason: ReasonOwnerOrphaned, Owners: uids, DecideAgain: again}, true
}

func keepBeingDeleted(in Input) (Decision, bool) {
	if !in.BeingDeleted {
		return Decision{}, false
	}
	return Decision{Action: Keep, Reason: ReasonBeingDeleted}, true
}

func keepWithoutOwners(in Input) (Decision, bool) {
	if in.BeingDeleted || len(in.Owners) > 0 {
		return Decision{}, false
	}
	return Decision{Action: Keep, Reason: ReasonNoOwners}, true
}

func keepWithSolidOwner(in Input) (Decision, bool) {
	if in.BeingDeleted || !in.has(Solid) || len(in.removable()) > 0 {
		return Decision{}, false
	}
	return Decision{Action: Keep, Reason: ReasonSolidOwner}, true
}

func removeStaleRefs(in Input) (Decision, bool) {
	if in.BeingDeleted || !in.has(Solid) {
		return Decision{}, false
	}
	uids, unmapped := in.resolvable(in.removable())
	if len(uids) == 0 {
		return Decision{}, false
	}
	return Decision{Action: RemoveRefs, Reason: ReasonStaleOwnerRefs, Owners: uids, Unmapped: unmapped}, true
}

func waitForUnknownOwner(in Input) (Decision, bool) {
	if in.BeingDeleted || in.has(Solid) || !in.hasUnknown() {
		return Decision{}, false
	}
	return Decision{Action: Wait, Reason: ReasonUnverifiedOwner}, true
}

func deleteInForeground(in Input) (Decision, bool) {
	if !in.collectable() || !in.has(Waiting) || !in.HasDependents {
		return Decision{}, false
	}
	return Decision{
		Action:           Delete,
		Reason:           ReasonOwnerWaitingForDependents,
		Propagation:      metav1.DeletePropagationForeground,
		UnblockOwnerRefs: in.DependentDeletingDependents,
	}, true
}

func deleteWithOwnFinalizer(in Input) (Decision, bool) {
	if !in.collectable() {
		return Decision{}, false
	}
	return Decision{Action: Delete, Reason: ReasonOwnersGone, Propagation: in.ownPropagation()}, true
}

// collectable reports whether the dependent may be deleted at all: every owner
// is gone (ownersGone) and no reference names a kind without REST mapping.
func (in Input) collectable() bool {
	return in.ownersGone() && !in.hasUnmapped()
}

// ownersGone reports whether the dependent is not already being deleted, it has
// owners, and every owner is verified dangling or waiting for its dependents.
func (in Input) ownersGone() bool {
	if in.BeingDeleted || len(in.Owners) == 0 {
		return false
	}
	for _, o := range in.Owners {
		if o.State != Dangling && o.State != Waiting {
			return false
		}
	}
	return true
}

// ownPropagation is the policy the dependent asked for through its own
// finalizers: orphan wins over foregroundDeletion, the default is Background.
func (in Input) ownPropagation() metav1.DeletionPropagation {
	switch {
	case in.OrphanFinalizer:
		return metav1.DeletePropagationOrphan
	case in.ForegroundFinalizer:
		return metav1.DeletePropagationForeground
	default:
		return metav1.DeletePropagationBackground
	}
}

func (in Input) has(s OwnerState) bool {
	for _, o := range in.Owners {
		if o.State == s {
			return true
		}
	}
	return false
}

func (in Input) hasUnknown() bool {
	for _, o := range in.Owners {
		if !o.State.verified() {
			return true
		}
	}
	return false
}

// removable returns the UIDs of verified dangling or waiting owners, each once,
// in reference order. A UID that also appears on a Solid or unverified
// reference is left out: the owner reference patch removes every reference
// with that UID, so removing it would also drop a reference to an owner that
// exists or may exist.
func (in Input) removable() []types.UID {
	return in.removableWith(Dangling, Waiting)
}

// removableWith returns the UIDs of the owners in one of the states, each
// once, in reference order, leaving out a UID that also appears on a
// reference in another state (removable explains why).
func (in Input) removableWith(states ...OwnerState) []types.UID {
	if len(in.Owners) > smallOwnerList {
		return in.removableWithMaps(states)
	}
	// Few references (the usual one or two): compare in place, allocating only the result.
	var uids []types.UID
	for i, o := range in.Owners {
		if !slices.Contains(states, o.State) || in.uidElsewhere(o.UID, states) {
			continue
		}
		dup := false
		for _, p := range in.Owners[:i] {
			if p.UID == o.UID { // listed already (every reference with this UID is in states)
				dup = true
				break
			}
		}
		if !dup {
			uids = append(uids, o.UID)
		}
	}
	return uids
}

// smallOwnerList is the most references removableWith compares in place; longer lists use maps.
const smallOwnerList = 16

// uidElsewhere reports whether uid appears on a reference in a state not in states.
func (in Input) uidElsewhere(uid types.UID, states []OwnerState) bool {
	for _, o := range in.Owners {
		if o.UID == uid && !slices.Contains(states, o.State) {
			return true
		}
	}
	return false
}

// removableWithMaps is removableWith for long reference lists.
func (in Input) removableWithMaps(states []OwnerState) []types.UID {
	var keep map[types.UID]bool
	for _, o := range in.Owners {
		if !slices.Contains(states, o.State) {
			if keep == nil {
				keep = make(map[types.UID]bool, len(in.Owners))
			}
			keep[o.UID] = true
		}
	}
	var uids []types.UID
	seen := make(map[types.UID]bool, len(in.Owners))
	for _, o := range in.Owners {
		if !slices.Contains(states, o.State) || keep[o.UID] || seen[o.UID] {
			continue
		}
		seen[o.UID] = true
		uids = append(uids, o.UID)
	}
	return uids
}
