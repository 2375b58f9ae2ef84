package fleet

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// dialer gives a member connections of its own: a rest.Config with a Dial is never shared
// through client-go's transport cache (which would hand members with the same CA one
// transport, as if their API servers were one), and CloseAll ends the member's connections when
// it stops, so that a removed member leaves no connection, and no goroutine reading one, behind.
type dialer struct {
	d      net.Dialer
	mu     sync.Mutex
	conns  map[*memberConn]struct{}
	closed bool // Close was called: no connection is dialled any more
}

// errDialerClosed is the dial of a member that has stopped.
var errDialerClosed = errors.New("the member has stopped: no connection to its API server is opened any more")

func newDialer() *dialer {
	return &dialer{d: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, conns: map[*memberConn]struct{}{}}
}

func (md *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := md.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	mc := &memberConn{Conn: c, md: md}
	md.mu.Lock()
	if md.closed {
		md.mu.Unlock()
		_ = c.Close()
		return nil, errDialerClosed
	}
	md.conns[mc] = struct{}{}
	md.mu.Unlock()
	return mc, nil
}

// Close closes every connection and refuses new ones: what a request still in flight (an Event
// write made with no context of the member's) waits on fails at once.
func (md *dialer) Close() {
	md.mu.Lock()
	md.closed = true
	md.mu.Unlock()
	md.CloseAll()
}

// CloseAll closes every connection still open.
func (md *dialer) CloseAll() {
	md.mu.Lock()
	conns := make([]*memberConn, 0, len(md.conns))
	for c := range md.conns {
		conns = append(conns, c)
	}
	md.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// open is the number of connections open now.
func (md *dialer) open() int {
	md.mu.Lock()
	defer md.mu.Unlock()
	return len(md.conns)
}

type memberConn struct {
	net.Conn
	md   *dialer
	once sync.Once
}

func (c *memberConn) Close() error {
	c.once.Do(func() {
		c.md.mu.Lock()
		delete(c.md.conns, c)
		c.md.mu.Unlock()
	})
	return c.Conn.Close()
}
