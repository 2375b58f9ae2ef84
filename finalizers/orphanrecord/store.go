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
// while a write is in flight share the next one). A leader loads the records before its
// workers start (Load) and hands them to its graph (graph.EventOrphanRecorded). Entries are
// pruned (Run) once they are older than the TTL and this process has led with a synced graph
// for at least the TTL: by then the graph has listed every dependent that referenced them and
// removed those references. A prune is a JSON merge patch that carries the resourceVersion it
// read, so it removes exactly the entries it judged old (a key written again meanwhile makes
// it conflict, read again and decide again).
//
// # What is recorded
//
// Only owners whose dependents may need it (package finalizers decides): a dependent of the
// owner was seen while orphaning it, or the owner was deleted less than the TTL after its
// creation (its first dependent may be in flight), or its creation time is unknown. Residual
// risk: an older owner with no dependent seen that gains one in the moment before its orphan
// deletion (an adoption, a reference added to an old object), followed by a failover within
// that dependent's watch latency after the finalizer goes: the new leader collects it, as
// without a record (and as the in-tree collector does).
//
// # Bounds: the record never stalls orphan deletion
//
// kube-apiserver refuses a ConfigMap whose data (the sum of len(key)+len(value)) exceeds
// 1 MiB, and an entry takes from about 115 bytes (short names) to about 460 (253-character
// names). The store tracks that sum from the ConfigMap as it last read or wrote it, and before
// each write adds the batch's own encoded size: what would pass Options.MaxBytes (default
// DefaultMaxBytes, 768 KiB) is not written and its Record fails with ErrFull at once, without
// a request. The caller (package finalizers) then removes the finalizer anyway and says that
// protection across a failover is reduced for that owner (a Warning Event, a metric, a log
// line); it does the same after a write has kept failing for a bounded time. So a full or
// broken record weakens the protection of late dependents, never holds a deletion: owners
// finish as they would without a record. The margin below 1 MiB is for what this process does
// not account for: another writer's entries between its reads (two leaders overlap briefly at a
// failover), and the stored object itself, whose managedFields name every key again (about 70
// bytes an entry, measured: 1,816 entries of 253-character names, 786,106 bytes of data, were
// 913,718 bytes as JSON). At 1 MiB of data the ~9,000 shortest entries would take the object
// past etcd's 1.5 MiB request limit; at 768 KiB, ~7,000 of them stay under 1.3 MB. The same
// bound keeps the entries (at most ~7,000) below what a graph remembers
// (graph.DefaultRetainedOrphans), so every loaded owner is kept. Each write rewrites the
// whole object in etcd, so a smaller object is also a cheaper write.
//
// Bad input loses nothing: a malformed entry is logged and skipped (it only withholds
// protection, it never causes a delete).
package orphanrecord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"regexp"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
)

const (
	// DefaultName is the ConfigMap's default name (in cascade's own namespace).
	DefaultName = "cascade-orphaned-owners"
	// DefaultTTL is how long an entry is kept at least (see Run).
	DefaultTTL = 10 * time.Minute
	// LimitBytes is what kube-apiserver allows in a ConfigMap's data: the sum of len(key) +
	// len(value) over data and binaryData (core.MaxSecretSize).
	LimitBytes = 1 << 20
	// DefaultMaxBytes bounds the record's data, counted as LimitBytes is: three quarters of
	// the limit (the package doc says what the margin is for).
	DefaultMaxBytes = 768 << 10
	// writeTimeout bounds one write (with the read that precedes it when the size is unknown).
	writeTimeout = 30 * time.Second
	// pruneAttempts bounds the conflicts one prune retries; the next tick tries again.
	pruneAttempts = 5
)

// ErrFull is returned by Record when the owner's entry does not fit under MaxBytes (or the API
// server refused the write as too large).
var ErrFull = errors.New("the orphan record is full until entries older than the TTL are pruned")

// Options configure a Store. Zero values mean the defaults.
type Options struct {
	// ConfigMaps is the client of the ConfigMap's namespace (internal/client: the API edge, which
	// decides dry-run). Required.
	ConfigMaps client.ConfigMaps
	// Name of the ConfigMap.
	Name string
	// TTL: an entry is pruned once older than this, by a leader synced for at least as long.
	TTL time.Duration
	// MaxBytes bounds the ConfigMap's data, the sum of len(key)+len(value) as the API server
	// counts its LimitBytes: an entry that would pass it is not written (ErrFull). At most
	// LimitBytes.
	MaxBytes int
	// Synced reports whether the collector's graph has synced; Run prunes once it has been for
	// the TTL. Required for Run.
	Synced func() bool
	// Metrics are updated; nil: a set registered nowhere.
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
	pending  map[types.UID]*pending // waiting for the next write; guarded by mu
	flushing bool                   // a goroutine is writing; guarded by mu
	// bytes is the ConfigMap's data size (len(key)+len(value), summed) after the last read or
	// write, -1 unknown (not read yet, or a write failed in a way that leaves it unknown).
	// Guarded by mu.
	bytes int
}

