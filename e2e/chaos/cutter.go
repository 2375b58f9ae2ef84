//go:build e2e

package chaos

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// cutter is a TCP proxy in front of kube-apiserver for cascade (the driver talks to the
// apiserver directly), which drops every connection it carries every few seconds: watches,
// lists and writes in flight end with a reset, as behind a flaky load balancer.
//
// A short --min-request-timeout would not do it: client-go's reflectors ask for their own watch
// timeout (5 to 10 minutes), which the apiserver honours before its minimum.
type cutter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	cuts   int // times connections were dropped
	drops  int // client connections dropped
}

func startCutter(target string) (*cutter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &cutter{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go c.serve()
	return c, nil
}

func (c *cutter) addr() string { return c.ln.Addr().String() }

func (c *cutter) serve() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		go c.handle(in)
	}
}

func (c *cutter) track(conn net.Conn, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.conns[conn] = struct{}{}
	} else {
		delete(c.conns, conn)
	}
}

func (c *cutter) handle(in net.Conn) {
	out, err := net.DialTimeout("tcp", c.target, 5*time.Second)
	if err != nil {
		_ = in.Close()
		return
	}
	c.track(in, true)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); _ = out.Close(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); _ = in.Close(); done <- struct{}{} }()
	<-done
	_ = in.Close()
	_ = out.Close()
	<-done
	c.track(in, false)
}

// cut drops every connection now.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cuts++
	for conn := range c.conns {
		_ = conn.Close()
		c.drops++
	}
}

// run cuts every 3 to 10 s until ctx ends.
func (c *cutter) run(ctx context.Context, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x637574))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(3000+rng.IntN(7000)) * time.Millisecond):
			c.cut()
		}
	}
}

func (c *cutter) stats() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cuts, c.drops
}

func (c *cutter) close() { _ = c.ln.Close() }
