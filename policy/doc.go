// Package policy holds cascade's garbage-collection policy: the per-resource policy document
// (types.go; Decode reads it strictly, Validate collects every error with its field path,
// Warnings what depends on the cluster, Compile indexes it for decisions, Schema is its JSON
// Schema generated from the types) and the pure decision functions that say what to do with a
// dependent whose owners have been classified (decide.go, collect.go for the policy's collect
// rules, unmapped.go for references cascade cannot resolve).
//
// Invariants:
//   - Nothing here performs I/O, reads a clock or starts a goroutine. Every
//     function is a pure function of its arguments (the clock is Input.Now), so
//     the whole package is safe for concurrent use and is tested without an API
//     server. A Compiled policy is immutable.
//   - The only dependencies are apimachinery value types (UIDs, deletion
//     propagation constants, label selectors, field paths) and the decoders;
//     never client-go.
//   - Safety first: an owner the caller could not classify (Unknown, the zero
//     value of OwnerState) never leads to a Delete. A dependent is deleted only
//     when every one of its owners has been verified to be gone or to be
//     waiting for its dependents.
//   - A reference whose kind the caller cannot resolve (Owner.Unmapped: no
//     REST mapping) is never removed and never a reason to delete, as in-tree:
//     the dependent is kept and retried (unmapped.go). The caller resolves the
//     kinds; the rule is part of AttemptToDelete like every other, so whoever
//     decides (the workers, explain) decides the same.
//   - An owner deleted with the orphan policy (Orphaned, recorded by the
//     graph) is never a reason to delete: the first rule of AttemptToDelete
//     removes the references to it, whatever the other owners are.
//   - The policy only ever makes collection milder: a collect rule replaces a
//     Delete by removing references (Never) or by waiting (After), and nothing
//     else; an empty, absent or rejected policy is the built-in behaviour. So no
//     policy causes a delete the built-in rules would not make.
//   - defaultPropagation rules (defaultprop.go) only decide what a future delete
//     that names no propagation policy does: DefaultFor picks the rule,
//     Admission renders the admission objects that stamp it at creation, and
//     PlanStamp plans the stamp of an existing object, never touching one being
//     deleted and never removing a finalizer it did not record stamping
//     (package finalizers/stamp carries them out).
package policy
