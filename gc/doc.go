// Package gc is cascade's garbage collector around the pure graph: it owns
// discovery of deletable resources, one metadata-only list-and-watch loop per
// resource whose store is the graph itself (watchloop.go; no informer cache), the work queues of
// dependents to decide on and owner claims to verify, and the cache of owners
// verified absent.
//
// Ownership and concurrency:
//   - The graph has a single writer; gc feeds it watch events and acts on
//     the effects it returns. Decisions about a dependent come from package
//     policy; gc only gathers their input and carries them out. One function
//     (decide.go) decides for the workers and for Explain, and no rule is
//     applied after it, so what `cascade explain` says is what the workers do.
//   - Every write to the API server goes through package internal/client (DELETE with
//     preconditions, ownerReference patches); the queues and workers are
//     package internal/work's.
//   - Data flows one way to package finalizers: owners being deleted with a
//     GC finalizer are handed over (Options.Finalizers), and finalizers reads the
//     graph through View, which is read-only. Nothing flows back: that an
//     owner was deleted while orphaning is recorded by the graph itself
//     (graph.OwnerOrphaned), and the dependents of owners deleted in the
//     foreground are handed to the workers again every
//     ForegroundResyncPeriod by gc, not by finalizers.
//   - The policy (Options.Policy, swapped whole by package policy/watch) is read,
//     never written: its ignoredResources every discovery round, its collect
//     rules on every dependent about to be decided (policy.go). A collect: After
//     rule is the one case that reads the live dependent before deciding (its
//     cascade.dev/orphaned-at annotation, so the delay survives a restart).
//   - AbsentCache is safe for concurrent use.
//   - CRDs and APIServices are watched (apiwatch.go, with Options.Dynamic): a change asks the
//     discovery loop for a round at once, and a kind whose CRD was seen deleted, confirmed by a
//     live check to be served by nothing, owns nothing (gonekinds.go). A restarted process does
//     not know which CRDs went before it started: references to their kinds stay kept.
//   - Companion mode (Options.Companion, --mode=companion): kube-controller-manager's collector
//     collects. The graph, discovery and owner verification run; no delete worker runs and no
//     dependent is queued for one, and decisions (Explain's) are the in-tree collector's, with no
//     collect rule. The Edge refuses the writes anyway (internal/client, Edge.Companion).
package gc
