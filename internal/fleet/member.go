package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/leader"
)

// runningMember is one member unit and what runs it.
type runningMember struct {
	name   string
	source Source
	hash   [32]byte
	cancel context.CancelFunc
	done   chan struct{}
	// leave is closed when the member left the fleet: it removes what cascade wrote in it,
	// then stops.
	leave chan struct{}
	// gate opens the member's writers: the process's, or its shard's. writable, with shards,
	// is its shard's write guard (shard.Manager.Writable); nil without.
	gate     *leader.Gate
	writable func() error

	mu     sync.Mutex
	host   string  // its API server, host:port, once its configuration is made
	unit   Unit    // nil until built
	dialer *dialer // its connections, while it runs
	reason string  // why it is not running ("" when it runs)
}

// hostOf is m's API server (host:port), "" before its configuration is made.
func (m *runningMember) hostOf() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.host
}

// left reports whether the member left the fleet.
func (m *runningMember) left() bool {
	select {
	case <-m.leave:
		return true
	default:
		return false
	}
}

// runMember builds and runs member m until its context ends or it leaves the fleet, building
// it again with backoff after a failure (its API server down, a part that gave up): a failing
// member is isolated.
func (f *Fleet) runMember(ctx context.Context, m *runningMember) {
	logger := klog.FromContext(ctx)
	backoff := time.Second
	warned := false
	for ctx.Err() == nil {
		started := time.Now()
		err := f.runMemberOnce(ctx, m)
		if ctx.Err() != nil || m.left() {
			return
		}
		if time.Since(started) > time.Minute {
			backoff, warned = time.Second, false // it ran for a while: a new run of failures
		}
		if err == nil {
			err = errors.New("its parts ended") // a unit returns only when told to, or failing
		}
		err = SafeError(err)
		m.setDown(err)
		logger.Error(err, "Member failed; retrying", "retryIn", backoff)
		logger.Info("Fleet", "summary", SummarizeMembers(f.States()))
		if !warned && m.source.Object != nil && f.opts.Events != nil {
			f.opts.Events.Eventf(m.source.Object, corev1.EventTypeWarning, "MemberUnavailable", "cascade cannot collect in member %s: %v", m.name, err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return
		case <-m.leave:
			// It left while down: nothing of it can be reached to clean.
			f.cleanups.WithLabelValues(cleanupUnreachable).Inc()
			logger.Info("Member left the fleet while down: what cascade wrote in it is left there; once it answers, run cascade uninstall --fleet-member --kubeconfig with its kubeconfig (docs/fleet.md)", "reason", err.Error())
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// config is member m's client configuration: its kubeconfig's allowed fields only
// (RESTConfig), its user agent, budget, write guard, the bounds of its requests
// (boundRequests) and dialer.
func (f *Fleet) config(m *runningMember, d *dialer) (*rest.Config, error) {
	if m.source.Err != nil {
		return nil, fmt.Errorf("kubeconfig from %s: %w", m.source.Origin, m.source.Err)
	}
	cfg, err := RESTConfig(m.source.Kubeconfig, f.opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig from %s: %w", m.source.Origin, err)
	}
	cfg.UserAgent = f.opts.UserAgent + "/" + m.name
	if f.identity != "" {
		cfg.UserAgent += " (replica " + f.identity + ")" // the members' audit logs tell the replicas apart
	}
	if m.writable != nil {
		writable := m.writable
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return client.GuardWrites(rt, writable) })
	}
	timeout := f.opts.RequestTimeout
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return boundRequests(rt, timeout, MaxResponseBytes) })
	// An item that waits, on its API server or its budget, holds no slot of the fleet's pool
	// meanwhile (LendAfter).
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return lendWhileWaiting(rt, LendAfter) })
	cfg.QPS, cfg.Burst = f.opts.QPS, f.opts.Burst
	if cfg.QPS > 0 {
		burst := cfg.Burst
		if burst < 1 {
			burst = rest.DefaultBurst
		}
		cfg.RateLimiter = lendingLimiter{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, burst), after: LendAfter}
	}
	cfg.Dial = d.DialContext
	return cfg, nil
}

