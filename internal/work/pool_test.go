package work

import (
	"context"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// acquired starts an Acquire on s and returns a channel closed once it returned true.
func acquired(ctx context.Context, s *Share) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		if s.Acquire(ctx) {
			close(ch)
		}
	}()
	return ch
}

// waitLine waits until n waiters of the pool are in line (every Acquire started has queued).
func waitLine(t *testing.T, p *Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		got := 0
		for _, s := range p.line {
			got += len(s.waiters)
		}
		p.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("fewer than %d waiters in line", n)
}

// A quiet share that comes to wait behind a busy one's backlog gets the next slot given back,
// not the busy share's tenth.
func TestPoolQuietShareNotBehindBacklog(t *testing.T) {
	ctx := t.Context()
	p := NewPool(1)
	busy, quiet := p.Share(), p.Share()
	if !busy.Acquire(ctx) {
		t.Fatal("the free slot was not taken")
	}
	var backlog []<-chan struct{}
	for i := range 10 {
		backlog = append(backlog, acquired(ctx, busy))
		waitLine(t, p, i+1)
	}
	q := acquired(ctx, quiet)
	waitLine(t, p, 11)

	busy.Release() // the busy share's first waiter was first in line
	<-backlog[0]
	busy.Release() // now the quiet share's turn, before the busy share's nine others
	select {
	case <-q:
	case <-time.After(10 * time.Second):
		t.Fatal("the quiet share was not served at the next slot given back")
	}
	for _, b := range backlog[1:] {
		select {
		case <-b:
			t.Fatal("a busy share's waiter was served before the quiet one gave its slot back")
		default:
		}
	}
	quiet.Release()
	for _, b := range backlog[1:] {
		<-b
		busy.Release()
	}
	if n := p.InUse(); n != 0 {
		t.Fatalf("%d slots held after every one was given back", n)
	}
}

// Shares in line are served one slot per turn: three shares with three waiters each are served
// a, b, c, a, b, c, ...
func TestPoolRoundRobin(t *testing.T) {
	ctx := t.Context()
	p := NewPool(1)
	shares := []*Share{p.Share(), p.Share(), p.Share()}
	if !shares[0].Acquire(ctx) {
		t.Fatal("the free slot was not taken")
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	n := 0
	for range 3 {
		for i, s := range shares {
			wg.Go(func() {
				if s.Acquire(ctx) {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					s.Release()
				}
			})
			n++
			waitLine(t, p, n)
		}
	}
	shares[0].Release()
	wg.Wait()
	if want := []int{0, 1, 2, 0, 1, 2, 0, 1, 2}; !slices.Equal(order, want) {
		t.Fatalf("served in the order %v, want %v", order, want)
	}
}

// A waiter whose context ends holds nothing and leaves the line; a slot granted to it as its
// context ended goes to the next in line.
func TestPoolAcquireCancelled(t *testing.T) {
	p := NewPool(1)
	a, b := p.Share(), p.Share()
	if !a.Acquire(t.Context()) {
		t.Fatal("the free slot was not taken")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan bool)
	go func() { done <- b.Acquire(ctx) }()
	waitLine(t, p, 1)
	cancel()
	if <-done {
		t.Fatal("Acquire returned true after its context ended")
	}
	waitLine(t, p, 0)
	a.Release()
	if n := p.InUse(); n != 0 {
		t.Fatalf("%d slots held, want 0", n)
	}
	// Both at once, many times: whichever wins, no slot is lost.
	for range 200 {
		if !a.Acquire(t.Context()) {
			t.Fatal("the free slot was not taken")
		}
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan bool)
		go func() { got <- b.Acquire(ctx) }()
		waitLine(t, p, 1)
		go cancel()
		a.Release()
		if <-got {
			b.Release()
		}
		if n := p.InUse(); n != 0 {
			t.Fatalf("%d slots held after a cancelled wait, want 0", n)
		}
	}
	cancel()
}

