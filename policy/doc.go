// Package policy holds cascade's garbage-collection policy: the per-resource
// configuration (types, defaults and validation) and the pure decision
// functions that say what to do with a dependent whose owners have been
// classified.
//
// Invariants:
//   - Nothing here performs I/O, reads a clock or starts a goroutine. Every
//     function is a pure function of its arguments, so the whole package is
//     safe for concurrent use and is tested without an API server.
//   - The only dependencies are apimachinery value types (UIDs, deletion
//     propagation constants, field paths); never client-go.
//   - Safety first: an owner the caller could not classify (Unknown, the zero
//     value of OwnerState) never leads to a Delete. A dependent is deleted only
//     when every one of its owners has been verified to be gone or to be
//     waiting for its dependents.
//   - An owner deleted with the orphan policy (Orphaned, recorded by the
//     graph) is never a reason to delete: the first rule of AttemptToDelete
//     removes the references to it, whatever the other owners are.
package policy
