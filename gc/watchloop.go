package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/internal/client"
)

// A monitor's loop (issue 33.5): one goroutine per watched resource lists it into the graph
// and then follows its watch, decoding the response body itself. client-go's reflector spends
// four goroutines on the same watch (its loop, a resync timer, the StreamWatcher's decoder and
// HTTP/2's request goroutine); this loop spends two (itself and HTTP/2's), which is most of
// what an idle fleet member costs: 57 watched resources with the built-in APIs.
//
// Its semantics are the reflector's, for what cascade uses of it:
//   - a complete list first (streamLister.stream: a streaming list, else pages), then
//     graphStore.Replace, which deletes from the graph what the list no longer holds and marks
//     the resource synced;
//   - a watch from the list's resourceVersion, with bookmarks, ended by the server after 5 to 10
//     minutes (timeoutSeconds, spread so that a member's watches do not all end at once) and
//     resumed from the last resourceVersion seen;
//   - a watch the server refuses as too old (410 Gone, Expired) lists again at once;
//   - any other failure, of a list, a watch or a stream, is recorded on the store (the resource
//     counts as unsynced until its next complete list), waits an exponential backoff (800 ms
//     doubling to 30 s, jittered, reset after 2 minutes without failure) and lists again: a
//     complete list is the one way back to a view cascade vouches for.

// Backoff of a monitor's loop, client-go's reflector's values.
const (
	loopBackoffMin   = 800 * time.Millisecond
	loopBackoffMax   = 30 * time.Second
	loopBackoffReset = 2 * time.Minute
	// minWatchTimeout: a watch is asked to end after between this and twice this.
	minWatchTimeout = 5 * time.Minute
)

// eventStream is one open watch: next blocks for its next event and returns io.EOF once the
// server ended it; close releases it (any time, from the goroutine reading it).
type eventStream interface {
	next() (watch.EventType, runtime.Object, error)
	close()
}

