package gc

import (
	"context"
	"time"

	"github.com/cascade-gc/cascade/graph"
)

// Owners cascade never observes (their kind is ignored, not listable, in a failed group, or they
// were created and deleted inside a watch gap) are verified once with a live GET. Nothing tells
// the graph when such an owner goes, so a present answer is checked again, with backoff, for as
// long as dependents still make the claim (in-tree polls virtual nodes the same way,
// kubernetes#56121). The work is bounded: one entry per claim the graph lists, dropped as soon
// as the graph stops listing it, and at most one GET per claim per interval.

// DefaultOwnerReverifyPeriod is the default of Options.OwnerReverifyPeriod.
const DefaultOwnerReverifyPeriod = 30 * time.Second

// maxReverifyFactor bounds the backoff: a claim found present again and again is checked at
// least every maxReverifyFactor periods.
const maxReverifyFactor = 16

// reverifySchedule decides when each present-but-unobserved claim is checked again. It is pure
// (the clock comes in as now) and used by one goroutine.
type reverifySchedule struct {
	base, max time.Duration
	next      map[graph.Ref]reverifyState
}

type reverifyState struct {
	at       time.Time     // when the claim is due
	interval time.Duration // the wait before the check after that
}

func newReverifySchedule(base time.Duration) *reverifySchedule {
	return &reverifySchedule{base: base, max: base * maxReverifyFactor, next: map[graph.Ref]reverifyState{}}
}

// due takes the claims the graph lists now and returns those to verify at now. A claim seen for
// the first time is due one period later; each check doubles its interval up to max. Claims no
// longer listed are forgotten (the owner was answered absent, or no dependent makes the claim).
func (s *reverifySchedule) due(now time.Time, claims []graph.Ref) []graph.Ref {
	listed := make(map[graph.Ref]struct{}, len(claims))
	var out []graph.Ref
	for _, c := range claims {
		listed[c] = struct{}{}
		st, ok := s.next[c]
		switch {
		case !ok:
			s.next[c] = reverifyState{at: now.Add(s.base), interval: min(2*s.base, s.max)}
		case !now.Before(st.at):
			out = append(out, c)
			s.next[c] = reverifyState{at: now.Add(st.interval), interval: min(2*st.interval, s.max)}
		}
	}
	for c := range s.next {
		if _, ok := listed[c]; !ok {
			delete(s.next, c)
		}
	}
	return out
}

// runReverify lists the present-but-unobserved claims every OwnerReverifyPeriod and hands the
// due ones to the verify workers, whose answer goes to the graph like any other.
func (c *Controller) runReverify(ctx context.Context) {
	s := newReverifySchedule(c.opts.OwnerReverifyPeriod)
	t := time.NewTicker(c.opts.OwnerReverifyPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.mu.RLock()
			claims := c.g.UnobservedPresentClaims()
			c.mu.RUnlock()
			for _, claim := range s.due(now, claims) {
				c.verifyQueue.Add(claim)
			}
		}
	}
}
