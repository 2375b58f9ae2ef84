package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultRequestTimeout is how long a member's request that is not a watch may take, from the
// moment it leaves the client's rate limiter to the end of its answer's body
// (--fleet-member-request-timeout). kube-apiserver ends its own non-long-running requests after
// a minute (its --request-timeout) and client-go's discovery after 32 s; a member that answers
// neither a page of 500 objects' metadata nor a DELETE within 30 s is taken as hung (its
// request fails, and is retried as any failed request is), while a slow one still answers.
const DefaultRequestTimeout = 30 * time.Second

// MaxResponseBytes bounds the body of a member's answer that is not a watch: discovery
// documents, list pages (500 objects' metadata), single objects. 16 MiB is what
// k8s.io/apimachinery's streaming decoder accepts of one watch event, so a watch event of a
// member is bounded by as much (a larger one ends that watch, which lists again). A real
// discovery document is well under 1 MiB, a page of 500 objects' metadata a few MiB at most.
const MaxResponseBytes = 16 << 20

// errTooLarge is why a member's answer above MaxResponseBytes is refused.
var errTooLarge = fmt.Errorf("the member's answer is larger than %d MiB: refused", MaxResponseBytes>>20)

// boundRequests returns the round tripper that bounds every request but watches: its time
// (timeout, its answer's body read included) and its answer's size (maxBody). Watches keep
// the timeouts the API server and the watch's own options give them, on the same client.
func boundRequests(rt http.RoundTripper, timeout time.Duration, maxBody int64) http.RoundTripper {
	return bounded{rt: rt, timeout: timeout, max: maxBody}
}

type bounded struct {
	rt      http.RoundTripper
	timeout time.Duration
	max     int64
}

// WrappedRoundTripper lets client-go reach the transport under it (utilnet.CloseIdleConnectionsFor).
func (b bounded) WrappedRoundTripper() http.RoundTripper { return b.rt }

// isWatch reports whether req is a watch: ?watch=true (or 1), or the legacy /watch/ paths.
func isWatch(req *http.Request) bool {
	switch req.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return strings.Contains(req.URL.Path, "/watch/")
}

func (b bounded) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return b.rt.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), b.timeout)
	resp, err := b.rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		err = b.explain(ctx, err)
		cancel()
		return nil, err
	}
	if resp.ContentLength > b.max {
		_ = resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("%s %s: %w (%d bytes announced)", req.Method, req.URL.Path, errTooLarge, resp.ContentLength)
	}
	resp.Body = &boundedBody{rc: resp.Body, left: b.max, ctx: ctx, cancel: cancel, b: b}
	return resp, nil
}

// explain says that err came from the deadline, when it did.
func (b bounded) explain(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within --fleet-member-request-timeout=%s: %w", b.timeout, err)
	}
	return err
}

// boundedBody is an answer's body that fails once more than its bound was read, and ends the
// request's deadline when closed.
type boundedBody struct {
	rc     io.ReadCloser
	left   int64
	ctx    context.Context
	cancel context.CancelFunc
	b      bounded
}

func (r *boundedBody) Read(p []byte) (int, error) {
	// One byte more than the bound tells a body of exactly the bound from a larger one.
	if int64(len(p)) > r.left+1 {
		p = p[:r.left+1]
	}
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return 0, errTooLarge
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = r.b.explain(r.ctx, err)
	}
	return n, err
}

func (r *boundedBody) Close() error {
	defer r.cancel()
	return r.rc.Close()
}
