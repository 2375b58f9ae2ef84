package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// recordingSink is an EventSink that keeps what was written, failing the first failures calls.
type recordingSink struct {
	mu       sync.Mutex
	creates  []*corev1.Event
	patches  []*corev1.Event
	failures []error
	calls    int
}

func (s *recordingSink) fail() error {
	s.calls++
	if len(s.failures) > 0 {
		err := s.failures[0]
		s.failures = s.failures[1:]
		return err
	}
	return nil
}

func (s *recordingSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail(); err != nil {
		return nil, err
	}
	out := ev.DeepCopy()
	out.ResourceVersion = "1"
	s.creates = append(s.creates, out)
	return out, nil
}

func (s *recordingSink) Update(ev *corev1.Event) (*corev1.Event, error) {
	return nil, errors.New("not used")
}

func (s *recordingSink) Patch(ev *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail(); err != nil {
		return nil, err
	}
	out := ev.DeepCopy()
	s.patches = append(s.patches, out)
	return out, nil
}

func (s *recordingSink) counts() (creates, patches, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.creates), len(s.patches), s.calls
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func namespacedCM() *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dep", UID: "u-dep"}}
}

// TestRecorderWritesWhatClientGoWould: an Event carries the fields client-go's recorder gives
// it (reference, source, reporting controller, timestamps, count 1, annotations; a
// cluster-scoped object's Event in default); the same Event again is aggregated into a patch of
// the first (client-go's correlator).
func TestRecorderWritesWhatClientGoWould(t *testing.T) {
	sink := &recordingSink{}
	r := NewRecorder(context.Background(), scheme.Scheme, corev1.EventSource{Component: "cascade"}, sink)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()

	r.AnnotatedEventf(namespacedCM(), map[string]string{"a": "b"}, corev1.EventTypeWarning, "OwnerRefInvalidNamespace", "owner %s", "x")
	eventually(t, "the Event written", func() bool { c, _, _ := sink.counts(); return c == 1 })
	ev := sink.creates[0]
	if ev.Namespace != "ns" || ev.InvolvedObject.Kind != "ConfigMap" || ev.InvolvedObject.UID != "u-dep" || ev.Type != corev1.EventTypeWarning ||
		ev.Reason != "OwnerRefInvalidNamespace" || ev.Message != "owner x" || ev.Count != 1 || ev.Source.Component != "cascade" ||
		ev.ReportingController != "cascade" || ev.Annotations["a"] != "b" || ev.FirstTimestamp.IsZero() || ev.LastTimestamp != ev.FirstTimestamp {
		t.Errorf("Event %+v", ev)
	}

	r.AnnotatedEventf(namespacedCM(), map[string]string{"a": "b"}, corev1.EventTypeWarning, "OwnerRefInvalidNamespace", "owner %s", "x")
	eventually(t, "the repeated Event aggregated", func() bool { _, p, _ := sink.counts(); return p == 1 })
	if p := sink.patches[0]; p.Name != ev.Name || p.Count != 2 {
		t.Errorf("repeated Event: patch of %s to count %d, want %s to count 2", p.Name, p.Count, ev.Name)
	}

	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "gone", UID: "u-ns"}}
	r.Event(ns, corev1.EventTypeNormal, "Stamped", "x")
	r.Event(ns, "Bogus", "Stamped", "not a type: dropped")
	eventually(t, "the cluster-scoped object's Event", func() bool { c, _, _ := sink.counts(); return c == 2 })
	if got := sink.creates[1]; got.Namespace != metav1.NamespaceDefault || got.InvolvedObject.Name != "gone" {
		t.Errorf("a Namespace's Event in %q about %q, want default about gone", got.Namespace, got.InvolvedObject.Name)
	}
	time.Sleep(50 * time.Millisecond)
	if c, _, _ := sink.counts(); c != 2 {
		t.Errorf("%d Events written, want 2 (an Event of no valid type is dropped)", c)
	}
}

// TestRecorderRetries: a transport error is retried until the Event is written; a refusal by
// the server is not retried.
func TestRecorderRetries(t *testing.T) {
	sink := &recordingSink{failures: []error{errors.New("connection refused"), errors.New("connection reset")}}
	r := NewRecorder(context.Background(), scheme.Scheme, corev1.EventSource{Component: "cascade"}, sink)
	r.retryEvery = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	r.Event(namespacedCM(), corev1.EventTypeNormal, "A", "a")
	eventually(t, "the Event written after two transport errors", func() bool { c, _, _ := sink.counts(); return c == 1 })
	if _, _, calls := sink.counts(); calls != 3 {
		t.Errorf("%d attempts, want 3", calls)
	}

	sink.mu.Lock()
	sink.failures = []error{apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no"))}
	sink.mu.Unlock()
	r.Event(namespacedCM(), corev1.EventTypeNormal, "B", "b")
	r.Event(namespacedCM(), corev1.EventTypeNormal, "C", "c")
	eventually(t, "the next Event written", func() bool { c, _, _ := sink.counts(); return c == 2 })
	if _, _, calls := sink.counts(); calls != 5 || sink.creates[1].Reason != "C" {
		t.Errorf("%d attempts (want 5: a refused Event is not retried), last written %s (want C)", calls, sink.creates[1].Reason)
	}
}

// TestRecorderNeverBlocks: with nobody writing (an API server that does not answer), recording
// returns at once; what does not fit the queue is dropped.
func TestRecorderNeverBlocks(t *testing.T) {
	r := NewRecorder(context.Background(), scheme.Scheme, corev1.EventSource{Component: "cascade"}, &recordingSink{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 * RecorderQueue {
			r.Event(namespacedCM(), corev1.EventTypeNormal, "A", "a")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("recording blocked")
	}
	if n := len(r.queue); n != RecorderQueue {
		t.Errorf("%d Events queued, want %d", n, RecorderQueue)
	}
}