// watchOpener opens a metadata watch of one resource.
type watchOpener func(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (eventStream, error)

// chanStream is a watch opened through a metadata client (its watch.Interface: a goroutine
// more per watch), where no Streams were given: unit tests, with fake clients.
type chanStream struct {
	ctx context.Context
	w   watch.Interface
}

func (s *chanStream) next() (watch.EventType, runtime.Object, error) {
	select {
	case <-s.ctx.Done():
		return "", nil, s.ctx.Err()
	case ev, ok := <-s.w.ResultChan():
		if !ok {
			return "", nil, io.EOF
		}
		return ev.Type, ev.Object, nil
	}
}

func (s *chanStream) close() { s.w.Stop() }

// Streams opens metadata watches on a cluster's HTTP client and decodes their events in the
// goroutine that reads them. Requests are built, rate limited and counted as client-go's
// metadata client does (its URL, parameters, Accept header, rate limiter and request metrics).
type Streams struct {
	rest       rest.Interface
	hc         *http.Client
	negotiator runtime.ClientNegotiator
	// userAgent is set on each watch, as client-go sets it: the transport's user-agent round
	// tripper then leaves the request as it is, instead of a copy held for the watch's life.
	userAgent string
}

// NewStreams builds Streams on cfg (its rate limiter, when set, is shared with the clients
// built on the same cfg) and hc, the cluster's HTTP client.
func NewStreams(cfg *rest.Config, hc *http.Client) (*Streams, error) {
	mc := metadata.ConfigFor(cfg)
	mc.GroupVersion = &schema.GroupVersion{}
	mc.APIPath = "/never-sent" // every request names its absolute path
	rc, err := rest.RESTClientForConfigAndClient(mc, hc)
	if err != nil {
		return nil, err
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = rest.DefaultKubernetesUserAgent()
	}
	return &Streams{
		rest:       rc,
		hc:         hc,
		userAgent:  ua,
		negotiator: runtime.NewClientNegotiator(metainternalversionscheme.Codecs.WithoutConversion(), schema.GroupVersion{}),
	}, nil
}

// resourcePath is the API path of gvr's objects in every namespace.
func resourcePath(gvr schema.GroupVersionResource) []string {
	if gvr.Group == "" {
		return []string{"/api", gvr.Version, gvr.Resource}
	}
	return []string{"/apis", gvr.Group, gvr.Version, gvr.Resource}
}

func (s *Streams) open(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (eventStream, error) {
	opts.Watch = true
	req := s.rest.Get().AbsPath(resourcePath(gvr)...).VersionedParams(&opts, metav1.ParameterCodec)
	u := req.URL()
	if rl := s.rest.GetRateLimiter(); rl != nil {
		start := time.Now()
		if err := rl.Wait(ctx); err != nil {
			return nil, err
		}
		clientmetrics.RateLimiterLatency.Observe(ctx, http.MethodGet, *u, time.Since(start))
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Accept", client.MetadataAccept)
	hreq.Header.Set("User-Agent", s.userAgent)
	start := time.Now()
	resp, err := s.hc.Do(hreq)
	clientmetrics.RequestLatency.Observe(ctx, http.MethodGet, *u, time.Since(start))
	if err != nil {
		clientmetrics.RequestResult.Increment(ctx, "<error>", http.MethodGet, u.Host)
		return nil, err
	}
	clientmetrics.RequestResult.Increment(ctx, strconv.Itoa(resp.StatusCode), http.MethodGet, u.Host)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, s.responseError(resp, gvr)
	}
	mediaType, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err == nil {
		var objects runtime.Decoder
		var events runtime.Serializer
		var framer runtime.Framer
		if objects, events, framer, err = s.negotiator.StreamDecoder(mediaType, params); err == nil {
			if mediaType == runtime.ContentTypeProtobuf {
				return newFrameStream(resp.Body, events, objects), nil // fastdecode.go
			}
			return &bodyStream{
				body: resp.Body,
				dec:  restwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(resp.Body), events), objects),
			}, nil
		}
	}
	resp.Body.Close()
	return nil, fmt.Errorf("watch %s: undecodable response %q: %w", GVRString(gvr), resp.Header.Get("Content-Type"), err)
}

// responseError is the error a non-2xx answer carries: its Status when it has one.
func (s *Streams) responseError(resp *http.Response, gvr schema.GroupVersionResource) error {
	return client.ResponseError(s.negotiator, resp, http.MethodGet, gvr.GroupResource(), "")
}

// bodyStream decodes a watch's events from its response body.
type bodyStream struct {
	body io.Closer
	dec  *restwatch.Decoder
}

func (s *bodyStream) next() (watch.EventType, runtime.Object, error) { return s.dec.Decode() }

func (s *bodyStream) close() { _ = s.body.Close() }

// backoff is the wait between failed attempts: doubling from loopBackoffMin to loopBackoffMax,
// jittered up to twice, back to the start once loopBackoffReset passed since the last wait.
type backoff struct {
	clock clock.Clock
	delay time.Duration
	last  time.Time
}

