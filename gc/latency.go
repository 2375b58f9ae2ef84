package gc

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/graph"
)

// Collection latency, as operators see it: from the moment cascade observes an owner's
// deletion to the moment it observes the last of it done, per propagation:
//   - Background: the owner observed deleted → its last dependent (at that time) observed deleted;
//   - Foreground and Orphan: the owner observed being deleted with the GC finalizer → the owner
//     observed gone (its dependents deleted, or released).
//
// The tracker follows at most maxTrackedOwners owners at once; an owner whose dependents are
// kept (another owner holds them) never completes and is dropped after maxTrackedAge.

const (
	maxTrackedOwners = 10000
	maxTrackedAge    = time.Hour
)

type pendingOwner struct {
	start       time.Time
	propagation string
	remaining   map[types.UID]struct{} // Background: dependents not yet observed deleted
}

// latencyTracker turns graph events and their effects into cascade_collection_duration_seconds.
// It is fed only by apply, under the graph's write lock, which also guards its maps.
type latencyTracker struct {
	hist *prometheus.HistogramVec
	now  func() time.Time

	owners map[types.UID]*pendingOwner
	byDep  map[types.UID][]types.UID // dependent → Background owners waiting on it
}

func newLatencyTracker(hist *prometheus.HistogramVec, now func() time.Time) *latencyTracker {
	return &latencyTracker{hist: hist, now: now, owners: map[types.UID]*pendingOwner{}, byDep: map[types.UID][]types.UID{}}
}

// observe folds in one applied event and the effects it produced.
func (l *latencyTracker) observe(ev graph.Event, eff graph.Effects) {
	if l == nil || l.hist == nil {
		return
	}
	now := l.now()
	for _, uid := range eff.Foreground {
		l.start(uid, "Foreground", now, nil)
	}
	for _, uid := range eff.AttemptOrphan {
		l.start(uid, "Orphan", now, nil)
	}
	if ev.Type != graph.EventDeleted {
		return
	}
	uid := ev.Object.UID
	if p, ok := l.owners[uid]; ok && p.remaining == nil {
		l.done(uid, p, now) // a Foreground or Orphan owner is gone
	} else if !ok && len(eff.AttemptDelete) > 0 {
		l.start(uid, "Background", now, eff.AttemptDelete)
	}
	for _, owner := range l.byDep[uid] {
		if p, ok := l.owners[owner]; ok {
			delete(p.remaining, uid)
			if len(p.remaining) == 0 {
				l.done(owner, p, now)
			}
		}
	}
	delete(l.byDep, uid)
}

func (l *latencyTracker) start(uid types.UID, propagation string, now time.Time, deps []types.UID) {
	if _, ok := l.owners[uid]; ok {
		return
	}
	if len(l.owners) >= maxTrackedOwners {
		l.expire(now)
		if len(l.owners) >= maxTrackedOwners {
			return
		}
	}
	p := &pendingOwner{start: now, propagation: propagation}
	if deps != nil {
		p.remaining = make(map[types.UID]struct{}, len(deps))
		for _, d := range deps {
			p.remaining[d] = struct{}{}
			l.byDep[d] = append(l.byDep[d], uid)
		}
	}
	l.owners[uid] = p
}

func (l *latencyTracker) done(uid types.UID, p *pendingOwner, now time.Time) {
	l.hist.WithLabelValues(p.propagation).Observe(now.Sub(p.start).Seconds())
	delete(l.owners, uid)
}

// expire drops owners tracked longer than maxTrackedAge (their dependents were kept).
func (l *latencyTracker) expire(now time.Time) {
	for uid, p := range l.owners {
		if now.Sub(p.start) > maxTrackedAge {
			delete(l.owners, uid)
			for d := range p.remaining {
				delete(l.byDep, d) // may drop another owner's entry too: it then never completes, and expires
			}
		}
	}
}
