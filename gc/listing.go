package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cascade-gc/cascade/graph"
)

// listPageSize is the page size of paginated lists, where the server refuses a watch-list.
const listPageSize = 500

// streamLister lists and opens the watches of a monitor's resource. Its lists never hold the
// resource's objects: each object goes into the graph as it arrives, and the list returns only
// its resourceVersion; graphStore.Replace then completes it with the UIDs seen (what vanished
// since the last list is deleted from the graph, and the resource counts as synced). So
// cascade's memory while listing is the graph plus one object, plus 16 bytes per UID seen,
// whatever the size of the resource — where client-go's reflector holds the whole list (a
// regular list: the server's whole response, decoded; a watch-list: every object, buffered
// until the end).
//
// It asks for a streaming list first (a watch with sendInitialEvents, ended by the
// initial-events-end bookmark: kube-apiserver serves it from its watch cache, Kubernetes
// 1.34+ by default), and falls back to paginated lists of listPageSize where the server
// refuses one. The level each list used is recorded (mode) and told to listed: the feature
// "list" of cascade_feature_in_use (package internal/features).
type streamLister struct {
	client metadata.ResourceInterface
	// open opens the resource's watches (its streaming lists' too).
	open   watchOpener
	store  *graphStore
	logger klog.Logger
	// paginate is set once the server refused a watch-list, until retryWatchList clears it
	// (every discovery round: a server upgraded since may serve them now).
	paginate atomic.Bool
	// mode is how the last successful list was made (listNone before the first).
	mode atomic.Int32
	// listed, when set, is called after each successful list with its context.
	listed func(ctx context.Context)
	// tooLarge, when set, counts failures from an object above the decoder's bound.
	tooLarge prometheus.Counter
}

// Modes of a list (streamLister.mode).
const (
	listNone int32 = iota
	listWatchList
	listPaged
)

// retryWatchList makes the next list try a watch-list again.
func (l *streamLister) retryWatchList() { l.paginate.Store(false) }

// setMode records how the last list was made and reports it.
func (l *streamLister) setMode(ctx context.Context, mode int32) {
	l.mode.Store(mode)
	if l.listed != nil {
		l.listed(ctx)
	}
}

// fail records a list or watch error, and logs the first of a run of them (until a complete
// list): the resource is then unsynced (/readyz, cascade_resource_unsynced), and its objects'
// view may be stale until it lists again.
func (l *streamLister) fail(err error) {
	first := l.store.failed(err)
	l.store.notServed.Store(apierrors.IsNotFound(err))
	switch {
	case errors.Is(err, streaming.ErrObjectTooLarge):
		// An object above 16 MiB ends the stream that carried it: the resource lists again
		// (and meets it again, if it is still there), unsynced until then. Each is said.
		l.logger.Error(err, "An object of the resource is larger than the decoder accepts: it counts as unsynced, listing again")
		if l.tooLarge != nil {
			l.tooLarge.Inc()
		}
	case first:
		l.logger.Error(err, "Cannot list or watch resource (retrying): it counts as unsynced until it lists again")
	}
}

// openWatch opens a watch of the resource: through open when set, else the client's.
func (l *streamLister) openWatch(ctx context.Context, opts metav1.ListOptions) (eventStream, error) {
	if l.open != nil {
		return l.open(ctx, l.store.res.GVR, opts)
	}
	w, err := l.client.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &chanStream{ctx: ctx, w: w}, nil
}

// list streams the resource into the graph, at its most recent version (a consistent read:
// a streamed list served from kube-apiserver's watch cache is as cheap either way), and returns
// the resourceVersion it reached. A failure while ctx lasts is recorded on the store.
func (l *streamLister) list(ctx context.Context) (string, error) {
	rv, err := l.stream(ctx)
	if err != nil && ctx.Err() == nil {
		l.fail(err)
	}
	return rv, err
}

// stream applies every object of the resource to the graph and hands the UIDs seen to the
// store for the Replace that follows. Objects applied before a failure stay in the graph: each
// was observed at its resourceVersion.
func (l *streamLister) stream(ctx context.Context) (string, error) {
	if !l.paginate.Load() {
		seen := graph.NewUIDSet(0)
		got, err := l.watchList(ctx, seen)
		if err == nil {
			l.store.streamed = seen
			l.setMode(ctx, listWatchList)
			return got, nil
		}
		if !refusedWatchList(err) {
			return "", err
		}
		if l.mode.Load() != listPaged {
			l.logger.Info("The server refused a streaming list (watch with sendInitialEvents); listing in pages (tried again after the next discovery round)", "err", err)
		}
		l.paginate.Store(true)
	}
	seen := graph.NewUIDSet(0)
	got, err := l.pages(ctx, seen)
	if err != nil {
		return "", err
	}
	l.store.streamed = seen
	l.setMode(ctx, listPaged)
	return got, nil
}

// refusedWatchList reports whether err says the server does not serve watch-lists (its
// WatchList feature off: the request is invalid; or no watch with these options at all).
func refusedWatchList(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err)
}

// watchList streams the resource's objects at its most recent version and returns the
// resourceVersion of the initial-events-end bookmark.
func (l *streamLister) watchList(ctx context.Context, seen *graph.UIDSet) (string, error) {
	w, err := l.openWatch(ctx, metav1.ListOptions{
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents:    ptr.To(true),
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		return "", err
	}
	defer w.close()
	for {
		t, obj, err := w.next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("the streaming list ended before its initial-events-end bookmark")
		}
		if err != nil {
			return "", err
		}
		if t == watch.Error {
			return "", apierrors.FromObject(obj)
		}
		m, isMeta := obj.(*metav1.PartialObjectMetadata)
		if !isMeta {
			return "", fmt.Errorf("streaming list: unexpected %T in a %s event", obj, t)
		}
		switch t {
		case watch.Bookmark:
			if m.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				return m.ResourceVersion, nil
			}
		case watch.Added, watch.Modified:
			seen.Add(m.UID)
			l.store.observe(m)
		case watch.Deleted:
			seen.Remove(m.UID)
			_ = l.store.Delete(m)
		}
	}
}

// pages lists the resource listPageSize objects at a time (one consistent snapshot: the first
// page's resourceVersion, which the continue tokens carry) and returns its resourceVersion.
func (l *streamLister) pages(ctx context.Context, seen *graph.UIDSet) (string, error) {
	opts := metav1.ListOptions{Limit: listPageSize}
	rv := ""
	for {
		page, err := l.client.List(ctx, opts)
		if err != nil {
			return "", err
		}
		if rv == "" {
			rv = page.ResourceVersion
		}
		for i := range page.Items {
			seen.Add(page.Items[i].UID)
			l.store.observe(&page.Items[i])
		}
		if page.Continue == "" {
			return rv, nil
		}
		opts.Continue = page.Continue
	}
}