// Never more items at once than the pool's size, across queues with many workers each.
func TestPoolBoundsQueues(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := NewPool(3)
	var inFlight, peak, done atomic.Int64
	process := func(context.Context, int) (Outcome, error) {
		n := inFlight.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		inFlight.Add(-1)
		done.Add(1)
		return Done, nil
	}
	var wg sync.WaitGroup
	for range 5 {
		q := NewQueue("pool", Options[int]{Share: p.Share()})
		for i := range 20 {
			q.Add(i)
		}
		wg.Go(func() { q.Run(ctx, 4, process) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for done.Load() < 100 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if done.Load() != 100 {
		t.Fatalf("%d of 100 items processed", done.Load())
	}
	if peak.Load() > 3 {
		t.Fatalf("%d items processed at once with a pool of 3", peak.Load())
	}
	if p.InUse() != 0 {
		t.Fatalf("%d slots held once every queue stopped", p.InUse())
	}
}

// BenchmarkPoolFairness measures, side by side in one run, how long a quiet queue's item waits
// (added to processed) with the pool idle and while another queue of the same pool works through
// a backlog of 1,000 items with 8 workers: the pool is 4 slots, each item 1 ms of waiting (an API
// call's round trip). It reports the quiet queue's p50 and p99 in both runs and the ratio of
// the p99s (goal: at most 2). Without the pool's round robin the quiet item would wait behind
// up to 8 busy workers' items per slot.
func BenchmarkPoolFairness(b *testing.B) {
	measure := func(b *testing.B, burst bool) (p50, p99 time.Duration) {
		ctx, cancel := context.WithCancel(b.Context())
		defer cancel()
		p := NewPool(4)
		work := func(context.Context, int) (Outcome, error) {
			time.Sleep(time.Millisecond)
			return Done, nil
		}
		var wg sync.WaitGroup
		if burst {
			busy := NewQueue("busy", Options[int]{Share: p.Share()})
			for i := range 1000 {
				busy.Add(i)
			}
			wg.Go(func() { busy.Run(ctx, 8, work) })
		}
		quiet := NewQueue("quiet", Options[int]{Share: p.Share()})
		added := make([]time.Time, 100)
		var lat []time.Duration
		var mu sync.Mutex
		wg.Go(func() {
			quiet.Run(ctx, 1, func(ctx context.Context, i int) (Outcome, error) {
				time.Sleep(time.Millisecond)
				mu.Lock()
				lat = append(lat, time.Since(added[i]))
				mu.Unlock()
				return Done, nil
			})
		})
		for i := range added {
			mu.Lock()
			added[i] = time.Now()
			mu.Unlock()
			quiet.Add(i)
			time.Sleep(2 * time.Millisecond)
		}
		for {
			mu.Lock()
			n := len(lat)
			mu.Unlock()
			if n == len(added) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		wg.Wait()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat[len(lat)/2], lat[len(lat)*99/100]
	}
	var q50, q99, b50, b99 time.Duration
	for b.Loop() {
		a50, a99 := measure(b, false)
		c50, c99 := measure(b, true)
		q50, q99, b50, b99 = q50+a50, q99+a99, b50+c50, b99+c99
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64(q50/n)/1e3, "quiet-p50-µs")
	b.ReportMetric(float64(q99/n)/1e3, "quiet-p99-µs")
	b.ReportMetric(float64(b50/n)/1e3, "burst-p50-µs")
	b.ReportMetric(float64(b99/n)/1e3, "burst-p99-µs")
	b.ReportMetric(float64(b99)/float64(q99), "p99-ratio")
}

// TestPoolFairShareCap (issue 40.3): a share that holds its fair share of the slots (the size
// over the shares that hold or wait) is served after the shares below theirs, so a share whose
// items wait on a hung API server cannot gather the pool while others wait: with 4 slots all
// held by a, and a and b both waiting, the slots a gives back go to b until both hold 2.
func TestPoolFairShareCap(t *testing.T) {
	p := NewPool(4)
	a, b := p.Share(), p.Share()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 4 {
		if !a.Acquire(ctx) {
			t.Fatal("a could not take a free slot")
		}
	}
	// Each share's waiters, whichever of them is served (they queue in any order).
	waiters := func(s *Share) chan struct{} {
		got := make(chan struct{}, 2)
		for range 2 {
			go func() {
				if s.Acquire(ctx) {
					got <- struct{}{}
				}
			}()
		}
		return got
	}
	bGot := waiters(b)
	waitLine(t, p, 2)
	aGot := waiters(a)
	waitLine(t, p, 4)
	a.Release() // a: 3 held
	<-bGot
	a.Release() // a: 2 held; b, with 1, is below the fair share of 2, a at it
	select {
	case <-bGot:
	case <-aGot:
		t.Fatal("a, at its fair share, was served before b, below it")
	case <-time.After(10 * time.Second):
		t.Fatal("no slot handed out")
	}
	p.mu.Lock()
	ha, hb := a.held, b.held
	p.mu.Unlock()
	if ha != 2 || hb != 2 {
		t.Errorf("held: a %d, b %d; want 2 and 2", ha, hb)
	}
	// Once b holds its fair share, a's waiters are served as slots come back (the pool is never
	// left idle while someone waits).
	b.Release()
	select {
	case <-aGot:
	case <-time.After(10 * time.Second):
		t.Fatal("a slot given back went to no one")
	}
}
