package fleet

import (
	"context"
	"net"
	"sync"
	"time"
)

// dialer gives a member connections of its own: a rest.Config with a Dial is never shared
// through client-go's transport cache (which would hand members with the same CA one
// transport, as if their API servers were one), and CloseAll ends the member's connections when
// it stops, so that a removed member leaves no connection, and no goroutine reading one, behind.
type dialer struct {
	d     net.Dialer
	mu    sync.Mutex
	conns map[*memberConn]struct{}
}

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
	md.conns[mc] = struct{}{}
	md.mu.Unlock()
	return mc, nil
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
