package graph

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// Finalizers is the set of garbage-collection finalizers an object carries.
// Only the two finalizers the collector acts on are tracked; any other
// finalizer is invisible to the graph.
type Finalizers uint8

const (
	// FinalizerOrphan is metav1.FinalizerOrphanDependents ("orphan").
	FinalizerOrphan Finalizers = 1 << iota
	// FinalizerForeground is metav1.FinalizerDeleteDependents ("foregroundDeletion").
	FinalizerForeground

	finalizerMask = FinalizerOrphan | FinalizerForeground
)

// Has reports whether every finalizer in x is in f.
func (f Finalizers) Has(x Finalizers) bool { return f&x == x }

func (f Finalizers) String() string {
	switch f & finalizerMask {
	case 0:
		return "[]"
	case FinalizerOrphan:
		return "[orphan]"
	case FinalizerForeground:
		return "[foregroundDeletion]"
	default:
		return "[orphan foregroundDeletion]"
	}
}

// OwnerRef is one entry of an object's metadata.ownerReferences, as the
// dependent states it. The coordinates (APIVersion, Kind, Name) are a claim:
// they may disagree with the owner the UID actually names.
type OwnerRef struct {
	APIVersion         string
	Kind               string
	Name               string
	UID                types.UID
	Controller         bool
	BlockOwnerDeletion bool
}

// Ref is an object's identity: its UID and the coordinates a client needs to
// address it. Namespace is "" for cluster-scoped objects. Ref is a value type
// and is used as a queue key.
type Ref struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

// String renders a Ref the way the in-tree collector renders an
// objectReference, so that event messages match
// ("[apps/v1/ReplicaSet, namespace: ns, name: rs, uid: ...]").
func (r Ref) String() string {
	return fmt.Sprintf("[%s/%s, namespace: %s, name: %s, uid: %s]", r.APIVersion, r.Kind, r.Namespace, r.Name, r.UID)
}

// Object is what the graph keeps of an API object: only what garbage
// collection needs. The conversion from metav1.Object happens in the caller.
type Object struct {
	Ref
	// ResourceVersion is kept so that a DELETE can carry it as a precondition.
	// Decimal resource versions (all etcd3-backed servers) are stored as a
	// uint64; anything else is kept verbatim in a side table.
	ResourceVersion string
	// Owners are the object's ownerReferences, in order. References that are
	// identical in UID and coordinates are collapsed to the first, which
	// keeps the strongest controller and blockOwnerDeletion flags.
	Owners []OwnerRef
	// Deleting is metadata.deletionTimestamp != nil.
	Deleting bool
	// Finalizers are the GC finalizers among metadata.finalizers.
	Finalizers Finalizers
	// Stamp is the caller's record of a GC finalizer it put on the object itself (cascade:
	// the default-propagation stamp): FinalizerOrphan, FinalizerForeground, both when the
	// record names neither, 0 when there is none. The graph only keeps it.
	Stamp Finalizers
}

// EventType says what an Event reports.
type EventType uint8

const (
	// EventObserved: the object was added or updated (an informer add or
	// update, or a relist). Object must be complete.
	EventObserved EventType = iota + 1
	// EventDeleted: the object is gone (an informer delete, including a
	// DeletedFinalStateUnknown tombstone). Only Object.Ref is used: the UID,
	// and the coordinates, which the graph adopts if it had only known the
	// object as a virtual owner. Absence observed this way is authoritative:
	// UIDs are never reused.
	EventDeleted
	// EventOwnerVerified: the answer to a VerifyOwner effect, i.e. a live
	// GET of Owner's coordinates. Uses Owner and Present.
	EventOwnerVerified
	// EventUnwatched: the caller stopped watching the resource of
	// Object.APIVersion and Object.Kind (a CRD deleted, a preferred
	// version switched, a group gone), and no event about its objects
	// will come at that apiVersion any more. Only those two fields are
	// used. Every observed object of that apiVersion and kind stops being
	// observed, without being taken for deleted: it loses its own owner
	// references, and becomes a virtual node if other objects reference
	// it (each claim on it is then verified again) or is released. An
	// object observed again later, at any apiVersion, is observed anew.
	EventUnwatched
	// EventOrphanRecorded: another cascade process (a previous leader)
	// recorded, before removing the orphan finalizer, that the owner
	// Object.Ref was being deleted with the orphan policy. Only Object.Ref
	// is used. The graph then treats the owner as if it had observed that
	// itself: a node for the UID gets the orphaned mark (an absent
	// tombstone's references become OwnerOrphaned; a virtual node's become
	// OwnerOrphaned once verified absent); without a node, the owner joins
	// the FIFO of retained orphans at Ref's coordinates, so a dependent that
	// references it later sees OwnerOrphaned. It never makes an owner
	// absent nor any reference more collectable.
	EventOrphanRecorded
)

