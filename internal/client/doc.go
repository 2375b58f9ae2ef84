// Package client is cascade's API edge: the one place that writes to the API server. Every
// DELETE, ownerReference patch, finalizer removal and annotation of its own (SetAnnotation)
// cascade sends is built and sent here, with its preconditions, so a new patch type or
// precondition touches this package only.
//
// Invariants:
//   - Every write names the object it means by UID: a DELETE carries Preconditions{UID} (and the
//     resourceVersion the decision was taken on), a strategic merge patch carries metadata.uid,
//     and a JSON merge patch carries the resourceVersion of an object just read with that UID.
//     A recreated object with the same name is never touched.
//   - Strategic merge patch first; where the server answers 415 (custom resources, aggregated
//     APIs), the JSON merge patch fallback (patch.go, patchWithFallback).
//   - A finalizer is removed only from an object that is being deleted, keeping every other
//     finalizer, retried on conflict (RemoveFinalizer).
//   - Reads and writes go through Interface, the three calls cascade makes, so unit tests use
//     k8s.io/client-go/metadata/fake (see package clienttest) and assert the actions.
//
// Nothing here decides whether to write: packages gc and finalizers decide (through package
// policy and their plans) and call in. Functions are stateless and safe for concurrent use.
package client
