// Package gc is cascade's garbage collector around the pure graph: it owns
// discovery of deletable resources, one metadata-only reflector per resource
// whose store is the graph itself (no informer cache),
// the typed work queues and bounded worker pools, and the API edge (the
// ObjectClient interface, patches with UID or resourceVersion preconditions,
// deletes with preconditions, and the cache of owners verified absent).
//
// Ownership and concurrency:
//   - The graph has a single writer; gc feeds it watch events and acts on
//     the effects it returns. Decisions about a dependent come from package
//     policy; gc only gathers their input and carries them out.
//   - Everything that talks to the API server goes through ObjectClient, so
//     tests use k8s.io/client-go/metadata/fake and assert the actions.
//   - Helpers in patch.go and decide.go are pure builders or stateless
//     executors; AbsentCache is safe for concurrent use.
package gc
