package leader

import (
	"context"
	"sync"
	"testing"
)

// TestGate: closed until opened, then open for good; Wait returns false when ctx ends first;
// Open from many goroutines at once opens it once.
func TestGate(t *testing.T) {
	var g Gate
	if g.IsOpen() {
		t.Fatal("the zero Gate is open")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if g.Wait(ctx) {
		t.Error("Wait on a closed gate with an ended ctx = true")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(g.Open)
	}
	wg.Wait()
	if !g.IsOpen() || !g.Wait(context.Background()) {
		t.Error("the gate did not open")
	}
	select {
	case <-g.Done():
	default:
		t.Error("Done not closed once open")
	}
	if !Open().IsOpen() {
		t.Error("Open() returned a closed gate")
	}
}
