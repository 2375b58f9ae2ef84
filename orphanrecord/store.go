// Package orphanrecord keeps, in one ConfigMap, the owners whose orphan finalizer cascade
// removed recently, so that a cascade process that did not see them being deleted (a new
// leader after a failover, or the same replica restarted) still knows they were deleted with
// the orphan policy.
//
// # Why
//
// Orphaning removes the owner's reference from every dependent the graph knows of, then the
// orphan finalizer; the owner is then gone. A dependent that gained its reference just before
// the owner's deletion may reach the graph only later (the watch latency of its own resource).
// The process that orphaned the owner remembers it (graph: orphaned tombstones and the FIFO of
// retained orphans) and removes that late reference instead of deleting the dependent. A
// process that starts after the owner is gone lists the dependent with a reference to an owner
// that no longer exists: without a record it would collect it (the in-tree collector does, and
// the chaos suite caught cascade doing it across a leader failover).
//
// # How
//
// Before the finalizer is removed, the owner is written to the ConfigMap (Record; one JSON
// merge patch adds one key per owner, so concurrent writers never conflict; owners recorded
// while a write is in flight share the next one). A failed write fails the orphaning, which is
// retried: the finalizer stays until the record is in. A leader loads the records before its
// workers start (Load) and hands them to its graph (graph.EventOrphanRecorded). Entries are
// pruned (Run) once they are older than the TTL and this process has led with a synced graph
// for at least the TTL: by then the graph has listed every dependent that referenced them and
// removed those references.
//
// Bad input loses nothing: a malformed entry is logged and skipped (it only withholds
// protection, it never causes a delete); a full ConfigMap (MaxEntries) fails the write, so
// owners stay Terminating with their finalizer until old entries are pruned, and say why.
package orphanrecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/graph"
)

const (
	// DefaultName is the ConfigMap's default name (in cascade's own namespace).
	DefaultName = "cascade-orphaned-owners"
	// DefaultTTL is how long an entry is kept at least (see Run).
	DefaultTTL = 10 * time.Minute
	// DefaultMaxEntries bounds the entries: each takes about 200 bytes of the ConfigMap's 1 MiB.
	DefaultMaxEntries = 4000
	// writeTimeout bounds one write.
	writeTimeout = 30 * time.Second
)

// ErrFull is returned by Record when the ConfigMap holds MaxEntries entries.
var ErrFull = errors.New("the orphan record is full; waiting for entries older than the TTL to be pruned")

// Options configure a Store. Zero values mean the defaults.
type Options struct {
	// ConfigMaps is the client of the ConfigMap's namespace. Required.
	ConfigMaps corev1client.ConfigMapInterface
	// Name of the ConfigMap.
	Name string
	// TTL: an entry is pruned once older than this, by a leader synced for at least as long.
	TTL time.Duration
	// MaxEntries bounds the number of entries.
	MaxEntries int
	// Metrics, when set, are updated.
	Metrics *Metrics
	// Clock is injected for tests.
	Clock clock.Clock
}

// Entry is one recorded owner, the value of its UID's key.
type Entry struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	Recorded   time.Time `json:"recorded"`
}

// Store reads and writes the record. Safe for concurrent use.
type Store struct {
	opts Options

	mu       sync.Mutex
	pending  map[types.UID]Entry // waiting for the next write; guarded by mu
	waiters  []chan error        // the Record calls of pending; guarded by mu
	flushing bool                // a goroutine is writing; guarded by mu
	entries  int                 // entries after the last read or write, -1 unknown; guarded by mu
}

// New builds a store.
func New(opts Options) *Store {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Store{opts: opts, pending: map[types.UID]Entry{}, entries: -1}
}

// validKey is what a ConfigMap key may be. Server-made UIDs (UUIDs) always are.
var validKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Record writes owner to the ConfigMap and returns once it is there (or the write failed, or ctx
// ended). Call it before removing the owner's orphan finalizer, and keep the finalizer when it
// fails.
func (s *Store) Record(ctx context.Context, owner graph.Ref) error {
	if !validKey.MatchString(string(owner.UID)) || len(owner.UID) > 253 {
		// Not a UID the API server makes: no owner of cascade's has it.
		return fmt.Errorf("owner UID %q cannot be a ConfigMap key", owner.UID)
	}
	done := make(chan error, 1)
	s.mu.Lock()
	s.pending[owner.UID] = Entry{APIVersion: owner.APIVersion, Kind: owner.Kind, Namespace: owner.Namespace, Name: owner.Name, Recorded: s.opts.Clock.Now().UTC()}
	s.waiters = append(s.waiters, done)
	if !s.flushing {
		s.flushing = true
		go s.flush(klog.FromContext(ctx))
	}
	s.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush writes what is pending, again and again, until nothing is.
func (s *Store) flush(logger klog.Logger) {
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.flushing = false
			s.mu.Unlock()
			return
		}
		batch, waiters := s.pending, s.waiters
		s.pending, s.waiters = map[types.UID]Entry{}, nil
		full := s.entries >= 0 && s.entries+len(batch) > s.opts.MaxEntries
		s.mu.Unlock()

		var err error
		if full {
			err = ErrFull
		} else {
			ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), writeTimeout)
			err = s.write(ctx, batch)
			cancel()
		}
		s.opts.Metrics.written(len(batch), err)
		if err != nil {
			logger.Error(err, "Cannot record orphaned owners; their orphan finalizers stay until it works", "configMap", s.opts.Name, "owners", len(batch))
		}
		for _, w := range waiters {
			w <- err
		}
	}
}

