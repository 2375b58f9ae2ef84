// Package finalizers finishes owners that kube-apiserver marked for orphan or foreground
// deletion (deletionTimestamp plus the `orphan` or `foregroundDeletion` finalizer).
//
// # What it does
//
//   - orphan: remove the owner's reference from every dependent the graph knows of (strategic
//     merge patch with a UID precondition, JSON merge patch with resourceVersion where the
//     server answers 415), then remove the `orphan` finalizer.
//   - foregroundDeletion: the collector (gc) deletes the dependents; once no dependent with
//     blockOwnerDeletion: true remains, remove the `foregroundDeletion` finalizer. Dependents
//     that do not block are deleted but not waited for (in-tree semantics).
//
// Every write goes through package client. A finalizer is removed with GET, then a JSON merge
// patch carrying the live resourceVersion and every other finalizer, retried on conflict: only the GC finalizer cascade finished is
// removed, never anyone else's, and never from an object that is not being deleted (a GC
// finalizer on a live object is a default policy for its future deletion).
//
// # Level-driven
//
// Owners come in through the graph's effects (AttemptOrphan, Foreground, RecheckOwner) and,
// once the graph has synced and then every resync period, through a scan of every owner being
// deleted with a GC finalizer. Nothing is done before the graph has synced, since dependents
// not listed yet would be missed. An owner is retried with backoff until its finalizer is gone,
// so no lost event can leave it Terminating.
//
// # Orphan safety
//
// No dependent may be collected because its owner was deleted with the orphan policy. The
// in-tree collector misses dependents that reach its graph after it orphaned the known ones
// (created just before the delete, or still in flight on a watch): they then reference a
// deleted owner and are garbage-collected. cascade closes that window in three steps:
//  1. The dependents are re-read after each round of patches and new ones are patched too;
//     the graph also re-enqueues an orphaning owner when a dependent attaches to it.
//  2. The graph remembers that the owner was observed being deleted with the orphan finalizer
//     (its tombstone keeps the flag, and the last graph.DefaultRetainedOrphans such owners are
//     remembered after their tombstones are freed). A reference to it is OwnerOrphaned, and
//     the collector's policy removes it instead of deleting the dependent
//     (policy.ReasonOwnerOrphaned). Nothing flows back from this package to the collector.
//  3. Before removing the orphan finalizer, the owner is recorded in a ConfigMap
//     (Options.Records, package orphanrecord); a failed record keeps the finalizer. A leader
//     loads the record before it collects anything (gc.Deps.OrphanRecords), so a process that
//     did not see the owner being deleted (a new leader after a failover, or a restart) still
//     finds references to it OwnerOrphaned. Without it (--orphan-record-configmap=""), such a
//     process collects a dependent created just before the owner's deletion whose watch event
//     it had not received, as the in-tree collector does.
//
// # Concurrency
//
// One rate-limited queue of owner UIDs ("finalize_owner") served by a fixed number of
// workers; the dependents of an orphaning owner are patched by a fixed pool of patch workers
// shared by all owners (no goroutine per dependent). The decisions are pure functions in
// plan.go (PlanOwner, PlanOrphan); the queue is package work's.
package finalizers
