// Package graph is cascade's dependency graph over ownerReferences: a
// deterministic, in-memory state machine that takes plain events and returns
// what the collector should do (Effects), in the manner of raft's RawNode and
// Ready. It imports no client-go, starts no goroutine and reads no clock.
//
// # Ownership
//
// Apply is the only mutator. A Graph is not safe for concurrent use: the
// caller serializes Apply (one writer, the event loop in gc) and may run the
// queries (Node, Dependents, Owners, BlockingDependents, Stats,
// DeletingOwners) concurrently with each other under a read lock, never with
// Apply. Nothing returned aliases the graph's memory. Strings handed in are
// copied when kept, so the caller's objects can be released.
//
// # Model
//
// Nodes are keyed by UID. A node is exactly one of:
//   - observed: seen through an informer (EventObserved) and not deleted;
//   - virtual: named by some observed object's ownerReference but not
//     observed: never observed (its coordinates are the first claim,
//     in-tree behaviour), or no longer watched (below);
//   - absent: observed, then observed deleted (EventDeleted), kept as a
//     tombstone while something still references it. Absence observed
//     through a watch is authoritative: UIDs are never reused.
//
// An object observed being deleted with the orphan finalizer is marked
// orphaned for good (later observations and its tombstone keep the mark:
// deletion is a one-way trip; if a client switched the deletion to another
// policy, keeping it only keeps dependents that could have been deleted).
// References to the tombstone of an orphaned owner are OwnerOrphaned: the
// collector removes them instead of deleting the dependent. When such a
// node is released, its UID and coordinates go into a bounded FIFO of
// retained orphans (Options.RetainedOrphans, default
// DefaultRetainedOrphans): a dependent that reaches the graph later still
// referencing it gets its orphaned tombstone back, not a virtual node, and
// no live check (see orphans.go).
//
// When the caller stops watching a resource (EventUnwatched: a CRD
// deleted, a preferred version switched, a group gone), the observed objects
// of that apiVersion and kind would otherwise stay in the graph as ghosts,
// solid owners and blocking dependents forever. They are not taken for
// deleted: each loses its own owner references (it is no longer a dependent
// anyone knows of), and becomes a virtual node at the coordinates it was
// observed at if other objects reference it, else it is released. Every
// claim on it is then verified again; if the object still exists the next
// list at the new version observes it again and observation decides, as for
// any virtual node. A virtual node that was observed being deleted with the
// orphan finalizer keeps that mark: verified absent, it is OwnerOrphaned
// (see unwatch.go).
//
// Each ownerReference is a claim judged on its own (see OwnerState and
// virtual.go): nothing is decided on coordinates that disagree with what was
// observed; such claims, and claims on virtual owners, are verified with a
// live check (VerifyOwner / EventOwnerVerified), each distinct claim in its
// dependent's namespace.
//
// Namespace rules (in-tree, since Kubernetes 1.20): a namespaced owner
// referenced from another namespace is treated as absent for that dependent
// and reported (OwnerInvalidNamespace); a cluster-scoped dependent of an
// owner observed as namespaced is never collectable (OwnerUnresolvable, also
// reported). The graph does not know REST mappings: for virtual owners the
// caller decides scope (it clears the namespace of cluster-scoped kinds
// before a live check, and never collects a cluster-scoped dependent of a
// namespaced kind).
//
// # Effects
//
// Effects follow from comparing, for every reference an event can affect,
// its state before and after the event, plus the owner's own deletion state:
//   - a reference entering Absent, InvalidNamespace, Orphaned or
//     DeletingDependents puts its dependent in AttemptDelete (for Orphaned:
//     to remove that reference); so do an owner's deletion (all its
//     dependents) and an owner entering foreground deletion (all its
//     dependents, and the owner in Foreground);
//   - a dependent with a reference in one of those states is in
//     AttemptDelete again when another of its references leaves an
//     undecided or unresolvable state for one that is neither (its decision
//     may have waited on it), or when it drops a reference (a solid owner it
//     no longer names may have kept it, or an undecided one held it);
//   - a reference entering InvalidNamespace or Unresolvable is reported
//     (InvalidNamespace);
//   - a reference entering Unknown or Mismatch asks for a live check
//     (VerifyOwner) unless the same check is already pending (the identity
//     claim of a virtual node that has no answer yet and whose check was
//     asked for: an object that becomes virtual because its resource is no
//     longer watched, and whose identity no reference claims, has none
//     under way until a reference makes that claim);
//   - an owner entering orphan deletion, or gaining a dependent while in it,
//     is in AttemptOrphan;
//   - a foreground owner whose dependent went away, dropped its blocking
//     reference, cleared blockOwnerDeletion or stopped being watched (its
//     references are dropped) is in RecheckOwner.
//
// Nothing is ever decided because a resource is no longer watched: its
// objects' dependents wait for the live checks (Unknown never leads to a
// delete), and no absence is inferred.
//
// Effects are edge-triggered; the caller must make each one level-driven
// (re-read the graph when handling it) and must answer every VerifyOwner
// with an EventOwnerVerified unless no reference with that claim is still
// undecided and the claim is not the identity of a virtual node without an
// answer (later references making that claim wait for it).
// DeletingOwners supports a periodic level-driven re-check so that a lost
// transition never leaves an owner stuck.
//
// # Invariants
//
// These hold between any two calls to Apply, and are checked after every
// step of the tests (invariants_test.go):
//  1. Every live node is exactly one of observed, virtual, absent, and is
//     indexed by its UID; the index holds nothing else.
//  2. Only observed nodes have owner references, deletion state and GC
//     finalizers; virtual nodes have no resourceVersion. Every observed
//     node being deleted with the orphan finalizer is marked orphaned; a
//     virtual node is only if it was so observed before its resource
//     stopped being watched.
//  3. Every owner reference of D to O has its reverse: D is in O's
//     dependents list; every entry of O's dependents list is an observed
//     node with at least one reference to O; the list holds no duplicates.
//  4. Every virtual or absent node has at least one dependent (retained
//     orphans are not nodes).
//  5. A reference that agrees with its observed owner's coordinates carries
//     no verification answer (observation decides it).
//  6. The counters behind Stats equal a recount.
//  7. The FIFO of retained orphans holds at most Options.RetainedOrphans
//     slots, each UID at most once, and no UID the index holds: a node
//     recreated from it (or observed again) takes its entry out, and goes
//     back in as the newest when released again.
//
// # Memory
//
// About 88 bytes per node plus the name, the UID index and the dependents
// lists; BenchmarkGraphBuild reports the measured figure as B/object.
// apiVersion/kind pairs and namespaces are interned; canonical UUIDs are
// stored as 16 bytes and decimal resourceVersions as a uint64, with side
// tables for anything else; the first owner reference is stored inline and
// only owners get a dependents list. The FIFO of retained orphans adds about
// 100 bytes per entry plus the name, bounded by Options.RetainedOrphans
// (about 1 MB at the default 10,000); it grows only as orphaned owners are
// released.
//
// Churn does not grow memory for good: Compact (the caller runs it
// periodically, serialized with Apply) frees the interned apiVersion/kind
// pairs and namespaces nothing uses any more (their ids are reused), trims
// the node arena and the side lists past the highest live entry, and
// rebuilds the UID index once it holds less than half its peak.
// BenchmarkGraphNamespaceChurn reports what 10,000 namespaces leave behind.
package graph
