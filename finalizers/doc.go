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
// Every write goes through package internal/client. A finalizer is removed with GET, then a JSON merge
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
//     (Options.OrphanRecord, package orphanrecord). A leader loads the record before it collects
//     a dependent whose owner is absent (gc.Options.OrphanRecords; nothing else waits for it,
//     and a load failing for 20 s degrades as a write does), so a process that did not see the owner being deleted
//     (a new leader after a failover, or a restart) still finds references to it
//     OwnerOrphaned. Without it (--orphan-record-configmap=""), such a process collects a
//     dependent created just before the owner's deletion whose watch event it had not
//     received, as the in-tree collector does.
//
// The record protects only a late dependent: one that gained its reference just before the
// owner's deletion and that this process had not seen when it removed the finalizer, and
// only if another process takes over before this one sees it (the window is the dependent's
// watch latency after the finalizer's removal). So an owner is recorded when its dependents
// may need it: a dependent of it was seen during its orphaning (an owner that has dependents is
// one that dependents are made for: a ReplicaSet creating a pod as it is deleted), or it was deleted less than Options.RecordWindow (the
// record's TTL) after its creation (a controller's first dependent may be in flight: a Job's
// pod, a Deployment's ReplicaSet), or its creation time is unknown. The age is read from the
// owner's live metadata (creation and deletion timestamps, both the API server's), by the GET
// that the finalizer's removal then starts from, so it costs no request; the graph does not
// carry creation times (8 bytes on every object for this one question). Residual risk: an
// owner older than the window, with no dependent in the graph, that gains its first dependent
// in the moment before its orphan deletion (an adoption, or a reference a client adds to an
// old object), with a failover within that dependent's watch latency after the finalizer
// goes: the new leader collects that dependent, as without a record (and as in-tree).
//
// The record never stalls a deletion. A full record (orphanrecord.ErrFull: its size bound,
// 768 KiB of the ConfigMap's 1 MiB) degrades at once; a failing write is retried with the
// owner (the queue's backoff) for recordRetryFor (20 s) after its first failure, then
// degrades. Degrading removes the finalizer without a record and says so once per owner: a
// Warning Event OrphanRecordUnavailable on the owner, cascade_orphan_record_degraded_total
// {reason="full"|"error"} and a log line. The Events are best effort: when thousands of
// owners degrade at once, client-go's event sink drops what its queue cannot hold (in e2e
// TestOrphanRecordFullNeverStalls about a third of 8,184 arrived); the metric counts each. Owners left unrecorded because no dependent of theirs
// can need it are counted in cascade_orphan_record_skipped_total.
//
// # Companion mode
//
// With Options.Companion (--mode=companion) kube-controller-manager's collector finishes the
// GC finalizers; the processor follows the same owners and only diagnoses (diagnose in
// stuck.go): the DeletionStuck Event and cascade_oldest_waiting_owner_seconds, no write.
//
// # Concurrency
//
// One rate-limited queue of owner UIDs ("finalize_owner") served by a fixed number of
// workers; the dependents of an orphaning owner are patched by a fixed pool of patch workers
// shared by all owners (no goroutine per dependent). The decisions are pure functions in
// plan.go (PlanOwner, PlanOrphan); the queue is package internal/work's.
package finalizers