func (t EventType) String() string {
	switch t {
	case EventObserved:
		return "Observed"
	case EventDeleted:
		return "Deleted"
	case EventOwnerVerified:
		return "OwnerVerified"
	case EventUnwatched:
		return "Unwatched"
	case EventOrphanRecorded:
		return "OrphanRecorded"
	default:
		return fmt.Sprintf("EventType(%d)", uint8(t))
	}
}

// Event is the only input of the graph.
type Event struct {
	Type EventType
	// Object is the observed object (EventObserved) or the deleted one
	// (EventDeleted, EventOrphanRecorded: Ref is enough); for EventUnwatched, its
	// APIVersion and Kind name the resource no longer watched.
	Object Object
	// Owner (EventOwnerVerified) is the claimed identity that was checked:
	// the coordinates as the dependent's reference states them and the
	// owner UID; Namespace is the namespace the check was made in, "" when
	// the kind is cluster-scoped (the answer then applies to dependents in
	// every namespace).
	Owner Ref
	// Present (EventOwnerVerified) is true when the live GET found an
	// object at Owner's coordinates with Owner.UID; false for a 404 or a
	// different UID.
	Present bool
}

// InvalidRef is a reference from Dependent to a namespaced owner that lives
// in another namespace. The caller reports it as a Warning event with reason
// OwnerRefInvalidNamespace on the dependent.
type InvalidRef struct {
	Dependent Ref
	Owner     OwnerRef
}

// Effects is what the caller should do after an Apply, in the manner of
// raft's Ready. Each list holds no duplicates; order is deterministic.
// All UIDs name objects the graph has observed, except in VerifyOwner.
type Effects struct {
	// AttemptDelete: dependents worth re-deciding, typically because one of
	// their owners may be gone (observed deleted, verified absent, invalid
	// namespace), is waiting on its dependents (foreground), or was deleted
	// with the orphan policy (OwnerOrphaned: remove that reference); also
	// dependents with such a reference whose decision was held back by
	// another reference that stopped holding it (a live check answered, or
	// the dependent dropped a reference).
	AttemptDelete []types.UID
	// AttemptOrphan: owners being deleted with the orphan finalizer, when
	// they enter that state, and again whenever a new dependent attaches to
	// one, so that the orphaner sees it.
	AttemptOrphan []types.UID
	// Foreground: owners that entered foreground deletion (deletionTimestamp
	// and the foregroundDeletion finalizer). Their dependents are in
	// AttemptDelete too.
	Foreground []types.UID
	// VerifyOwner: claimed owner identities that need a live check, in the
	// dependent's namespace (the caller clears Namespace for cluster-scoped
	// kinds). Answer each with an EventOwnerVerified.
	VerifyOwner []Ref
	// InvalidNamespace: references to an observed namespaced owner from
	// another namespace (or from a cluster-scoped dependent). Report them.
	InvalidNamespace []InvalidRef
	// RecheckOwner: owners in foreground deletion that one of their
	// dependents stopped blocking (it went away, dropped the reference,
	// cleared blockOwnerDeletion, or its resource is no longer watched).
	// Check whether the foregroundDeletion finalizer can be removed.
	RecheckOwner []types.UID
}

// IsZero reports whether there is nothing to do.
func (e *Effects) IsZero() bool {
	return len(e.AttemptDelete) == 0 && len(e.AttemptOrphan) == 0 && len(e.Foreground) == 0 &&
		len(e.VerifyOwner) == 0 && len(e.InvalidNamespace) == 0 && len(e.RecheckOwner) == 0
}

// OwnerState is what the graph knows about one owner reference of one
// dependent. It is per reference, not per owner: two dependents naming the
// same UID with different coordinates can see different states.
type OwnerState uint8

const (
	// OwnerUnknown: the owner is not observed (a virtual node: never
	// observed, or its resource is no longer watched) and this claim has
	// not been verified yet. A VerifyOwner effect was issued; nothing may
	// be decided on this reference.
	OwnerUnknown OwnerState = iota
	// OwnerVerifiedPresent: not observed, but a live check found an
	// object with this UID at the claimed coordinates. Solid.
	OwnerVerifiedPresent
	// OwnerPresent: observed, not being deleted. Solid.
	OwnerPresent
	// OwnerBeingDeleted: observed with a deletionTimestamp and without the
	// foregroundDeletion finalizer. Solid, as in-tree ("one way trip").
	OwnerBeingDeleted
	// OwnerDeletingDependents: observed with a deletionTimestamp and the
	// foregroundDeletion finalizer: waiting for its dependents.
	OwnerDeletingDependents
	// OwnerAbsent: observed deleted (authoritative: UIDs are never reused),
	// or verified absent at the claimed coordinates. Dangling.
	OwnerAbsent
	// OwnerInvalidNamespace: the owner is observed as a namespaced object in
	// a namespace other than the (namespaced) dependent's. Treated as absent
	// for this dependent. Dangling.
	OwnerInvalidNamespace
	// OwnerUnresolvable: the dependent is cluster-scoped and the owner is
	// observed as a namespaced object. A dependent with such a reference
	// must never be collected.
	OwnerUnresolvable
	// OwnerMismatch: the owner's UID is observed, but this reference's
	// coordinates (apiVersion, kind, name) disagree with the observed ones
	// and were not verified yet. A VerifyOwner effect was issued; nothing
	// may be decided on this reference.
	OwnerMismatch
	// OwnerOrphaned: the owner was observed being deleted with the orphan
	// finalizer, then observed deleted (authoritative, whatever the claim),
	// or, its resource no longer watched since, this claim was verified
	// absent.
	// Its dependents were to be orphaned: the collector removes this
	// reference and never deletes the dependent because of it. The graph
	// remembers such owners beyond their last dependent (a bounded FIFO, see
	// Options.RetainedOrphans), so a dependent that reaches the graph late
	// still sees this state. Neither solid nor dangling; the namespace rules
	// take precedence (InvalidNamespace, Unresolvable) as for any owner.
	OwnerOrphaned
)

