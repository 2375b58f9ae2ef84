package work

import (
	"context"
	"slices"
	"sync"
)

// Pool is a fixed number of slots shared by many queues, handed out fairly between the parties
// that wait for one (a fleet's members: each has a Share). A queue whose Options name a Share
// takes a slot for each item it processes and gives it back when the item is done, so the
// whole fleet processes at most Size items at a time, whatever the number of members or of
// their workers.
//
// Fairness is round robin over the shares that wait: a slot given back goes to the first share
// in line that holds less than its fair share (the slots over the shares that hold or wait,
// rounded up; the first in line when none does), which then goes to the back of the line if it
// still waits. So a share whose items hold their slots for long (a member whose API server
// hangs, up to the request deadline) gathers no more than its fair share while others wait. A member that waits for
// a slot waits for at most one slot given back per other waiting member, never for another's
// backlog (a busy member's thousands of items wait in its own queue, not in the line).
type Pool struct {
	size int

	mu      sync.Mutex
	free    int                 // guarded by mu
	line    []*Share            // guarded by mu: the shares with waiters, in the order they are served
	inUse   int                 // guarded by mu: slots held
	holders map[*Share]struct{} // guarded by mu: the shares that hold a slot
}

// NewPool returns a pool of size slots (at least one).
func NewPool(size int) *Pool {
	size = max(size, 1)
	return &Pool{size: size, free: size, holders: map[*Share]struct{}{}}
}

// Size is the number of slots.
func (p *Pool) Size() int { return p.size }

// InUse is the number of slots held now.
func (p *Pool) InUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inUse
}

// Share is one party's access to a Pool; its waiters are served in the order they came.
type Share struct {
	pool    *Pool
	waiters []chan struct{} // guarded by pool.mu
	queued  bool            // guarded by pool.mu: in the pool's line
	held    int             // guarded by pool.mu: slots it holds
}

// Share returns a new party of the pool.
func (p *Pool) Share() *Share { return &Share{pool: p} }

// Acquire takes a slot, waiting for one if none is free; it returns false, holding nothing,
// when ctx ends first. A slot taken is given back with Release.
func (s *Share) Acquire(ctx context.Context) bool {
	p := s.pool
	p.mu.Lock()
	if p.free > 0 && len(p.line) == 0 {
		p.free--
		p.inUse++
		s.took()
		p.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	s.waiters = append(s.waiters, ch)
	if !s.queued {
		s.queued = true
		p.line = append(p.line, s)
	}
	p.grant() // a free slot and a line that was empty before this share joined it
	p.mu.Unlock()

	select {
	case <-ch:
		return true
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-ch: // granted meanwhile: give it to the next in line
		p.inUse--
		p.free++
		s.gave()
		p.grant()
		return false
	default:
	}
	if i := slices.Index(s.waiters, ch); i >= 0 {
		s.waiters = slices.Delete(s.waiters, i, i+1)
	}
	if len(s.waiters) == 0 && s.queued {
		s.queued = false
		if i := slices.Index(p.line, s); i >= 0 {
			p.line = slices.Delete(p.line, i, i+1)
		}
	}
	return false
}

// next is the place in line of the share to serve: the first that holds less than its fair
// share, else the first. The fair share is the slots over the shares that want them (those in
// line and those that hold a slot), rounded up: a share whose items hold their slots for long
// (they wait on a hung API server, or its rate limit) gathers no more than that while others
// wait; slots nobody else wants still go to it.
func (p *Pool) next() int {
	wanting := len(p.line) + p.holdersOutOfLine()
	fair := (p.size + wanting - 1) / max(wanting, 1)
	for i, s := range p.line {
		if s.held < fair {
			return i
		}
	}
	return 0
}

// holdersOutOfLine is the number of shares that hold slots and wait for none. Called with mu
// held.
func (p *Pool) holdersOutOfLine() int {
	n := 0
	for s := range p.holders {
		if !s.queued {
			n++
		}
	}
	return n
}

// Release gives back a slot taken with Acquire.
func (s *Share) Release() {
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inUse--
	p.free++
	s.gave()
	p.grant()
}

// took and gave count a slot taken and given back by s. Called with pool.mu held.
func (s *Share) took() {
	s.held++
	s.pool.holders[s] = struct{}{}
}

func (s *Share) gave() {
	s.held--
	if s.held == 0 {
		delete(s.pool.holders, s)
	}
}

// grant hands free slots to the shares in line, one slot per share per turn, a share below
// its fair share before those at or above it (next). Called with mu held.
func (p *Pool) grant() {
	for p.free > 0 && len(p.line) > 0 {
		i := p.next()
		s := p.line[i]
		p.line = slices.Delete(p.line, i, i+1)
		ch := s.waiters[0]
		s.waiters = slices.Delete(s.waiters, 0, 1)
		p.free--
		p.inUse++
		s.took()
		close(ch)
		if len(s.waiters) > 0 {
			p.line = append(p.line, s)
		} else {
			s.queued = false
		}
	}
}
