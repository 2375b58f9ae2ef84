package policy

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// References whose kind has no REST mapping (Owner.Unmapped). The in-tree collector resolves
// every owner reference before it decides, and keeps a dependent whose reference it cannot
// resolve; cascade does the same, even when it knows the UID is gone (the chaos suite's
// bad-input test: a reference with apiVersion "not a version!" and the UID of a deleted
// ConfigMap must not make its dependent collected). So such a reference is never removed
// (removeStaleRefs and collectNever leave it out) and never a reason to delete (collectable),
// and a dependent left with nothing else to act on is kept and retried: the kind may appear
// (a CRD created again), and nothing the graph observes would bring the dependent back then.
// A reference to an owner deleted with the orphan policy goes whatever its kind, as in-tree
// (removeOrphanedRefs reads only Orphaned references).

// keepUnmappedOwners keeps, to retry later, a dependent that the rules before it would have
// acted on (a solid owner and stale references) or that the rules after it would delete
// (every owner gone or waiting), when a reference among the gone or waiting ones names a kind
// without REST mapping.
func keepUnmappedOwners(in Input) (Decision, bool) {
	if in.BeingDeleted || (!in.has(Solid) && !in.ownersGone()) {
		return Decision{}, false
	}
	uids := in.unmapped()
	if len(uids) == 0 {
		return Decision{}, false
	}
	return Decision{Action: Retry, Reason: ReasonUnmappedOwner, Unmapped: uids}, true
}

// goneOrWaiting reports whether s is a state whose reference a rule may remove or delete for.
func (s OwnerState) goneOrWaiting() bool { return s == Dangling || s == Waiting }

// hasUnmapped reports whether a reference to a gone or waiting owner is Unmapped.
func (in Input) hasUnmapped() bool {
	return slices.ContainsFunc(in.Owners, func(o Owner) bool { return o.Unmapped && o.State.goneOrWaiting() })
}

// unmapped returns the UIDs of the Unmapped references to gone or waiting owners, each once,
// in reference order.
func (in Input) unmapped() []types.UID {
	var uids []types.UID
	for _, o := range in.Owners {
		if o.Unmapped && o.State.goneOrWaiting() && !slices.Contains(uids, o.UID) {
			uids = append(uids, o.UID)
		}
	}
	return uids
}

// resolvable splits removable UIDs (removable's) into those whose every reference can be
// resolved and those with an Unmapped reference: the owner reference patch removes every
// reference with a UID, so a UID with an Unmapped reference stays whole.
func (in Input) resolvable(uids []types.UID) (ok, unmapped []types.UID) {
	if !in.hasUnmapped() {
		return uids, nil // the common case: no copy
	}
	for _, uid := range uids {
		if slices.ContainsFunc(in.Owners, func(o Owner) bool { return o.UID == uid && o.Unmapped && o.State.goneOrWaiting() }) {
			unmapped = append(unmapped, uid)
		} else {
			ok = append(ok, uid)
		}
	}
	return ok, unmapped
}
