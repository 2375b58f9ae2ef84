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
// A finalizer is removed with GET, then a JSON merge patch carrying the live resourceVersion
// and every other finalizer, retried on conflict: only the GC finalizer cascade finished is
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
//  2. Just before the `orphan` finalizer is removed, the owner's UID goes into an in-memory
//     record (Processor.Orphaned, an LRU of DefaultOrphanedCacheSize owners).
//  3. gc consults the record (gc.FinalizerHandler.Orphaned): a dependent whose reference
//     names an orphaned owner that is gone loses that reference (strategic merge patch, as
//     above) and is never deleted because of it; its other references are decided as usual.
//
// Limits: the record is per process. If cascade restarts (or 10,000 more owners are orphaned)
// between the removal of an owner's `orphan` finalizer and the moment its informer delivers a
// dependent created before the owner's deletion, that dependent is collected as the in-tree
// collector would. The window is the watch latency of the dependent's resource, normally
// milliseconds. A standby that takes over after a failover starts with an empty record too.
//
// # Concurrency
//
// One rate-limited queue of owner UIDs ("finalize_owner") served by a fixed number of
// workers; the dependents of an orphaning owner are patched by a fixed pool of patch workers
// shared by all owners (no goroutine per dependent). The decisions are pure functions in
// plan.go (PlanOwner, PlanOrphan, PlanFinalizerRemoval, PlanForeground).
package finalizers
