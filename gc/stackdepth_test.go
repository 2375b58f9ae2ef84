package gc

import (
	"context"
	"errors"
	"io"
	"runtime/debug"
	"strings"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// idleFramesBudget is how many bytes of frames the watch loop may keep on an idle watch's stack,
// from its goroutine's first frame down to the body's Read. A parked goroutine's stack is halved
// at a collection only while it uses under a quarter of it (its frames plus the runtime's 800
// bytes of no-split reserve): under 1,248 bytes of frames, 8 KiB come back to 4 KiB. Below the
// body's Read, x/net/http2's read and the park take about 560 bytes (transportResponseBody.Read,
// pipe.Read, sync.Cond.Wait, notifyListWait, goparkunlock, gopark: their frame sizes in
// go1.26's assembly), which leaves the watch loop 688.
const idleFramesBudget = 1248 - 560

// depthBody is a watch body that records, at its first Read, how deep the stack is below top,
// then waits for the end of ctx as an idle watch does.
type depthBody struct {
	ctx   context.Context
	top   uintptr
	depth chan uintptr
}

func (b *depthBody) Read([]byte) (int, error) {
	var here byte
	b.depth <- b.top - uintptr(unsafe.Pointer(&here))
	<-b.ctx.Done()
	return 0, io.EOF
}

func (b *depthBody) Close() error { return nil }

//go:noinline
func growStack(n int) byte {
	var pad [512]byte
	if n == 0 {
		return pad[0]
	}
	return growStack(n-1) + pad[n%len(pad)]
}

// TestIdleWatchStackIsShallow: an idle protobuf watch waits in its body's Read with at most
// idleFramesBudget bytes of the monitor loop's frames above it (watchloop.go), so that the
// runtime can give back half of its stack (about 4 KiB per watched resource, 57 per member of a
// fleet: docs/fleet.md). The race detector's instrumentation makes frames larger: there, the
// depth is only reported.
func TestIdleWatchStackIsShallow(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection moves the stack meanwhile
	c := New(Options{Metrics: NewMetrics(prometheus.NewRegistry())})
	store := &graphStore{res: cmResource, graph: c}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := &depthBody{ctx: ctx, depth: make(chan uintptr, 1)}
	script := &scriptedWatches{done: make(chan struct{})}
	script.steps = []func(metav1.ListOptions) (eventStream, error){
		listOf("10", cm("a", "uid-a", "5")),
		func(metav1.ListOptions) (eventStream, error) { return newFrameStream(body, nil, nil), nil },
	}
	m := &monitor{res: cmResource, store: store, lister: &streamLister{open: script.open, store: store, logger: klog.Background()}}
	ran := make(chan struct{})
	go func() { // as monitors.start's goroutine
		defer close(ran)
		growStack(32) // the stack a list leaves, grown once: nothing below moves it again
		var top byte
		body.top = uintptr(unsafe.Pointer(&top))
		m.run(ctx)
	}()
	depth := <-body.depth
	cancel()
	<-ran
	t.Logf("the monitor loop's frames above an idle watch's Read: %d bytes (budget %d)", depth, idleFramesBudget)
	if raceEnabled {
		return
	}
	if depth > idleFramesBudget {
		t.Errorf("an idle watch keeps %d bytes of the monitor loop's frames on its stack, over %d: the runtime can no longer halve its stack (move what run, follow or frameStream.next do besides waiting into functions of their own)", depth, idleFramesBudget)
	}
}

// TestReadFullIsIOReadFull: readFull answers as io.ReadFull on whole, split, short and failing
// reads.
func TestReadFullIsIOReadFull(t *testing.T) {
	boom := errors.New("boom")
	sources := map[string]func() io.Reader{
		"whole":              func() io.Reader { return strings.NewReader("abcd") },
		"one byte at a time": func() io.Reader { return iotest.OneByteReader(strings.NewReader("abcdef")) },
		"data with EOF":      func() io.Reader { return iotest.DataErrReader(strings.NewReader("abcd")) },
		"empty":              func() io.Reader { return strings.NewReader("") },
		"short":              func() io.Reader { return iotest.OneByteReader(strings.NewReader("ab")) },
		"short with EOF":     func() io.Reader { return iotest.DataErrReader(strings.NewReader("ab")) },
		"failing":            func() io.Reader { return iotest.ErrReader(boom) },
		"failing midway":     func() io.Reader { return io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(boom)) },
		"timeout then data":  func() io.Reader { return iotest.TimeoutReader(strings.NewReader("abcd")) },
	}
	for name, src := range sources {
		want := make([]byte, 4)
		_, wantErr := io.ReadFull(src(), want)
		got := make([]byte, 4)
		gotErr := readFull(src(), got)
		if !errors.Is(gotErr, wantErr) || string(got) != string(want) {
			t.Errorf("%s: %q, %v; io.ReadFull: %q, %v", name, got, gotErr, want, wantErr)
		}
	}
}
