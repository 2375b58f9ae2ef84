package work

import (
	"context"
	"sync"
	"time"
)

// A pool slot is held while an item is processed (Queue.ProcessNext), but an item that waits
// (on an API server that hangs, or on its client's rate limiter) lends it back to the pool
// until its wait ends: the pool is never held by a member that waits (issue 40.3). Waiting
// marks such a wait; the item takes a slot again, in line with the others, before it goes on.

// slot is the pool slot of the item processed under a context.
type slot struct {
	share *Share
	mu    sync.Mutex
	held  bool // the item holds it now
	lent  int  // waits in progress that lent it
	done  bool // the item ended: a wait still running under its context takes nothing
}

type slotKey struct{}

// withSlot returns ctx carrying s, the slot its item holds.
func withSlot(ctx context.Context, s *slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

// lend gives the slot back to the pool for a wait, unless another wait already did.
func (s *slot) lend() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lent++
	if s.held {
		s.held = false
		s.share.Release()
	}
}

// reclaim ends a wait that lent the slot: the last one to end takes a slot again (waiting in
// the pool's line). False when ctx ended first: the item then holds no slot.
func (s *slot) reclaim(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lent--
	if s.lent > 0 || s.held || s.done {
		return true
	}
	// Holding mu while waiting for a slot: another wait of this item that would lend or
	// reclaim waits for this one, which is right (the item holds no slot to lend meanwhile).
	s.held = s.share.Acquire(ctx)
	return s.held
}

// release gives the slot back at the end of the item, if the item holds it.
func (s *slot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	if s.held {
		s.held = false
		s.share.Release()
	}
}

// Waiting marks the start of a wait of the item processed under ctx (an API request, a rate
// limiter's delay): if it lasts longer than after, the item's pool slot goes back to the pool
// until it ends. The returned function ends the wait; it reports false when the item could not
// take a slot again because ctx ended (the caller then fails as for a cancelled request). Outside
// an item holding a slot (no pool, a watch, discovery) both are no-ops.
func Waiting(ctx context.Context, after time.Duration) (end func() bool) {
	s, _ := ctx.Value(slotKey{}).(*slot)
	if s == nil {
		return func() bool { return true }
	}
	lent := make(chan struct{})
	t := time.AfterFunc(after, func() {
		s.lend()
		close(lent)
	})
	return func() bool {
		if t.Stop() {
			return true // ended before it lent anything
		}
		<-lent
		return s.reclaim(ctx)
	}
}
