package client

import (
	"fmt"
	"net/http"
)

// ErrNotWritable wraps the reason a write guard refused a write.
var ErrNotWritable = fmt.Errorf("this replica may not write now")

// GuardWrites returns the round tripper that sends a request that writes (any method but GET,
// HEAD and OPTIONS: lists and watches are GETs) only while writable says this replica may
// write, and refuses the others without a request: the one write guard of a sharded fleet's
// member (internal/shard's Writable: its shard held, and renewed within the renew deadline by
// the local clock). It sits under client-go's rate limiter, so it is asked as the request
// leaves: a write that waited in the rate limiter, or in a process stopped by SIGSTOP past its
// Lease, is refused, as the shard's Lease may be another replica's by then. Every client built
// on the member's configuration (deletes, patches, the admission objects, the orphan record,
// Events) goes through it.
func GuardWrites(rt http.RoundTripper, writable func() error) http.RoundTripper {
	return writeGuard{rt: rt, writable: writable}
}

type writeGuard struct {
	rt       http.RoundTripper
	writable func() error
}

// WrappedRoundTripper lets client-go reach the transport under it (utilnet.CloseIdleConnectionsFor).
func (g writeGuard) WrappedRoundTripper() http.RoundTripper { return g.rt }

func (g writeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if err := g.writable(); err != nil {
			if req.Body != nil {
				_ = req.Body.Close() // a RoundTripper closes the body, even on error
			}
			return nil, fmt.Errorf("%s %s not sent: %w: %w", req.Method, req.URL.Path, ErrNotWritable, err)
		}
	}
	return g.rt.RoundTrip(req)
}
