// Package shard spreads a fleet's members over cascade replicas: members map to shards by a
// stable hash of their name (Of), and each shard is held by at most one replica at a time
// through a coordination.k8s.io Lease in the host cluster: one Lease per shard, not per
// member. A Manager takes its replica's fair share of the shards, renews their Leases, stops
// the shards it loses and gives up the ones it holds beyond its share. What runs in a shard
// (its members' collectors) is the caller's: Options.Start.
//
// # Leases
//
// PREFIX-shard-I (label cascade.dev/shard-of=PREFIX) is shard I's: holderIdentity names the
// replica that writes in its members. PREFIX-replica-ID (label cascade.dev/replica-of=PREFIX)
// is a replica's presence: holderIdentity is the replica's identity and the replica is live
// while its renewTime + leaseDurationSeconds is ahead of the reader's clock (liveness only
// sizes the fair share; no write depends on it). Every write of a shard Lease is an Update
// carrying the resourceVersion last read or written (or a Create): two replicas never both
// succeed from one version. Every write carries the writer's shard count
// (cascade.dev/shards).
//
// Cost: each replica, every RetryPeriod, renews its replica Lease and each shard Lease it
// holds, and lists both kinds of Leases: (shards + replicas) writes per RetryPeriod for the
// whole fleet, whatever the number of members (6 shards and 3 replicas at the default 2s:
// 4.5 writes and 3 lists a second, for 1,000 members as for 10).
//
// # Protocol
//
// Each loop (every RetryPeriod):
//
//  1. Presence: create or renew PREFIX-replica-ID. Live replicas are the replica Leases not
//     expired by the local clock, this one always included.
//  2. Renew every held shard Lease (in parallel). Each renewal is recorded as it returns
//     (its success times Writable and the watchdog from when it was sent), and the loop
//     waits for them at most RetryPeriod: a slow one goes on alone, its shard is not written
//     again until it returned, and the other shards are renewed at the next loop, so one
//     slow request makes only its own shard overdue. A conflict or NotFound, or a listed
//     Lease naming another holder, and the shard is lost at once: its Start ctx ends. Any
//     other error is retried; once the last successful renewal is RenewDeadline old, the
//     shard is lost (a watchdog goroutine does this on time even when the loop is stuck in
//     a slow request).
//  3. Fair share is ceil(shards / live replicas). A replica holding more gives its
//     highest-numbered shard up, one at a time: its Start ctx ends and the Lease is renewed
//     until Start returned (every writer stopped); then (the loop runs at once) one last
//     renewal, annotated cascade.dev/handoff=true, fences it, and it is renewed no more. When the shards do not
//     divide evenly and every shard is held, the first replica (by identity) holding more
//     than the floor gives one up to a replica below the floor (7 shards over 3 replicas end
//     3/2/2, not 3/3/1); meanwhile the replicas at the floor or above leave freed shards to
//     the one below it, unless such a shard stays free a LeaseDuration more.
//  4. A replica holding less warms candidates as it lacks shards: Start is called with a
//     closed gate before the shard is free, so its members' graphs sync meanwhile. Shards
//     not free yet (held by a replica that is not live, handed off, or expected to be given
//     up) are warmed ahead; a free one is started as it is taken. A shard is free when it
//     has no Lease, or no holder (released), or it was handed off and its renewTime +
//     leaseDuration is past, or, whatever it says, this replica has seen its record
//     (resourceVersion, holder, renewTime) unchanged for leaseDuration by its own clock, as
//     client-go's leader election does. A free candidate is taken (at most one per loop) by
//     a Create, or an Update from the version seen; a conflict means another replica won:
//     that Start's ctx ends. Free shards come first, then those of no live replica, then
//     those others are expected to give up. The taken shard's gate opens once a list made
//     after the take (at once, or at the next loop if that list fails) shows no shard Lease
//     held under another shard count (below), and not before the fence rule allows (below).
//  5. When Run's ctx ends: every Start's ctx ends; once every Start returned, each held
//     shard Lease is fenced (renewed once more, marked handoff: free LeaseDuration later)
//     and the replica Lease deleted.
//
// The fence rule: a shard last seen held by another replica opens no sooner than
// LeaseDuration after that replica's writers may last have written, as this replica has
// seen it by its own clock, whatever the Lease says by the time it opens (deleted,
// rewritten by someone else, naming this replica, released). Each replica keeps, per shard
// and per other holder, when that holder's writers may last have written, from every change
// of the Lease it lists (the change first listed at t):
//
//   - The Lease names another holder, not handed off: that holder renewed it before t, and
//     its writers stop RenewDeadline after their last renewal: t + RenewDeadline.
//   - The Lease named another holder before the change, and the change is not this
//     replica's own take made on that version (a take is known for its own by the version
//     it was made on and the renewTime it wrote, even when its reply was lost): the holder
//     may have renewed once more just before the Lease was deleted or rewritten:
//     t + RenewDeadline.
//   - The Lease is handed off by another holder: every writer that holder ran in the
//     shard stopped before it wrote the mark, so by its renewTime (by its clock; t if that
//     is later), which replaces that holder's earlier bounds. This is the one fast path: it
//     trusts the handoff mark as the protocol's, written only by the holder it names after
//     its Start returned.
//
// A Lease written under another shard count bounds every shard so (it maps members
// differently). The gate opens LeaseDuration after the latest bound: a shard taken after
// its Lease was seen unchanged for LeaseDuration opens LeaseDuration + RenewDeadline after
// that record was first listed; a handed-off one LeaseDuration after the handoff; one whose
// Lease was deleted or rewritten (to name the taker or not) LeaseDuration + RenewDeadline
// after the change was listed; a take retried after a lost reply as if the first reply had
// come. Bounds LeaseDuration old are forgotten.
//
// # Changing the shard count
//
// Replicas counting shards differently map members to shards differently: one member can
// be in shard 1 of one and shard 3 of the other, so their shard Leases cannot keep them
// apart. A replica therefore counts as live only the replicas of its own count, and while
// it sees a shard Lease that is not free and was written under another count (including
// Leases beyond its own count), it takes no shard and opens no gate of a shard it just
// took (it gives that up before any writer ran). Each of two such replicas lists after its
// own take and before opening, so they cannot both open. The shards it holds already, it
// keeps. During a rollout that changes the count, the replicas of the new count wait until
// every Lease of the old count is free, and the old ones hold only their fair share among
// themselves: shards of the old replicas already replaced go uncollected until then. Change
// the count with every replica stopped, or accept that pause.
//
// A Lease that names this replica but that it does not hold (a take whose reply was lost;
// a shard lost or given up whose Start returned; or someone else's rewrite) may be taken
// by it at once (its own writers of the shard stopped: it runs one Start per shard at a
// time), but its gate waits for the fence rule like any other.
//
// # Invariants
//
//   - Never two writers for one shard. A holder's writers are gated by Writable, true only
//     while its last successful renewal (timed when the request was sent) is less than
//     RenewDeadline old by its clock; it ends the shard's Start ctx by then. Another replica
//     takes the Lease only after it has seen it unchanged for LeaseDuration (timed when its
//     list returned, so after that renewal was written), and its write is conditional on
//     that unchanged version. Whatever happened to the Lease, the new holder opens its gate
//     by the fence rule: LeaseDuration after RenewDeadline past the last time the old holder
//     may have renewed (a time that is after that renewal was sent), so after the old holder
//     refused writes; or LeaseDuration after a handoff, written once the old holder's Start
//     returned. Two replicas' writes to one member are at least LeaseDuration apart (what the
//     unit tests check after every tick of a fake clock, and the e2e test in the members'
//     audit logs).
//   - A shard's gate opens only after this replica wrote the Lease naming itself, from the
//     version it read, and listed the Leases since; it never closes again: a shard lost or given up ends its Start ctx,
//     and a later take calls Start afresh with a new gate.
//   - One Start per shard per process at a time: a shard is warmed again only once the
//     previous Start for it returned.
//   - Writable never trusts the loop: a process paused (SIGSTOP) past RenewDeadline finds
//     its shards not writable when it resumes, before its loop or its watchdog runs.
//
// # Residual risks
//
//   - A write that passed Writable and was then delayed (the process paused between
//     Writable and sending it, or the request slow in the network or the API server) by
//     more than LeaseDuration − RenewDeadline can land after another replica took the
//     shard, and by more than LeaseDuration after its writers started. Writable shrinks this to one request in flight per writer; closing it needs a
//     fencing token the member API server checks, which Kubernetes does not offer for
//     ordinary writes. (cascade's deletes carry UID preconditions, which bound what such a
//     late write can do.)
//   - Clocks are not compared for the shard Leases, except for a handed-off Lease, whose
//     renewTime the taker compares with its own clock; its holder's writers stopped before
//     that write, so skew only exposes requests still in flight, as above. Timings assume
//     the replicas' clocks run at about the same rate; the margin absorbs drift.
//   - Liveness compares a replica Lease's renewTime with the local clock: skew beyond a
//     LeaseDuration miscounts replicas, which moves shards needlessly but never makes two
//     writers.
//   - A replica knows only the holders it listed. One that starts after a shard's Lease was
//     deleted or released (its holder cleared) by someone else while the holder still wrote
//     has no bound for that holder, and may open the shard at once; the holder stops at its
//     next renewal (NotFound or conflict: within RetryPeriod and a request). Lists that fail
//     only delay the bounds: a change is bounded from the list that sees it.
//   - The loop's other requests (the replica Lease, the lists, a take) are sent one after
//     another, each bounded by RenewDeadline: one that hangs that long holds up the next
//     renewals, and every held shard is stopped (on time, by the watchdog).
//
// # Concurrency
//
// Run's loop goroutine writes the Leases and starts and ends the runs of Start; it sends
// each held shard's renewal (or fence) in a goroutine of its own, which records the outcome
// as it returns (renewed, lost, or given up once fenced); the watchdog goroutine only ends
// overdue runs. Held, Holder, Writable and LiveReplicas are
// safe for concurrent use and cheap (one mutex, no request).
package shard