// write adds batch to the ConfigMap with one JSON merge patch, creating the ConfigMap if needed.
func (s *Store) write(ctx context.Context, batch map[types.UID]Entry) error {
	data := make(map[string]string, len(batch))
	for uid, e := range batch {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		data[string(uid)] = string(b)
	}
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	for range 3 {
		cm, err := s.opts.ConfigMaps.Patch(ctx, s.opts.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "cascade"})
		if err == nil {
			s.seen(len(cm.Data))
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("patch ConfigMap %s: %w", s.opts.Name, err)
		}
		cm, err = s.opts.ConfigMaps.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: s.opts.Name, Labels: map[string]string{"app.kubernetes.io/managed-by": "cascade"}},
			Data:       data,
		}, metav1.CreateOptions{FieldManager: "cascade"})
		if err == nil {
			s.seen(len(cm.Data))
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ConfigMap %s: %w", s.opts.Name, err)
		}
		// Created meanwhile: patch it.
	}
	return fmt.Errorf("ConfigMap %s: created and deleted by someone else meanwhile", s.opts.Name)
}

func (s *Store) seen(entries int) {
	s.mu.Lock()
	s.entries = entries
	s.mu.Unlock()
	s.opts.Metrics.entries(entries)
}

// Load returns every owner the ConfigMap records (none when it does not exist). Malformed
// entries are logged and skipped.
func (s *Store) Load(ctx context.Context) ([]graph.Ref, error) {
	cm, err := s.opts.ConfigMaps.Get(ctx, s.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.seen(0)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get ConfigMap %s: %w", s.opts.Name, err)
	}
	s.seen(len(cm.Data))
	logger := klog.FromContext(ctx)
	refs := make([]graph.Ref, 0, len(cm.Data))
	for uid, v := range cm.Data {
		e, err := parse(v)
		if err != nil {
			logger.Error(err, "Skipping a malformed entry of the orphan record", "configMap", s.opts.Name, "key", uid)
			s.opts.Metrics.malformed()
			continue
		}
		refs = append(refs, graph.Ref{APIVersion: e.APIVersion, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name, UID: types.UID(uid)})
	}
	return refs, nil
}

func parse(v string) (Entry, error) {
	var e Entry
	if err := json.Unmarshal([]byte(v), &e); err != nil {
		return e, err
	}
	if e.APIVersion == "" || e.Kind == "" || e.Name == "" || e.Recorded.IsZero() {
		return e, errors.New("apiVersion, kind, name and recorded are required")
	}
	return e, nil
}

// Run prunes entries until ctx ends: every TTL/2 (at least every 10 s), once synced has been
// true for at least the TTL, entries recorded more than the TTL ago are removed. Run only on the
// leader, after Load.
func (s *Store) Run(ctx context.Context, synced func() bool) {
	logger := klog.FromContext(ctx)
	period := max(s.opts.TTL/2, 10*time.Second)
	var since time.Time // when synced was first seen true
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(period):
		}
		if since.IsZero() {
			if synced() {
				since = s.opts.Clock.Now()
			}
			continue
		}
		if s.opts.Clock.Since(since) < s.opts.TTL {
			continue
		}
		if n, err := s.prune(ctx); err != nil {
			logger.Error(err, "Cannot prune the orphan record; retrying", "configMap", s.opts.Name)
		} else if n > 0 {
			logger.V(2).Info("Pruned the orphan record", "configMap", s.opts.Name, "removed", n)
		}
	}
}

// prune removes the entries recorded more than the TTL ago, and malformed ones, and returns how
// many it removed.
func (s *Store) prune(ctx context.Context) (int, error) {
	cm, err := s.opts.ConfigMaps.Get(ctx, s.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.seen(0)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	old := map[string]any{}
	cutoff := s.opts.Clock.Now().Add(-s.opts.TTL)
	for uid, v := range cm.Data {
		if e, err := parse(v); err != nil || e.Recorded.Before(cutoff) {
			old[uid] = nil // JSON merge patch: remove the key
		}
	}
	if len(old) == 0 {
		s.seen(len(cm.Data))
		return 0, nil
	}
	patch, err := json.Marshal(map[string]any{"data": old})
	if err != nil {
		return 0, err
	}
	// The resourceVersion precondition is not needed: entries are only added under other
	// keys, and a key removed here was already older than the TTL.
	cm, err = s.opts.ConfigMaps.Patch(ctx, s.opts.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "cascade"})
	if err != nil {
		return 0, err
	}
	s.seen(len(cm.Data))
	return len(old), nil
}
