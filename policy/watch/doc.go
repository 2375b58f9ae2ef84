// Package watch keeps cascade's policy in force: it watches the one policy ConfigMap
// (--policy-configmap NAMESPACE/NAME, key policy.yaml) with a reflector narrowed to its name,
// parses every version of it with package policy, and swaps the compiled policy in whole.
//
// Invariants:
//   - The policy in force is always a complete, valid policy: Policy() returns it with one
//     atomic load, safe from any goroutine; a new one replaces it whole, never in part.
//   - A rejected edit changes nothing in force: the last good policy stays, and the rejection
//     is said once per version of the document: one log line, a Warning Event on the ConfigMap
//     (by the leader: a standby sends its last one when it leads), cascade_policy_load_errors_total
//     and cascade_policy_last_load_success=0.
//   - A missing ConfigMap (never created, or deleted) means the built-in behaviour, said once
//     until it exists again.
//   - Nothing here decides about objects: package gc reads Policy().
package watch
