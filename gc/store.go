package gc

import (
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cascade-gc/cascade/graph"
)

// graphWriter is what a graphStore needs of the controller: apply one event to the graph, and
// find the observed objects of one kind that a complete list did not hold.
type graphWriter interface {
	apply(ev graph.Event)
	observedExcept(apiVersion, kind string, seen *graph.UIDSet) []graph.Ref
}

// graphStore is a monitor's store (it has a reflector store's methods, which tests feed) that
// keeps nothing itself: every notification becomes a graph event. A relist (Replace) also deletes from the graph the objects of this resource the
// list no longer holds — their delete events were missed, and absence in a complete list is
// as authoritative as a watched delete.
type graphStore struct {
	res    Resource
	graph  graphWriter
	synced atomic.Bool // the first complete list is in the graph
	// failure is the last list or watch error since the last complete list ("" when none):
	// while it is set, the graph's view of this resource may be stale.
	failure atomic.Pointer[string]
	// staleSince is when the resource's last watch ended (Unix nanoseconds), until a watch is
	// open again after it: 0 while one is. A resource that synced once and has it set is
	// catching up (relisting after an expired watch, reconnecting, or failing): events written
	// meanwhile reach the graph only later (monitors.catchingUp).
	staleSince atomic.Int64
	// notServed: the last list or watch failed with NotFound (the resource is no longer served,
	// its CRD or APIService gone): nothing can be written there, so it is not catching up.
	// The next complete list clears it.
	notServed atomic.Bool
	// streamed is what the lister (streamLister) applied to the graph itself, one object at a
	// time, for the Replace that completes its list: that list arrives empty. Only the
	// monitor's loop touches it.
	streamed *graph.UIDSet
	// changed, when set, is called on every event once the resource has synced, and after every
	// relist (monitors.kick).
	changed func()
}

// tell calls changed, once the first list is complete.
func (s *graphStore) tell() {
	if s.changed != nil && s.synced.Load() {
		s.changed()
	}
}

// failed records a list or watch error; the next complete list clears it. It reports whether
// the error is the first since the last complete list (the monitor's loop retries a failed list
// or watch after a backoff, so the first error of a run is the one to log).
func (s *graphStore) failed(err error) bool {
	msg := err.Error()
	return s.failure.Swap(&msg) == nil
}

// watchEnded records that the resource's watch ended at now, unless an earlier end is
// already recorded; watchOpened that a watch is open again.
func (s *graphStore) watchEnded(now time.Time) { s.staleSince.CompareAndSwap(0, now.UnixNano()) }
func (s *graphStore) watchOpened()             { s.staleSince.Store(0) }

// lastFailure returns the error since the last complete list, or "".
func (s *graphStore) lastFailure() string {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return ""
}

var _ cache.ReflectorStore = (*graphStore)(nil)

func (s *graphStore) Add(obj any) error    { s.observe(obj); return nil }
func (s *graphStore) Update(obj any) error { s.observe(obj); return nil }

func (s *graphStore) Delete(obj any) error {
	if m, ok := unwrapTombstone(obj); ok {
		s.graph.apply(graph.Event{Type: graph.EventDeleted, Object: graph.Object{Ref: s.ref(m)}})
		s.tell()
	}
	return nil
}

func (s *graphStore) Replace(list []any, _ string) error {
	seen := s.streamed
	s.streamed = nil
	if seen == nil {
		seen = graph.NewUIDSet(len(list))
	}
	for _, obj := range list {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			seen.Add(m.UID)
			s.graph.apply(graph.Event{Type: graph.EventObserved, Object: toGraphObject(s.res, m)})
		}
	}
	for _, ref := range s.graph.observedExcept(s.res.GVR.GroupVersion().String(), s.res.Kind, seen) {
		s.graph.apply(graph.Event{Type: graph.EventDeleted, Object: graph.Object{Ref: ref}})
	}
	relist := s.synced.Swap(true)
	s.failure.Store(nil)
	s.notServed.Store(false)
	if relist {
		s.tell()
	}
	return nil
}

// Resync has nothing to do: the graph is level-driven by the finalizers' periodic re-check.
func (s *graphStore) Resync() error { return nil }

func (s *graphStore) observe(obj any) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		s.graph.apply(graph.Event{Type: graph.EventObserved, Object: toGraphObject(s.res, m)})
		s.tell()
	}
}

func (s *graphStore) ref(m *metav1.PartialObjectMetadata) graph.Ref {
	return graph.Ref{APIVersion: s.res.GVR.GroupVersion().String(), Kind: s.res.Kind, Namespace: m.Namespace, Name: m.Name, UID: m.UID}
}
