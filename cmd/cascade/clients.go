package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
)

// userAgent identifies cascade's requests in the API server's logs and metrics.
const userAgent = "cascade"

// clients are the API clients cascade builds from one rest.Config.
type clients struct {
	host string
	// hc is the one HTTP client every client here uses.
	hc       *http.Client
	disco    *discovery.DiscoveryClient
	metadata metadata.Interface
	dynamic  dynamic.Interface
	kube     kubernetes.Interface
	// streams opens the monitors' watches on the same HTTP client and rate limiter.
	streams *gc.Streams
	// deletes sends the collector's DELETEs on the same HTTP client and rate limiter.
	deletes *client.Deleter
}

// newClients builds the clients on one HTTP client and one client-side rate limiter: one
// connection to the API server (HTTP/2 carries every watch and request; client-go opens another
// only when the server's stream limit is reached), and --kube-api-qps (a fleet member's
// --fleet-member-qps) is the budget of all of them together, not of each.
func newClients(cfg *rest.Config) (*clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		burst := cfg.Burst
		if burst < 1 {
			burst = rest.DefaultBurst
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, burst)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("build HTTP client: %w", err)
	}
	c := &clients{host: cfg.Host, hc: hc}
	if c.disco, err = discovery.NewDiscoveryClientForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("build discovery client: %w", err)
	}
	if c.metadata, err = metadata.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("build metadata client: %w", err)
	}
	if c.dynamic, err = dynamic.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	if c.kube, err = kubernetes.NewForConfigAndClient(cfg, hc); err != nil {
		return nil, fmt.Errorf("build client: %w", err)
	}
	if c.streams, err = gc.NewStreams(cfg, hc); err != nil {
		return nil, fmt.Errorf("build watch client: %w", err)
	}
	if c.deletes, err = client.NewDeleter(cfg, hc); err != nil {
		return nil, fmt.Errorf("build delete client: %w", err)
	}
	return c, nil
}

// restConfig loads --kubeconfig, or the in-cluster config when none is given.
func restConfig(opts *Options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if opts.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("cannot load --kubeconfig=%s: %v", opts.Kubeconfig, err)
		}
	} else {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and no in-cluster config (%v): pass --kubeconfig=PATH", err)
		}
	}
	cfg.UserAgent = userAgent
	if opts.QPS == 0 {
		cfg.QPS = -1 // client-go: negative disables the client-side rate limiter
	} else {
		cfg.QPS = opts.QPS
		cfg.Burst = opts.Burst
	}
	return cfg, nil
}

// waitForServer retries the server's /version until it answers or timeout passes.
func waitForServer(ctx context.Context, disco discovery.ServerVersionInterface, host string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		_, last = disco.ServerVersion()
		return last == nil, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		return fmt.Errorf("cannot reach the API server at %s within --startup-timeout=%s: %v; check --kubeconfig and that the server is running", host, timeout, last)
	}
	return nil
}

// Bounds of the client the serving port's reviews go through (reviewClient).
const (
	reviewsInFlight = 8
	reviewsQPS      = 20
	reviewsBurst    = 40
)

// errReviewsBusy is the answer of the review client while reviewsInFlight reviews are under
// way: the request being authenticated is refused (401) without a review.
var errReviewsBusy = errors.New("too many TokenReviews and SubjectAccessReviews in flight")

// reviewClient is the client of the serving port's TokenReviews and SubjectAccessReviews
// (issue 32.6): a client of its own, so that forged bearer tokens, each a TokenReview (a
// repeated one answered from the 10 s cache, negative answers included), never take the
// client-side rate limit of the Lease renewals and deletes; its own rate limit; and at most
// reviewsInFlight reviews at once, further ones refused at once rather than queued.
func reviewClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.UserAgent = userAgent + "-reviews"
	c.QPS, c.Burst = reviewsQPS, reviewsBurst
	slots := make(chan struct{}, reviewsInFlight)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return boundedRoundTripper{rt: rt, slots: slots} })
	return kubernetes.NewForConfig(c)
}

// boundedRoundTripper sends at most cap(slots) requests at once, and fails the others at once.
type boundedRoundTripper struct {
	rt    http.RoundTripper
	slots chan struct{}
}

func (b boundedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case b.slots <- struct{}{}:
		defer func() { <-b.slots }()
		return b.rt.RoundTrip(req)
	default:
		return nil, errReviewsBusy
	}
}