var ownerStateNames = [...]string{
	OwnerUnknown:            "Unknown",
	OwnerVerifiedPresent:    "VerifiedPresent",
	OwnerPresent:            "Present",
	OwnerBeingDeleted:       "BeingDeleted",
	OwnerDeletingDependents: "DeletingDependents",
	OwnerAbsent:             "Absent",
	OwnerInvalidNamespace:   "InvalidNamespace",
	OwnerUnresolvable:       "Unresolvable",
	OwnerMismatch:           "Mismatch",
	OwnerOrphaned:           "Orphaned",
}

func (s OwnerState) String() string {
	if int(s) < len(ownerStateNames) {
		return ownerStateNames[s]
	}
	return fmt.Sprintf("OwnerState(%d)", uint8(s))
}

// Solid reports whether the owner counts as existing (in-tree "solid").
func (s OwnerState) Solid() bool {
	return s == OwnerVerifiedPresent || s == OwnerPresent || s == OwnerBeingDeleted
}

// Dangling reports whether the owner counts as absent for this dependent.
func (s OwnerState) Dangling() bool { return s == OwnerAbsent || s == OwnerInvalidNamespace }

// Waiting reports whether the owner waits for its dependents (foreground).
func (s OwnerState) Waiting() bool { return s == OwnerDeletingDependents }

// Undecided reports whether a live check is pending for this reference.
func (s OwnerState) Undecided() bool { return s == OwnerUnknown || s == OwnerMismatch }

// Orphaned reports whether the owner was deleted with the orphan policy:
// the reference is to be removed, the dependent kept.
func (s OwnerState) Orphaned() bool { return s == OwnerOrphaned }

// NodeView is a copy of what the graph holds for one UID.
type NodeView struct {
	Ref
	ResourceVersion string
	// Owners are the object's owner references (nil for virtual and absent
	// nodes).
	Owners     []OwnerRef
	Deleting   bool
	Finalizers Finalizers
	// Stamp is the observed object's Object.Stamp.
	Stamp Finalizers
	// Virtual: referenced as an owner but not observed. Ref holds the
	// first claimed identity (in the first dependent's namespace), or,
	// for an object whose resource is no longer watched, the identity it
	// was last observed at.
	Virtual bool
	// Absent: observed, then observed deleted; kept as a tombstone while
	// dependents still reference it. A tombstone recreated for a late
	// dependent of a retained orphaned owner has no ResourceVersion.
	Absent bool
	// Orphaned: an absent tombstone of an owner observed being deleted with
	// the orphan finalizer (references to it are OwnerOrphaned). False for
	// observed and virtual nodes.
	Orphaned bool
	// Dependents is the number of distinct objects that reference this UID.
	Dependents int
}

// OwnerView is one owner reference of a node with the graph's verdict on it.
type OwnerView struct {
	OwnerRef
	State OwnerState
}

// Stats are counts for metrics. Nodes = Observed + Virtual + Absent.
type Stats struct {
	Nodes    int
	Observed int
	Virtual  int
	Absent   int
	// PerResource counts observed nodes by apiVersion and kind, keyed
	// "<apiVersion>, Kind=<kind>", e.g. "apps/v1, Kind=ReplicaSet" and
	// "v1, Kind=Pod" (schema.GroupVersionKind.String without the leading
	// "/" for the core group).
	PerResource map[string]int
	// WaitingOrphan: observed nodes being deleted with the orphan finalizer.
	WaitingOrphan int
	// WaitingForeground: observed nodes being deleted with the
	// foregroundDeletion finalizer.
	WaitingForeground int
	// RetainedOrphans: orphan-deleted owners remembered after their node
	// was released (at most Options.RetainedOrphans). They are not nodes.
	RetainedOrphans int
}

// KindKey names a kind at one apiVersion.
type KindKey struct{ APIVersion, Kind string }

// StampView is an observed object as Stampable reports it.
type StampView struct {
	Ref
	Deleting   bool
	Finalizers Finalizers
	Stamp      Finalizers
}