// pending is one owner waiting to be written: its encoded entry and the Record calls waiting
// for it.
type pending struct {
	value   string
	waiters []chan error
}

// New builds a store.
func New(opts Options) *Store {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxBytes <= 0 || opts.MaxBytes > LimitBytes {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	return &Store{opts: opts, pending: map[types.UID]*pending{}, bytes: -1}
}

// validKey is what a ConfigMap key may be. Server-made UIDs (UUIDs) always are.
var validKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Record writes owner to the ConfigMap and returns once it is there (or the write failed, or ctx
// ended). Call it before removing the owner's orphan finalizer. It fails with ErrFull, at once
// and without a request, when the owner's entry does not fit under MaxBytes.
func (s *Store) Record(ctx context.Context, owner graph.Ref) error {
	if !validKey.MatchString(string(owner.UID)) || len(owner.UID) > 253 {
		// Not a UID the API server makes: no owner of cascade's has it.
		return fmt.Errorf("owner UID %q cannot be a ConfigMap key", owner.UID)
	}
	value, err := json.Marshal(Entry{APIVersion: owner.APIVersion, Kind: owner.Kind, Namespace: owner.Namespace, Name: owner.Name, Recorded: s.opts.Clock.Now().UTC()})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	s.mu.Lock()
	p := s.pending[owner.UID]
	if p == nil {
		p = &pending{}
		s.pending[owner.UID] = p
	}
	p.value = string(value)
	p.waiters = append(p.waiters, done)
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
		batch := s.pending
		s.pending = map[types.UID]*pending{}
		s.mu.Unlock()

		ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), writeTimeout)
		full, written, err := s.writeBatch(ctx, batch)
		cancel()
		s.opts.Metrics.written(written, err)
		s.opts.Metrics.written(len(full), ErrFull)
		switch {
		case err != nil:
			logger.Error(err, "Cannot record orphaned owners", "configMap", s.opts.Name, "owners", written)
		case len(full) > 0:
			logger.V(2).Info("The orphan record is full; owners not recorded", "configMap", s.opts.Name, "owners", len(full), "maxBytes", s.opts.MaxBytes)
		}
		for uid, p := range batch {
			res := err
			if _, ok := full[uid]; ok {
				res = ErrFull
			}
			for _, w := range p.waiters {
				w <- res
			}
		}
	}
}

// writeBatch writes, in one request, the entries of batch that fit under MaxBytes given the
// ConfigMap's size (read first when unknown). It returns the owners that did not fit, how
// many were sent, and the error of the read or write (for every owner not in full).
func (s *Store) writeBatch(ctx context.Context, batch map[types.UID]*pending) (full map[types.UID]struct{}, sent int, err error) {
	size, err := s.size(ctx)
	if err != nil {
		return nil, len(batch), err
	}
	uids := make([]types.UID, 0, len(batch))
	for uid := range batch {
		uids = append(uids, uid)
	}
	slices.Sort(uids) // which entries fit does not depend on map order
	data := make(map[string]string, len(batch))
	full = map[types.UID]struct{}{}
	for _, uid := range uids {
		v := batch[uid].value
		if size+len(uid)+len(v) > s.opts.MaxBytes {
			full[uid] = struct{}{}
			continue
		}
		size += len(uid) + len(v)
		data[string(uid)] = v
	}
	if len(data) == 0 {
		return full, 0, nil
	}
	return full, len(data), s.write(ctx, data)
}

// size returns the ConfigMap's data size as last read or written, reading it if unknown.
func (s *Store) size(ctx context.Context) (int, error) {
	s.mu.Lock()
	n := s.bytes
	s.mu.Unlock()
	if n >= 0 {
		return n, nil
	}
	cm, err := s.opts.ConfigMaps.Get(ctx, s.opts.Name)
	if apierrors.IsNotFound(err) {
		return s.seen(&corev1.ConfigMap{}), nil
	}
	if err != nil {
		return 0, fmt.Errorf("get ConfigMap %s: %w", s.opts.Name, err)
	}
	return s.seen(cm), nil
}

