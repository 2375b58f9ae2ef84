// Package fleet is fleet mode's room: one process collecting in many control planes (members).
//
// Where each part lives:
//   - fleet.go: the Fleet, which takes the member set from a Provider and engages and
//     disengages members (starts a member that is new, restarts one whose kubeconfig changed,
//     and cleans then stops one that left the fleet), with or without shards over replicas
//     (internal/shard); /readyz's members line and explain's routing by member.
//   - member.go: one member's life: its client configuration from its kubeconfig (an allowlist:
//     kubeconfig.go), its dialer (dialer.go), its collector built by Options.Build (cmd/cascade
//     builds it with the single cluster's constructors), its backoff, and what it does when it
//     leaves (Unit.Leave).
//   - provider.go: the Provider interface (a provider reports the member set) and the three
//     providers: kubeconfig Secrets, Cluster API's kubeconfig Secrets (read by name, the rest
//     seen as metadata only) and a directory of kubeconfig files.
//   - kubeconfig.go: a member's kubeconfig is untrusted data, never code or a path.
//   - redact.go: what a member or a tenant wrote is bounded, escaped and without credentials
//     wherever cascade prints it.
//   - metrics.go: the fleet's series (per member and fleet-wide), read at scrape time.
//
// The one write guard of a sharded member (its shard's Lease) is internal/client's
// GuardWrites, wrapped around the member's transport here.
package fleet
