// Package client is cascade's API edge: the one place that writes to the API server. Every
// DELETE, ownerReference patch, finalizer removal, default-propagation stamp and annotation of
// its own, the admission objects of the policy's defaultPropagation rules, the orphan record's
// ConfigMap and the Events are built and sent here (Edge: Objects, Admission, ConfigMaps,
// Events), so dry-run (Edge.DryRun) and companion mode (Edge.Companion: no DELETE, no
// ownerReference or finalizer removal, only the default-propagation stamp on a live object) are
// decided in one place. A test lists every write method of the Edge and proves each is counted
// and not sent in dry-run (TestDryRunEdgeSendsNoWrite); another says of each method and patch
// shape whether companion mode sends or refuses it (TestCompanionEdge); another fails on a
// write built anywhere else (TestOnlyTheEdgeWrites). The leader-election Lease is the one write outside: it decides
// whether the others may be sent (package internal/leader).
//
// Invariants:
//   - Every write names the object it means by UID: a DELETE carries Preconditions{UID} (and the
//     resourceVersion the decision was taken on), a strategic merge patch carries metadata.uid,
//     and a JSON merge patch carries the resourceVersion of an object just read with that UID.
//     A recreated object with the same name is never touched.
//   - Strategic merge patch first; where the server answers 415 (custom resources, aggregated
//     APIs), the JSON merge patch fallback (patch.go, patchWithFallback), sent only when the
//     live object still matches what the decision saw.
//   - A finalizer is removed only from an object that is being deleted, keeping every other
//     finalizer, retried on conflict (RemoveFinalizer).
//   - Events go through HeldRecorder: held while this replica is a standby, sent once it leads.
//   - Reads and writes of objects go through Interface, the three calls cascade makes, so unit
//     tests use k8s.io/client-go/metadata/fake (see package clienttest) and assert the actions.
//
// Nothing here decides whether to write: packages gc and finalizers decide (through package
// policy and their plans) and call in. Functions are stateless and safe for concurrent use.
package client