// write adds data to the ConfigMap with one JSON merge patch, creating the ConfigMap if needed.
// A refusal for size (422, too long) is ErrFull. After a failure the size is unknown, so the
// next write reads it first.
func (s *Store) write(ctx context.Context, data map[string]string) error {
	err := s.patchOrCreate(ctx, data)
	if err == nil {
		return nil
	}
	s.mu.Lock()
	s.bytes = -1
	s.mu.Unlock()
	if tooLong(err) {
		return fmt.Errorf("%w: %w", ErrFull, err)
	}
	return err
}

func (s *Store) patchOrCreate(ctx context.Context, data map[string]string) error {
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	for range 3 {
		cm, err := s.opts.ConfigMaps.MergePatch(ctx, s.opts.Name, patch)
		if err == nil {
			s.seen(cm)
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("patch ConfigMap %s: %w", s.opts.Name, err)
		}
		cm, err = s.opts.ConfigMaps.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: s.opts.Name, Labels: map[string]string{"app.kubernetes.io/managed-by": "cascade"}},
			Data:       data,
		})
		if err == nil {
			s.seen(cm)
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ConfigMap %s: %w", s.opts.Name, err)
		}
		// Created meanwhile: patch it.
	}
	return fmt.Errorf("ConfigMap %s: created and deleted by someone else meanwhile", s.opts.Name)
}

// tooLong reports whether err is the API server refusing a ConfigMap for its size.
func tooLong(err error) bool {
	if apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeTooLong {
			return true
		}
	}
	return false
}

// Bytes is the size of a ConfigMap's data as the API server counts it against LimitBytes.
func Bytes(cm *corev1.ConfigMap) int {
	n := 0
	for k, v := range cm.Data {
		n += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		n += len(k) + len(v)
	}
	return n
}

// seen notes the ConfigMap as just read or written and returns its size.
func (s *Store) seen(cm *corev1.ConfigMap) int {
	n := Bytes(cm)
	s.mu.Lock()
	s.bytes = n
	s.mu.Unlock()
	s.opts.Metrics.size(len(cm.Data), n)
	return n
}

// Load returns every owner the ConfigMap records (none when it does not exist). Malformed
// entries are logged and skipped.
func (s *Store) Load(ctx context.Context) ([]graph.Ref, error) {
	cm, err := s.opts.ConfigMaps.Get(ctx, s.opts.Name)
	if apierrors.IsNotFound(err) {
		s.seen(&corev1.ConfigMap{})
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get ConfigMap %s: %w", s.opts.Name, err)
	}
	s.seen(cm)
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

// Run prunes entries until ctx ends (then it returns nil): every TTL/2 (at least every 10 s),
// once Options.Synced has been true for at least the TTL, entries recorded more than the TTL ago
// are removed. Run only on the leader, after Load.
func (s *Store) Run(ctx context.Context) error {
	synced := s.opts.Synced
	logger := klog.FromContext(ctx)
	period := max(s.opts.TTL/2, 10*time.Second)
	var since time.Time // when synced was first seen true
	for {
		select {
		case <-ctx.Done():
			return nil
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
// many it removed. Each attempt removes what the ConfigMap it read holds, at that read's
// resourceVersion; a conflict (the ConfigMap changed meanwhile) reads it again and decides
// again, up to pruneAttempts times.
func (s *Store) prune(ctx context.Context) (int, error) {
	var err error
	for range pruneAttempts {
		var n int
		n, err = s.pruneOnce(ctx)
		if !apierrors.IsConflict(err) {
			return n, err
		}
	}
	return 0, fmt.Errorf("%d conflicts in a row: %w", pruneAttempts, err)
}

func (s *Store) pruneOnce(ctx context.Context) (int, error) {
	cm, err := s.opts.ConfigMaps.Get(ctx, s.opts.Name)
	if apierrors.IsNotFound(err) {
		s.seen(&corev1.ConfigMap{})
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s.seen(cm)
	old := map[string]any{}
	cutoff := s.opts.Clock.Now().Add(-s.opts.TTL)
	for uid, v := range cm.Data {
		if e, err := parse(v); err != nil || e.Recorded.Before(cutoff) {
			old[uid] = nil // JSON merge patch: remove the key
		}
	}
	if len(old) == 0 {
		return 0, nil
	}
	// The resourceVersion is a precondition: only what was judged old on this very read goes
	// (an owner recorded again since, with a new time, keeps its entry).
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": cm.ResourceVersion},
		"data":     old,
	})
	if err != nil {
		return 0, err
	}
	cm, err = s.opts.ConfigMaps.MergePatch(ctx, s.opts.Name, patch)
	if err != nil {
		return 0, err
	}
	s.seen(cm)
	return len(old), nil
}
