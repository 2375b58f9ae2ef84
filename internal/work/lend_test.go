package work

import (
	"context"
	"testing"
	"time"
)

// TestWaitingLendsTheSlot: an item that waits longer than its bound (on a hung API server)
// gives its pool slot back meanwhile, so another share takes the pool's only slot at once; the
// item goes on only once it has a slot again; and a short wait lends nothing.
func TestWaitingLendsTheSlot(t *testing.T) {
	p := NewPool(1)
	hung, healthy := p.Share(), p.Share()
	q := NewQueue("hung", Options[string]{Share: hung})
	defer q.ShutDown()
	q.Add("item")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waiting, answer, resumed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go q.ProcessNext(ctx, func(ctx context.Context, _ string) (Outcome, error) {
		if end := Waiting(ctx, time.Hour); !end() { // answered at once: nothing lent
			t.Error("a short wait could not go on")
		}
		if p.InUse() != 1 {
			t.Errorf("in use during the item after a short wait: %d, want 1 (its own)", p.InUse())
		}
		end := Waiting(ctx, time.Millisecond)
		close(waiting)
		<-answer
		if !end() {
			t.Error("the item could not take a slot again")
		}
		close(resumed)
		return Done, nil
	})
	<-waiting
	if !healthy.Acquire(ctx) {
		t.Fatal("another share got no slot while the item waited: the slot was not lent")
	}
	close(answer)
	select {
	case <-resumed:
		t.Fatal("the item went on without a slot")
	case <-time.After(100 * time.Millisecond):
	}
	healthy.Release()
	select {
	case <-resumed:
	case <-ctx.Done():
		t.Fatal("the item never had its slot back")
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.InUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots in use after the item ended, want 0", p.InUse())
		}
		time.Sleep(time.Millisecond)
	}
	// A wait under the ended item's context (something it started that outlived it) takes no
	// slot.
	if end := Waiting(withSlot(context.Background(), &slot{share: hung, done: true}), time.Millisecond); !func() bool {
		time.Sleep(10 * time.Millisecond)
		return end()
	}() || p.InUse() != 0 {
		t.Errorf("a wait after the item ended took a slot: %d in use", p.InUse())
	}
}
