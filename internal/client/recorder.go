package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Recorder is an EventRecorder for one cluster: the Events client-go's recorder and broadcaster
// would write (the same fields, aggregated and spam-filtered by client-go's EventCorrelator,
// retried on transport errors), written by one goroutine (Run) from a queue of RecorderQueue
// Events, further ones dropped rather than blocking the caller. client-go's broadcaster keeps
// three goroutines and 1,000-event buffers (about 100 KiB) per cluster: a fleet has one
// Recorder per member. Each Event is also logged at -v=3.
type Recorder struct {
	scheme     *runtime.Scheme
	source     corev1.EventSource
	sink       record.EventSink
	correlator *record.EventCorrelator
	clock      clock.Clock
	queue      chan *corev1.Event
	logger     klog.Logger
	// retryEvery is the wait between attempts at one Event (the first is randomized below it),
	// for at most recorderTries attempts.
	retryEvery time.Duration
}

const (
	// RecorderQueue is how many Events wait for the writer at most.
	RecorderQueue = 100
	// recorderTries and recorderRetry are client-go's broadcaster's: 12 attempts, 10 s apart.
	recorderTries = 12
	recorderRetry = 10 * time.Second
)

var _ record.EventRecorder = (*Recorder)(nil)

// NewRecorder returns a Recorder of Events from source, written to sink once Run runs.
func NewRecorder(ctx context.Context, scheme *runtime.Scheme, source corev1.EventSource, sink record.EventSink) *Recorder {
	return &Recorder{
		scheme:     scheme,
		source:     source,
		sink:       sink,
		correlator: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{}),
		clock:      clock.RealClock{},
		queue:      make(chan *corev1.Event, RecorderQueue),
		logger:     klog.FromContext(ctx),
		retryEvery: recorderRetry,
	}
}

func (r *Recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.record(obj, nil, eventtype, reason, message)
}

func (r *Recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.record(obj, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *Recorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.record(obj, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// record makes the Event and queues it; it never blocks.
func (r *Recorder) record(obj runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	ref, err := reference.GetReference(r.scheme, obj)
	if err != nil {
		r.logger.Error(err, "Cannot make a reference to the object; the Event is not recorded", "reason", reason, "message", message)
		return
	}
	if !util.ValidateEventType(eventtype) {
		r.logger.Error(nil, "Not an Event type; the Event is not recorded", "eventType", eventtype, "reason", reason)
		return
	}
	now := metav1.NewTime(r.clock.Now())
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ns, Annotations: annotations},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                eventtype,
		Source:              r.source,
		ReportingController: r.source.Component,
		ReportingInstance:   r.source.Host,
	}
	r.logger.V(3).Info("Event occurred", "object", klog.KRef(ref.Namespace, ref.Name), "fieldPath", ref.FieldPath,
		"kind", ref.Kind, "apiVersion", ref.APIVersion, "type", eventtype, "reason", reason, "message", message)
	select {
	case r.queue <- ev:
	default:
		r.logger.Error(nil, "Too many Events waiting to be written; this one is dropped", "object", klog.KRef(ref.Namespace, ref.Name), "reason", reason)
	}
}

// Run writes the queued Events until ctx ends.
func (r *Recorder) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-r.queue:
			r.write(ctx, ev)
		}
	}
}

// write correlates ev (dropped by the spam filter, or aggregated into an Event already written)
// and writes it, retrying transport errors.
func (r *Recorder) write(ctx context.Context, ev *corev1.Event) {
	result, err := r.correlator.EventCorrelate(ev)
	if result == nil {
		r.logger.Error(err, "Cannot correlate the Event; dropped", "reason", ev.Reason)
		return
	}
	if err != nil {
		r.logger.Error(err, "Cannot correlate the Event fully; writing it as correlated so far", "reason", ev.Reason)
	}
	if result.Skip {
		return
	}
	wait := time.Duration(rand.Int64N(int64(r.retryEvery) + 1)) // spread the first retry of many writers
	for try := 1; ; try++ {
		if r.attempt(result.Event, result.Patch, result.Event.Count > 1) {
			return
		}
		if try == recorderTries {
			r.logger.Error(nil, "The Event could not be written; dropped", "tries", try, "reason", ev.Reason)
			return
		}
		t := r.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		wait = r.retryEvery
	}
}

// attempt writes ev once: a patch of the Event already written when it aggregates (a create
// when that one is gone). It reports whether the Event is done with: written, or refused in a
// way another attempt would not change.
func (r *Recorder) attempt(ev *corev1.Event, patch []byte, aggregated bool) bool {
	var written *corev1.Event
	var err error
	if aggregated {
		written, err = r.sink.Patch(ev, patch)
	}
	if !aggregated || apierrors.IsNotFound(err) {
		fresh := ev.DeepCopy()
		fresh.Count, fresh.ResourceVersion = 1, ""
		written, err = r.sink.Create(fresh)
	}
	if err == nil {
		r.correlator.UpdateState(written)
		return true
	}
	var construction *rest.RequestConstructionError
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &construction):
		r.logger.Error(err, "Cannot build the Event's request; not retried", "reason", ev.Reason)
		return true
	case apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		r.logger.V(5).Info("The server refused the Event", "err", err, "reason", ev.Reason)
		return true
	case errors.As(err, &status):
		r.logger.Error(err, "The server refused the Event; not retried", "reason", ev.Reason)
		return true
	}
	r.logger.Error(err, "Cannot write the Event (retrying)", "reason", ev.Reason)
	return false
}
