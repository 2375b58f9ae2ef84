// Package work is the worker kit packages gc, finalizers and finalizers/stamp share: a named, rate-limited work
// queue of value-typed keys served by a fixed number of workers, the outcomes a worker reports
// for an item, and how failures are reported.
//
// Invariants:
//   - A queue hands an item to one worker at a time (client-go's workqueue semantics, in rqueue,
//     without its goroutines); workers are a fixed
//     pool, never a goroutine per item.
//   - Every item ends in exactly one Outcome: Done forgets it, Retry re-adds it after its
//     per-item backoff (at most MaxBackoff by default, so a healed cause is noticed soon), WaitForSync re-adds it after SyncWait without growing the backoff.
//   - A failed attempt (an error returned with Retry) is counted
//     (cascade_worker_errors_total{queue}) and logged at default verbosity once per item, on its
//     first failure; further failures of the same item log at V(4) until it succeeds, so a
//     broken API is visible without flooding the log.
//   - Queue metrics come from QueueMetrics, installed once with SetQueueMetrics.
package work
