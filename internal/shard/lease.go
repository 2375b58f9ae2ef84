package shard

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The labels and the annotation of the fleet's Leases.
const (
	// ShardLabel marks a shard Lease; its value is the Prefix.
	ShardLabel = "cascade.dev/shard-of"
	// ReplicaLabel marks a replica's presence Lease; its value is the Prefix.
	ReplicaLabel = "cascade.dev/replica-of"
	// HandoffAnnotation ("true") is set by the last write of a holder that gave its shard up
	// after its writers stopped: the shard is free LeaseDuration after that write's renewTime.
	HandoffAnnotation = "cascade.dev/handoff"
	// ShardsAnnotation is the shard count of the replica that wrote the Lease: replicas that
	// count differently map members to shards differently, so never hold shards together.
	ShardsAnnotation = "cascade.dev/shards"
)

func shardLeaseName(prefix string, shard int) string {
	return fmt.Sprintf("%s-shard-%d", prefix, shard)
}

// shardIndex is the shard of a Lease named by shardLeaseName, or false.
func shardIndex(prefix, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix+"-shard-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// replicaLeaseName is PREFIX-replica-ID, with the characters a name cannot hold replaced
// (internal/leader's identities hold an underscore) and then a hash of the identity appended,
// so that two identities never share a name.
func replicaLeaseName(prefix, id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := prefix + "-replica-" + b.String()
	if b.String() != id || len(name) > 253 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		suffix := fmt.Sprintf("-%08x", h.Sum32())
		name = name[:min(len(name), 253-len(suffix))] + suffix
	}
	return name
}

// seconds is d in whole seconds, rounded up, as a Lease holds it.
func seconds(d time.Duration) *int32 {
	s := int32((d + time.Second - 1) / time.Second)
	return &s
}

// record is what a shard Lease says, as far as taking it goes.
type record struct {
	exists    bool
	lease     *coordv1.Lease // as read: the base of an Update that takes it (nil when !exists)
	holder    string
	renewTime time.Time
	duration  time.Duration // the Lease's, at least ours
	handoff   bool
	shards    int // the writer's shard count (0: unknown)
}

func recordOf(l *coordv1.Lease, ours time.Duration) record {
	r := record{exists: true, lease: l, duration: ours}
	if h := l.Spec.HolderIdentity; h != nil {
		r.holder = *h
	}
	if t := l.Spec.RenewTime; t != nil {
		r.renewTime = t.Time
	}
	if s := l.Spec.LeaseDurationSeconds; s != nil {
		r.duration = max(r.duration, time.Duration(*s)*time.Second)
	}
	r.handoff = l.Annotations[HandoffAnnotation] == "true"
	r.shards, _ = strconv.Atoi(l.Annotations[ShardsAnnotation])
	return r
}

// same reports whether r and o are one write of the Lease.
func (r record) same(o record) bool {
	if r.exists != o.exists {
		return false
	}
	if !r.exists {
		return true
	}
	return r.lease.ResourceVersion == o.lease.ResourceVersion && r.holder == o.holder && r.renewTime.Equal(o.renewTime)
}

// observation is a shard Lease's record and since when (by our clock) it has not changed.
type observation struct {
	record
	since time.Time
}

// free reports whether the shard may be taken at now: no Lease; no holder (released after
// its writers stopped); handed off and its renewTime + duration past; or, whatever its holder
// says, unchanged for duration by our own clock (the holder stopped its writers RenewDeadline
// after its last renewal, which it sent before we first saw it).
func (o observation) free(now time.Time) bool {
	at := o.freeAt()
	return !now.Before(at)
}

// freeAt is when the shard is free (see free), if its Lease does not change meanwhile.
func (o observation) freeAt() time.Time {
	switch {
	case !o.exists, o.holder == "":
		return o.since
	case o.handoff && o.renewTime.Before(o.since):
		return o.renewTime.Add(o.duration)
	default:
		return o.since.Add(o.duration)
	}
}

// stamp is what this replica's writes of a Lease say: its identity, the Lease's duration and
// its shard count.
type stamp struct {
	id       string
	duration time.Duration
	shards   int
}

// spec sets the fields of l that name this replica holder, renewed at now.
func (s stamp) spec(l *coordv1.Lease, now time.Time) {
	id := s.id
	l.Spec.HolderIdentity = &id
	l.Spec.LeaseDurationSeconds = seconds(s.duration)
	t := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &t
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[ShardsAnnotation] = strconv.Itoa(s.shards)
	delete(l.Annotations, HandoffAnnotation)
}

// newLease is a Lease named name, labelled key=prefix, held by this replica since now.
func (s stamp) newLease(namespace, name, key, prefix string, now time.Time) *coordv1.Lease {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{key: prefix}}}
	s.spec(l, now)
	t := metav1.NewMicroTime(now)
	l.Spec.AcquireTime = &t
	transitions := int32(0)
	l.Spec.LeaseTransitions = &transitions
	return l
}

// taken is read (a shard Lease someone else held, or nobody) taken by this replica at now.
func (s stamp) taken(read *coordv1.Lease, now time.Time) *coordv1.Lease {
	l := read.DeepCopy()
	if h := l.Spec.HolderIdentity; h == nil || *h != s.id {
		transitions := int32(1)
		if p := l.Spec.LeaseTransitions; p != nil {
			transitions = *p + 1
		}
		l.Spec.LeaseTransitions = &transitions
	}
	s.spec(l, now)
	t := metav1.NewMicroTime(now)
	l.Spec.AcquireTime = &t
	return l
}

// renewed is held (our last write) renewed at now.
func (s stamp) renewed(held *coordv1.Lease, now time.Time) *coordv1.Lease {
	l := held.DeepCopy()
	s.spec(l, now)
	return l
}

// fenced is held renewed at now by a holder whose writers have stopped and that gives the
// shard up: free at now + duration.
func (s stamp) fenced(held *coordv1.Lease, now time.Time) *coordv1.Lease {
	l := s.renewed(held, now)
	l.Annotations[HandoffAnnotation] = "true"
	return l
}

// writers bounds, by this replica's clock, when other replicas' writers in a shard last
// wrote: for each other replica seen holding the shard's Lease, the latest time its writers
// may have written, by what this replica has seen (Manager.noteLocked). A shard opens no
// sooner than LeaseDuration after the latest, whatever its Lease says by then (deleted,
// rewritten, naming us): no member is written by two replicas less than LeaseDuration apart.
type writers map[string]time.Time

// until notes that holder's writers may write until t.
func (w writers) until(holder string, t time.Time) {
	if t.After(w[holder]) {
		w[holder] = t
	}
}

// stopped notes that every writer of holder stopped by t (it handed the shard off).
func (w writers) stopped(holder string, t time.Time) {
	w[holder] = t
}

// last is the latest time any of them may have written (zero: none).
func (w writers) last() time.Time {
	var last time.Time
	for _, t := range w {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// prune forgets the writers that stopped duration ago or more: they bound nothing now.
func (w writers) prune(now time.Time, duration time.Duration) {
	for h, t := range w {
		if !now.Before(t.Add(duration)) {
			delete(w, h)
		}
	}
}