// runMemberOnce builds member m from its kubeconfig and runs it until ctx ends, a part fails,
// or it leaves the fleet (then it cleans the member first: leaveMember).
func (f *Fleet) runMemberOnce(ctx context.Context, m *runningMember) error {
	d := newDialer()
	defer d.Close()
	// Stopping never waits on the member's API server: once ctx ends, its connections close,
	// so that a write in flight without the member's context (client-go's Event sink uses
	// none) fails at once instead of waiting for the request deadline.
	defer context.AfterFunc(ctx, d.Close)()
	cfg, err := f.config(m, d)
	if err != nil {
		return err
	}
	host := ""
	if u, err := url.Parse(cfg.Host); err == nil {
		host = u.Host
	}
	m.mu.Lock()
	m.dialer, m.host = d, host
	m.mu.Unlock()
	u, err := f.opts.Build(ctx, Member{Name: m.name, Config: cfg, Gate: m.gate, Slots: f.pool.Share(), Mappers: f.mappers})
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.unit, m.reason = u, ""
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.unit = nil
		m.mu.Unlock()
	}()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- u.Run(runCtx) }()
	tick := time.NewTicker(f.opts.LivenessPeriod)
	defer tick.Stop()
	for {
		select {
		case err := <-errc:
			return err
		case <-tick.C:
			err := u.Check()
			if err == nil {
				continue
			}
			// Its own liveness: this member alone is stopped and started again.
			f.restarts.Inc()
			stop()
			d.Close()
			if rerr := <-errc; rerr != nil {
				klog.FromContext(ctx).V(2).Info("Member's parts ended with an error as it was stopped", "err", SafeError(rerr))
			}
			return fmt.Errorf("stopped to be started again: %w", err)
		case <-m.leave:
			f.leaveMember(ctx, m, u)
			stop()
			d.Close() // nothing of it waits on its API server any more
			if err := <-errc; err != nil {
				klog.FromContext(ctx).V(2).Info("Member's parts ended with an error as it left the fleet", "err", SafeError(err))
			}
			return nil
		}
	}
}

// leaveMember removes what cascade wrote in member m, which left the fleet, while its
// collector still runs (Unit.Leave), within Options.LeaveTimeout. A replica whose gate is
// closed (a standby) removes nothing: the replica that runs the member's writers does.
func (f *Fleet) leaveMember(ctx context.Context, m *runningMember, u Unit) {
	logger := klog.FromContext(ctx)
	if !m.gate.IsOpen() {
		logger.Info("Member left the fleet; this replica does not run its writers: the one that does removes what cascade wrote in it")
		return
	}
	lctx, cancel := context.WithTimeout(ctx, f.opts.LeaveTimeout)
	defer cancel()
	started := time.Now()
	if err := u.Leave(lctx); err != nil {
		f.cleanups.WithLabelValues(cleanupIncomplete).Inc()
		logger.Error(SafeError(err), "Member left the fleet: not everything cascade wrote in it was removed; run cascade uninstall --fleet-member --kubeconfig with its kubeconfig (docs/fleet.md)", "after", time.Since(started).Round(time.Millisecond))
		return
	}
	f.cleanups.WithLabelValues(cleanupClean).Inc()
	logger.Info("Member left the fleet: what cascade wrote in it is removed", "after", time.Since(started).Round(time.Millisecond))
}

// setDown records why m is not running.
func (m *runningMember) setDown(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reason = err.Error()
}

// state is m's state now.
func (m *runningMember) state() MemberState {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.reason != "":
		return MemberState{Name: m.name, Reason: m.reason}
	case m.unit == nil || m.unit.Controller() == nil:
		return MemberState{Name: m.name, Reason: "starting"}
	}
	ctrl := m.unit.Controller()
	if !ctrl.Synced() {
		return MemberState{Name: m.name, Reason: "graph not synced yet"}
	}
	// A member whose API server went away fails no part (its watches retry): its resources that
	// can no longer be listed or watched say so, at no request's cost.
	var failing []gc.Unsynced
	for _, u := range ctrl.Unsynced() {
		if u.Err != "" {
			failing = append(failing, u)
		}
	}
	if len(failing) > 0 {
		return MemberState{Name: m.name, Reason: SafeText(fmt.Sprintf("%d resources cannot be listed or watched: %s: %s", len(failing), gc.GVRString(failing[0].Resource.GVR), failing[0].Err), MaxErrorText)}
	}
	return MemberState{Name: m.name, Up: true}
}
