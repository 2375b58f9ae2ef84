package fleet

import (
	"context"
	"net/http"
	"time"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/cascade-gc/cascade/internal/work"
)

// LendAfter is how long a member's item may wait (for its API server's answer, or for its
// client's rate limiter) before its slot of the fleet's pool goes back to the pool until the
// wait ends (work.Waiting). A healthy API server answers the collector's requests in
// milliseconds, so a healthy member rarely lends; a hung one (up to the request deadline) or
// one whose budget is spent holds no slot while it waits: ten hung members cannot take the
// pool from the healthy ones (BenchmarkFleetHungMembers).
const LendAfter = 100 * time.Millisecond

// lendWhileWaiting returns the round tripper under which a request of an item holding a pool
// slot lends the slot while it waits longer than after. Watches hold none.
func lendWhileWaiting(rt http.RoundTripper, after time.Duration) http.RoundTripper {
	return lending{rt: rt, after: after}
}

type lending struct {
	rt    http.RoundTripper
	after time.Duration
}

// WrappedRoundTripper lets client-go reach the transport under it (utilnet.CloseIdleConnectionsFor).
func (l lending) WrappedRoundTripper() http.RoundTripper { return l.rt }

func (l lending) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return l.rt.RoundTrip(req)
	}
	end := work.Waiting(req.Context(), l.after)
	resp, err := l.rt.RoundTrip(req)
	if !end() {
		// The item ended (its context) before it had a slot again: as a cancelled request.
		if resp != nil {
			_ = resp.Body.Close()
		}
		return nil, context.Cause(req.Context())
	}
	return resp, err
}

// lendingLimiter is a member's client rate limiter under which an item that waits for its turn
// longer than after lends its pool slot meanwhile.
type lendingLimiter struct {
	flowcontrol.RateLimiter
	after time.Duration
}

func (l lendingLimiter) Wait(ctx context.Context) error {
	end := work.Waiting(ctx, l.after)
	err := l.RateLimiter.Wait(ctx)
	if !end() && err == nil {
		return context.Cause(ctx)
	}
	return err
}
