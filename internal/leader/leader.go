// Package leader is cascade's one leader gate: a Gate that opens once, when this replica may
// write, and the Elector that opens it on taking the leader-election Lease.
//
// Invariants:
//   - Every writer waits for the one Gate (cmd/cascade wires it): the collection and
//     verification workers, the finalizer processor, the default-propagation pass, the orphan
//     record's pruning and the Events (internal/client.HeldRecorder). A standby keeps its
//     watches and graph warm and writes nothing.
//   - The Gate never closes again: losing the Lease ends the process (Run returns
//     ErrLostLease), and its restart rejoins as a standby with a fresh graph, rather than
//     acting on a view another replica now owns.
//   - The Lease is the one write that does not go through internal/client: it is what decides
//     whether the others may be sent.
//   - The leader's status (Options.Status) rides on the Lease's own writes, as annotations: set
//     by every write that names this replica holder (taking it, each renewal), removed by the
//     one that releases it. It costs no request of its own and is never older than the last
//     renewal; a standby never writes it.
package leader

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Gate opens once, when this replica may write. The zero value is closed; it is safe for
// concurrent use.
type Gate struct {
	once sync.Once
	mu   sync.Mutex
	ch   chan struct{}
}

// Open returns a Gate that is already open: no leader election, this replica writes at once.
func Open() *Gate {
	g := &Gate{}
	g.Open()
	return g
}

func (g *Gate) done() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	return g.ch
}

// Open lets writers start; later calls do nothing.
func (g *Gate) Open() { g.once.Do(func() { close(g.done()) }) }

// Done is closed once the gate is open.
func (g *Gate) Done() <-chan struct{} { return g.done() }

// IsOpen reports whether writers may start.
func (g *Gate) IsOpen() bool {
	select {
	case <-g.done():
		return true
	default:
		return false
	}
}

// Wait blocks until the gate opens (true) or ctx ends (false).
func (g *Gate) Wait(ctx context.Context) bool {
	select {
	case <-g.done():
		return true
	case <-ctx.Done():
		return false
	}
}

// ErrLostLease is what Elector.Run returns when this replica stops leading.
var ErrLostLease = errors.New("lost the leader-election Lease; exiting so that a restart rejoins as a standby")

// Options configure an Elector.
type Options struct {
	// Leases is the client of the Lease's API group. Required.
	Leases coordinationv1.CoordinationV1Interface
	// Namespace and Name are the Lease's.
	Namespace, Name string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader election timings.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Gate is opened when this replica starts leading. Required.
	Gate *Gate
	// WatchDog, if set, reports through its Check whether this replica, while leading, still
	// renews the Lease (client-go's leader-election health check, for the liveness probe).
	WatchDog *leaderelection.HealthzAdaptor
	// Status, if set, is what this replica publishes about itself while it holds the Lease:
	// annotations put on the Lease by each of its writes that names this replica holder, and
	// removed (the keys Status returns then) by the write that releases it. It is called on
	// the leader-election goroutine at every renewal: it must be cheap and safe for
	// concurrent use.
	Status func() map[string]string
}

// Elector takes the Lease and opens the Gate while it leads.
type Elector struct {
	opts Options
	id   string
}

// New returns an Elector whose identity is the host name and a random suffix (two replicas
// on one host, or a restarted pod, never share one).
func New(opts Options) *Elector {
	return &Elector{opts: opts, id: NewIdentity()}
}

// NewIdentity is a replica's identity on a Lease: the host name and a random suffix.
func NewIdentity() string {
	host, _ := os.Hostname()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	return fmt.Sprintf("%s_%x", host, suffix)
}

// Run tries to take the Lease until ctx ends, leads while it holds it, and returns nil when
// ctx ends (the Lease released) or ErrLostLease when leadership is lost first.
func (e *Elector) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	lease := e.opts.Namespace + "/" + e.opts.Name
	lost := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.opts.Namespace, Name: e.opts.Name},
			Client:     statusLeases{LeasesGetter: e.opts.Leases, id: e.id, status: e.opts.Status},
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.id},
		},
		Name:            e.opts.Name,
		LeaseDuration:   e.opts.LeaseDuration,
		RenewDeadline:   e.opts.RenewDeadline,
		RetryPeriod:     e.opts.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        e.opts.WatchDog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				logger.Info("Leading", "lease", lease, "identity", e.id)
				e.opts.Gate.Open()
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					logger.Error(ErrLostLease, "Leadership lost", "lease", lease)
					close(lost)
				}
			},
			OnNewLeader: func(leader string) {
				if leader != e.id {
					logger.Info("Standing by", "lease", lease, "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election on Lease %s: %w", lease, err)
	}
	if e.opts.WatchDog != nil {
		e.opts.WatchDog.SetLeaderElection(le) // client-go ties them only in RunOrDie
	}
	le.Run(ctx) // returns when ctx ends or leadership is lost
	select {
	case <-lost:
		return ErrLostLease
	default:
		return nil
	}
}

// statusLeases is the Lease client of the elector: its creates and updates of the Lease carry
// the leader's status (Options.Status) when they name this replica holder, and drop it
// otherwise (the release).
type statusLeases struct {
	coordinationv1.LeasesGetter
	id     string
	status func() map[string]string
}

func (s statusLeases) Leases(namespace string) coordinationv1.LeaseInterface {
	return statusLease{LeaseInterface: s.LeasesGetter.Leases(namespace), s: s}
}

// annotated is lease (a copy) with the status set, or removed when it names another holder
// or none.
func (s statusLeases) annotated(lease *coordv1.Lease) *coordv1.Lease {
	if s.status == nil {
		return lease
	}
	status := s.status()
	lease = lease.DeepCopy()
	if h := lease.Spec.HolderIdentity; h != nil && *h == s.id {
		if lease.Annotations == nil {
			lease.Annotations = make(map[string]string, len(status))
		}
		maps.Copy(lease.Annotations, status)
		return lease
	}
	for k := range status {
		delete(lease.Annotations, k)
	}
	return lease
}

type statusLease struct {
	coordinationv1.LeaseInterface
	s statusLeases
}

func (l statusLease) Create(ctx context.Context, lease *coordv1.Lease, opts metav1.CreateOptions) (*coordv1.Lease, error) {
	return l.LeaseInterface.Create(ctx, l.s.annotated(lease), opts)
}

func (l statusLease) Update(ctx context.Context, lease *coordv1.Lease, opts metav1.UpdateOptions) (*coordv1.Lease, error) {
	return l.LeaseInterface.Update(ctx, l.s.annotated(lease), opts)
}
