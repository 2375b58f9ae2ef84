// Package stamp applies the policy's defaultPropagation rules (policy.Compiled.DefaultFor):
// what a delete that names no propagation policy does to the dependents of an object.
//
// kube-apiserver honours an `orphan` or `foregroundDeletion` finalizer already on an object
// when a delete names no policy (and an explicit policy replaces it), so a default of Orphan or
// Foreground is applied by putting that finalizer on the owner ("stamping"), recorded in the
// annotation policy.DefaultPropagationAnnotation:
//
//   - at creation, by the MutatingAdmissionPolicy and binding policy.Compiled.Admission
//     renders. The Applier creates, updates (server-side apply, field manager "cascade") and
//     deletes them with the policy, and only touches objects of that name labelled as
//     cascade's. They are written at the level the server offers (Options.AdmissionLevel,
//     package internal/features): admissionregistration.k8s.io/v1, else v1beta1, else none,
//     where the pass below is all there is (an object is stamped at most one Period after its
//     creation; a delete that names no policy before then propagates as the kind's default
//     says). When the level changes, the objects follow at once: written at the new version,
//     and cascade's objects at the old one deleted unless they are the same objects (a server
//     serves one object at every version it serves);
//   - on objects that existed before the rule (or that admission missed: its failure policy is
//     Ignore), by a pass over the graph's objects, rate-limited (Options.Rate objects per
//     second, each a GET and at most one PATCH);
//   - when a rule changes or goes away, the same pass removes the finalizer the annotation
//     records, and only it, and the annotation (policy.PlanStamp).
//
// Safety: every write is planned on a fresh GET and carries its resourceVersion (client.StampDefault),
// so a stamp never lands on an object a delete reached first, and an object being deleted is
// never touched. A stamp only decides what a future delete that names no policy does; cascade
// removes no finalizer of a live object it did not record stamping.
//
// Only the leader runs an Applier (it writes). The pass reads the graph (gc.View) and starts
// once it has synced, then runs when the policy in force changes and every Options.Period.
package stamp
