package gc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
)

// fakeResource serves a resource's objects as a streaming list (watch with sendInitialEvents,
// ended by the initial-events-end bookmark at rv) or, when refuse is set, refuses that and
// serves pages.
type fakeResource struct {
	metadata.ResourceInterface // nil: any other call panics
	objects                    []*metav1.PartialObjectMetadata
	rv                         string
	refuse                     bool
	watches, lists             []metav1.ListOptions
}

func (f *fakeResource) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	f.watches = append(f.watches, opts)
	if opts.SendInitialEvents == nil {
		return watch.NewFake(), nil // the reflector's watch after the list
	}
	if f.refuse {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "",
			field.ErrorList{field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")})
	}
	w := watch.NewFakeWithChanSize(len(f.objects)+1, false)
	for _, o := range f.objects {
		w.Add(o)
	}
	w.Action(watch.Bookmark, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: f.rv,
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	return w, nil
}

func (f *fakeResource) List(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	f.lists = append(f.lists, opts)
	start := 0
	if opts.Continue != "" {
		_, _ = fmt.Sscan(opts.Continue, &start)
	}
	end := min(start+int(opts.Limit), len(f.objects))
	l := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: f.rv}}
	for _, o := range f.objects[start:end] {
		l.Items = append(l.Items, *o)
	}
	if end < len(f.objects) {
		l.Continue = fmt.Sprint(end)
	}
	return l, nil
}

func listedCMs(n int) []*metav1.PartialObjectMetadata {
	var out []*metav1.PartialObjectMetadata
	for i := range n {
		out = append(out, cm(fmt.Sprint("cm-", i), types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i+1)), "3"))
	}
	return out
}

// TestStreamListerStreamsIntoTheGraph: a list goes into the graph object by object and the
// list returns the bookmark's resourceVersion; the Replace that follows
// deletes what the list no longer holds and marks the resource synced. Where the server
// refuses a watch-list, lists come in pages, and keep doing so.
func TestStreamListerStreamsIntoTheGraph(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refuse=%t", refuse), func(t *testing.T) {
			c := New(Options{Metrics: NewMetrics(prometheus.NewRegistry())})
			s := &graphStore{res: cmResource, graph: c}
			gone := cm("gone", "00000000-0000-0000-0000-0000000000ff", "1")
			if err := s.Replace([]any{gone}, "1"); err != nil { // an earlier list held it
				t.Fatal(err)
			}
			f := &fakeResource{objects: listedCMs(1234), rv: "7", refuse: refuse}
			l := &streamLister{client: f, store: s, logger: klog.Background()}
			for round := range 2 {
				rv, err := l.list(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if rv != "7" {
					t.Fatalf("round %d: the list reached %q, want 7", round, rv)
				}
				want := 1234 + 1 - round // the first round still holds the vanished object
				if st := c.GraphStats(); st.Observed != want {
					t.Fatalf("round %d: %d observed before Replace, want %d", round, st.Observed, want)
				}
				if err := s.Replace(nil, "7"); err != nil {
					t.Fatal(err)
				}
				if st := c.GraphStats(); st.Observed != 1234 {
					t.Errorf("round %d: %d observed after Replace, want 1234", round, st.Observed)
				}
				if n, ok := c.Node(gone.UID); ok && !n.Absent {
					t.Errorf("the object the list no longer holds is still observed: %+v", n)
				}
				if !s.synced.Load() {
					t.Errorf("round %d: not synced", round)
				}
			}
			if refuse {
				if len(f.watches) != 1 || len(f.lists) != 2*3 || f.lists[0].Limit != listPageSize {
					t.Errorf("refused: %d watch-lists (want 1, then pages), %d page requests (want 6 of %d)", len(f.watches), len(f.lists), listPageSize)
				}
			} else if len(f.lists) != 0 || len(f.watches) != 2 {
				t.Errorf("%d lists (want 0), %d watch-lists (want 2)", len(f.lists), len(f.watches))
			} else if w := f.watches[0]; w.ResourceVersion != "" || w.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan || !w.AllowWatchBookmarks {
				t.Errorf("watch-list options %+v, want a consistent read (rv \"\", NotOlderThan) with bookmarks", w)
			}
		})
	}
}

// TestStreamListerEndedEarly: a stream that ends before its bookmark is an error (the monitor's
// loop lists again), recorded on the store; nothing is marked synced and nothing is deleted.
func TestStreamListerEndedEarly(t *testing.T) {
	c := New(Options{Metrics: NewMetrics(prometheus.NewRegistry())})
	s := &graphStore{res: cmResource, graph: c}
	w := watch.NewFakeWithChanSize(2, false)
	w.Add(listedCMs(1)[0])
	w.Stop()
	l := &streamLister{client: earlyEnd{w: w}, store: s, logger: klog.Background()}
	if _, err := l.list(context.Background()); err == nil {
		t.Fatal("no error from a stream without its bookmark")
	}
	if s.lastFailure() == "" || s.synced.Load() || s.streamed != nil {
		t.Errorf("failure %q, synced %t, streamed %v: want the failure recorded, not synced, nothing handed to Replace", s.lastFailure(), s.synced.Load(), s.streamed)
	}
}

type earlyEnd struct {
	metadata.ResourceInterface
	w *watch.FakeWatcher
}

func (e earlyEnd) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return e.w, nil
}

// The first list or watch error since the last complete list is the one logged: the store
// says which it is, and a complete list starts a new run.
func TestStoreFailedFirstOfARun(t *testing.T) {
	s := &graphStore{res: cmResource, graph: New(Options{})}
	if !s.failed(errors.New("a")) {
		t.Fatal("the first failure is not reported as the first of its run")
	}
	if s.failed(errors.New("b")) || s.lastFailure() != "b" {
		t.Fatalf("a second failure: reported as first, or not recorded (last failure %q)", s.lastFailure())
	}
	if err := s.Replace(nil, "1"); err != nil {
		t.Fatal(err)
	}
	if s.lastFailure() != "" || !s.failed(errors.New("c")) {
		t.Fatal("a complete list did not start a new run of failures")
	}
}