// wait sleeps the next delay; false when ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	now := b.clock.Now()
	switch {
	case b.delay == 0 || now.Sub(b.last) > loopBackoffReset:
		b.delay = loopBackoffMin
	default:
		b.delay = min(2*b.delay, loopBackoffMax)
	}
	b.last = now
	t := b.clock.NewTimer(b.delay + time.Duration(rand.Int64N(int64(b.delay)+1)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// errExpired: the server no longer has the watch's resourceVersion; the resource is listed again.
var errExpired = errors.New("the watch's resourceVersion expired")

// An idle watch is a goroutine parked in its body's Read, one per watched resource (57 per
// member of a fleet). The runtime halves a parked goroutine's stack at a garbage collection only
// while it uses less than a quarter of it (its frames down to the park, plus 800 bytes), so the
// frames that stay on the stack while a watch waits (run, follow, frameStream.next, then
// HTTP/2's read) are kept small: what they do besides waiting is in functions of its own, not
// inlined. Under 1,248 bytes of frames, the 8 KiB a list grew the stack to comes back down to 4
// KiB (TestIdleWatchStackIsShallow; docs/fleet.md).

// run lists m's resource and follows its watch until ctx ends.
func (m *monitor) run(ctx context.Context) {
	bo := &backoff{clock: clock.RealClock{}}
	for ctx.Err() == nil {
		rv, ok := m.listOnce(ctx, bo)
		if !ok {
			continue
		}
		for {
			err := m.follow(ctx, &rv)
			if !m.followEnded(ctx, err, bo) {
				break // list again
			}
		}
	}
}

// listOnce lists m's resource into the store; false (after the backoff) when that failed.
//
//go:noinline
func (m *monitor) listOnce(ctx context.Context, bo *backoff) (string, bool) {
	rv, err := m.lister.list(ctx)
	if err != nil {
		bo.wait(ctx)
		return "", false
	}
	_ = m.store.Replace(nil, rv)
	return rv, true
}

// followEnded records the end of a watch that follow returned err for, and says whether to
// watch again from where it ended (the server ended it: nil) rather than list again.
//
//go:noinline
func (m *monitor) followEnded(ctx context.Context, err error, bo *backoff) bool {
	m.store.watchEnded(time.Now())
	if err == nil {
		return true // the server ended the watch: resume from rv
	}
	if ctx.Err() == nil && !errors.Is(err, errExpired) {
		m.lister.fail(err)
		bo.wait(ctx)
	}
	return false
}

// follow watches from *rv, applying every event to the graph and advancing *rv, until the
// server ends the watch (nil) or something fails (errExpired when rv is too old).
func (m *monitor) follow(ctx context.Context, rv *string) error {
	s, err := m.openFrom(ctx, *rv)
	if err != nil {
		return err
	}
	defer s.close()
	m.store.watchOpened()
	began, events := time.Now(), 0
	for {
		t, obj, err := s.next()
		if err != nil {
			return streamEnded(err, events, began)
		}
		events++
		if err := m.apply(t, obj, rv); err != nil {
			return err
		}
	}
}

// openFrom opens m's watch from rv (errExpired when rv is too old).
//
//go:noinline
func (m *monitor) openFrom(ctx context.Context, rv string) (eventStream, error) {
	timeout := int64((minWatchTimeout + rand.N(minWatchTimeout)).Seconds())
	s, err := m.lister.openWatch(ctx, metav1.ListOptions{
		ResourceVersion:     rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeout,
	})
	if err != nil {
		if isExpired(err) {
			return nil, errExpired
		}
		return nil, err
	}
	return s, nil
}

// streamEnded is what follow returns when reading the next event failed with err, after events
// events since began.
//
//go:noinline
func streamEnded(err error, events int, began time.Time) error {
	switch {
	case errors.Is(err, io.EOF) && events == 0 && time.Since(began) < time.Second:
		// A server that ends every watch at once would have the loop spin: as client-go's
		// reflector, take it as a failure (backoff, then a list).
		return errors.New("the watch ended at once, with no event")
	case errors.Is(err, io.EOF):
		return nil
	}
	return err
}

// apply applies one watch event to the graph and advances *rv; an error ends the watch.
//
//go:noinline
func (m *monitor) apply(t watch.EventType, obj runtime.Object, rv *string) error {
	if t == watch.Error {
		err := apierrors.FromObject(obj)
		if isExpired(err) {
			return errExpired
		}
		return err
	}
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return fmt.Errorf("watch: unexpected %T in a %s event", obj, t)
	}
	switch t {
	case watch.Added, watch.Modified:
		m.store.observe(o)
	case watch.Deleted:
		_ = m.store.Delete(o)
	case watch.Bookmark:
	default:
		return fmt.Errorf("watch: unexpected event type %q", t)
	}
	*rv = o.ResourceVersion
	return nil
}

// isExpired reports whether err says a resourceVersion is too old to watch from.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}
