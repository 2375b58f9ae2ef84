package gc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// encodeWatch writes events as kube-apiserver streams a metadata watch in mediaType: each
// object encoded, wrapped in a WatchEvent, framed.
func encodeWatch(t *testing.T, mediaType string, events []watch.Event) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(metainternalversionscheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		t.Fatalf("no stream serializer for %s", mediaType)
	}
	var buf bytes.Buffer
	fw := info.StreamSerializer.Framer.NewFrameWriter(&buf)
	for _, ev := range events {
		var raw bytes.Buffer
		if err := info.Serializer.Encode(ev.Object, &raw); err != nil {
			t.Fatal(err)
		}
		we := &metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: raw.Bytes()}}
		if err := info.StreamSerializer.Encode(we, fw); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func metaObject(name string, uid types.UID, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid, ResourceVersion: rv},
	}
}

// TestStreamsDecodeWhatTheServerSends: Streams asks as client-go's metadata client does (path,
// watch parameters, Accept, User-Agent) and decodes events from the body in protobuf and in JSON (custom
// resources are served in JSON); an error answer comes back as its Status, so an expired
// resourceVersion is recognized.
func TestStreamsDecodeWhatTheServerSends(t *testing.T) {
	events := []watch.Event{
		{Type: watch.Added, Object: metaObject("a", "uid-a", "11")},
		{Type: watch.Deleted, Object: metaObject("b", "uid-b", "12")},
		{Type: watch.Bookmark, Object: &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "13"}}},
	}
	for _, mediaType := range []string{"application/vnd.kubernetes.protobuf", "application/json"} {
		t.Run(mediaType, func(t *testing.T) {
			var got *http.Request
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r
				if r.URL.Query().Get("resourceVersion") == "1" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusGone)
					_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","message":"too old resource version: 1 (10)","code":410}`)
					return
				}
				w.Header().Set("Content-Type", mediaType+";stream=watch")
				_, _ = w.Write(encodeWatch(t, mediaType, events))
			}))
			defer srv.Close()
			s, err := NewStreams(&rest.Config{Host: srv.URL, UserAgent: "cascade"}, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
			st, err := s.open(context.Background(), gvr, metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](300)})
			if err != nil {
				t.Fatal(err)
			}
			q := got.URL.Query()
			if got.URL.Path != "/apis/apps/v1/deployments" || q.Get("watch") != "true" || q.Get("resourceVersion") != "10" ||
				q.Get("allowWatchBookmarks") != "true" || q.Get("timeoutSeconds") != "300" || !strings.HasPrefix(got.Header.Get("Accept"), "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata") {
				t.Errorf("request %s %s, Accept %q: not a metadata watch from resourceVersion 10", got.Method, got.URL, got.Header.Get("Accept"))
			}
			if ua := got.Header.Get("User-Agent"); ua != "cascade" {
				t.Errorf("User-Agent %q, want the config's (the transport would copy the request to set it)", ua)
			}
			for i, want := range events {
				typ, obj, err := st.next()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				m, ok := obj.(*metav1.PartialObjectMetadata)
				w := want.Object.(*metav1.PartialObjectMetadata)
				if typ != want.Type || !ok || m.Name != w.Name || m.UID != w.UID || m.ResourceVersion != w.ResourceVersion {
					t.Errorf("event %d: %s %#v, want %s %s", i, typ, obj, want.Type, w.ResourceVersion)
				}
			}
			if _, _, err := st.next(); !errors.Is(err, io.EOF) {
				t.Errorf("after the last event: %v, want io.EOF", err)
			}
			st.close()
			_, err = s.open(context.Background(), gvr, metav1.ListOptions{ResourceVersion: "1"})
			if !isExpired(err) || !strings.Contains(err.Error(), "too old resource version") {
				t.Errorf("a 410 answer: %v, want the server's Expired status", err)
			}
		})
	}
}

// scriptedWatches answers each open with the next step of a script.
type scriptedWatches struct {
	mu    sync.Mutex
	steps []func(opts metav1.ListOptions) (eventStream, error)
	opens []metav1.ListOptions
	done  chan struct{} // closed when the script ran out
}

func (s *scriptedWatches) open(ctx context.Context, _ schema.GroupVersionResource, opts metav1.ListOptions) (eventStream, error) {
	s.mu.Lock()
	s.opens = append(s.opens, opts)
	if len(s.steps) == 0 {
		s.mu.Unlock()
		close(s.done)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	step := s.steps[0]
	s.steps = s.steps[1:]
	s.mu.Unlock()
	return step(opts)
}

// sliceStream plays events, then ends with end (io.EOF: the server ended the watch).
type sliceStream struct {
	events []watch.Event
	end    error
	delay  time.Duration // before the end
}

func (s *sliceStream) next() (watch.EventType, runtime.Object, error) {
	if len(s.events) == 0 {
		time.Sleep(s.delay)
		return "", nil, s.end
	}
	ev := s.events[0]
	s.events = s.events[1:]
	return ev.Type, ev.Object, nil
}

func (s *sliceStream) close() {}

// onFirstEvent calls f when its first event is asked for.
type onFirstEvent struct {
	eventStream
	f func()
}

func (s *onFirstEvent) next() (watch.EventType, runtime.Object, error) {
	if s.f != nil {
		s.f()
		s.f = nil
	}
	return s.eventStream.next()
}

func listOf(rv string, objs ...*metav1.PartialObjectMetadata) func(metav1.ListOptions) (eventStream, error) {
	return func(metav1.ListOptions) (eventStream, error) {
		st := &sliceStream{end: io.EOF}
		for _, o := range objs {
			st.events = append(st.events, watch.Event{Type: watch.Added, Object: o})
		}
		st.events = append(st.events, watch.Event{Type: watch.Bookmark, Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: rv, Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
		return st, nil
	}
}

func events(end error, evs ...watch.Event) func(metav1.ListOptions) (eventStream, error) {
	return func(metav1.ListOptions) (eventStream, error) { return &sliceStream{events: evs, end: end}, nil }
}

// TestMonitorLoop follows a resource through what a watch meets, as client-go's reflector
// would: a list into the graph, a watch from its resourceVersion that the server ends (resumed
// from the last resourceVersion seen, a bookmark's included), an expired resourceVersion
// (listed again at once, and what vanished meanwhile deleted from the graph), a watch that
// cannot open (recorded: the resource is unsynced until a list completes, after a backoff), and
// a watch the server ends at once with nothing (a failure, not a spin). From the end of a watch
// to the opening of the next the resource is catching up (staleSince). No object is ever
// deleted from the graph but by a Deleted event or a complete list without it.
func TestMonitorLoop(t *testing.T) {
	c := New(Options{Metrics: NewMetrics(prometheus.NewRegistry())})
	a, b, d := cm("a", "uid-a", "5"), cm("b", "uid-b", "6"), cm("d", "uid-d", "21")
	observed := func(uid types.UID) bool {
		n, ok := c.Node(uid)
		return ok && !n.Absent
	}
	var checks []string
	check := func(name string, ok bool) {
		if !ok {
			checks = append(checks, name)
		}
	}
	store := &graphStore{res: cmResource, graph: c}
	script := &scriptedWatches{done: make(chan struct{})}
	script.steps = []func(metav1.ListOptions) (eventStream, error){
		listOf("10", a, b),
		func(opts metav1.ListOptions) (eventStream, error) {
			check("synced after the first list", store.synced.Load())
			check("both listed objects observed", observed("uid-a") && observed("uid-b"))
			return events(io.EOF,
				watch.Event{Type: watch.Modified, Object: cm("a", "uid-a", "11")},
				watch.Event{Type: watch.Bookmark, Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "14"}}},
			)(opts)
		},
		// resumed from the bookmark; the server no longer has it
		events(io.EOF, watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("too old resource version: 14 (20)").ErrStatus}),
		// listed again: b went while unwatched, d came
		func(opts metav1.ListOptions) (eventStream, error) {
			check("catching up from the expired watch to the next open one", store.staleSince.Load() != 0)
			return listOf("21", a, d)(opts)
		},
		func(opts metav1.ListOptions) (eventStream, error) {
			check("still catching up after the list, before the watch opens", store.staleSince.Load() != 0)
			check("b, gone from the relist, deleted from the graph", !observed("uid-b"))
			check("d observed", observed("uid-d"))
			return nil, errors.New("connection refused")
		},
		func(opts metav1.ListOptions) (eventStream, error) {
			check("the failed watch recorded until a list completes", store.lastFailure() == "connection refused")
			return listOf("30", a, d)(opts)
		},
		func(opts metav1.ListOptions) (eventStream, error) {
			check("a complete list clears the failure", store.lastFailure() == "")
			return events(io.EOF)(opts) // ends at once, nothing sent
		},
		func(opts metav1.ListOptions) (eventStream, error) {
			check("a watch that ended at once recorded as a failure", strings.Contains(store.lastFailure(), "ended at once"))
			return listOf("40", a, d)(opts)
		},
		func(opts metav1.ListOptions) (eventStream, error) {
			st, err := events(io.EOF, watch.Event{Type: watch.Deleted, Object: cm("d", "uid-d", "41")})(opts)
			return &onFirstEvent{eventStream: st, f: func() {
				check("caught up once a watch is open", store.staleSince.Load() == 0)
			}}, err
		},
	}
	m := &monitor{res: cmResource, store: store, lister: &streamLister{open: script.open, store: store, logger: klog.Background()}}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		m.run(ctx)
	}()
	select {
	case <-script.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the script did not run to its end")
	}
	cancel()
	<-ran
	for _, f := range checks {
		t.Error(f)
	}
	var rvs []string
	for _, o := range script.opens {
		kind := "watch"
		if o.SendInitialEvents != nil {
			kind = "list"
		} else if !o.AllowWatchBookmarks || o.TimeoutSeconds == nil || *o.TimeoutSeconds < 300 || *o.TimeoutSeconds > 600 {
			t.Errorf("watch options %+v: want bookmarks and a timeout of 5 to 10 minutes", o)
		}
		rvs = append(rvs, kind+"@"+o.ResourceVersion)
	}
	want := "list@ watch@10 watch@14 list@ watch@21 list@ watch@30 list@ watch@40 watch@41"
	if got := strings.Join(rvs, " "); got != want {
		t.Errorf("opens:\n got %s\nwant %s", got, want)
	}
	if !observed("uid-a") || observed("uid-d") {
		t.Error("the graph does not end with a observed and d deleted")
	}
}

// TestWatchEventTooLarge: a watch event above the decoder's 16 MiB (in protobuf and in JSON) ends
// the watch with an error, after the events before it; the monitor's loop records it as a
// failure (the resource lists again, unsynced meanwhile) and counts it.
func TestWatchEventTooLarge(t *testing.T) {
	huge := metaObject("huge", "uid-huge", "12")
	huge.Annotations = map[string]string{"x": strings.Repeat("x", 17<<20)}
	events := []watch.Event{{Type: watch.Added, Object: metaObject("a", "uid-a", "11")}, {Type: watch.Modified, Object: huge}}
	for _, mediaType := range []string{"application/vnd.kubernetes.protobuf", "application/json"} {
		t.Run(mediaType, func(t *testing.T) {
			body := encodeWatch(t, mediaType, events)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", mediaType+";stream=watch")
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			s, err := NewStreams(&rest.Config{Host: srv.URL}, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.open(context.Background(), cmResource.GVR, metav1.ListOptions{ResourceVersion: "10"})
			if err != nil {
				t.Fatal(err)
			}
			defer st.close()
			if _, obj, err := st.next(); err != nil || obj.(*metav1.PartialObjectMetadata).Name != "a" {
				t.Fatalf("first event: %v, %v", obj, err)
			}
			_, _, err = st.next()
			if !errors.Is(err, streaming.ErrObjectTooLarge) {
				t.Fatalf("the 17 MiB event: %v, want streaming.ErrObjectTooLarge", err)
			}
			m := NewMetrics(prometheus.NewRegistry())
			store := &graphStore{res: cmResource}
			l := &streamLister{store: store, logger: klog.Background(), tooLarge: m.WatchEventsTooLarge}
			l.fail(err)
			if store.lastFailure() == "" {
				t.Error("the failure is not recorded: the resource would not count as unsynced until it lists again")
			}
			if v := testutil.ToFloat64(m.WatchEventsTooLarge); v != 1 {
				t.Errorf("cascade_watch_events_too_large_total = %v, want 1", v)
			}
		})
	}
}

// TestCatchingUp: a resource that synced once counts as catching up from the end of its watch
// to the opening of the next, when the watch ended after the moment asked about; not when it
// never synced, and not when it is no longer served (its list fails with NotFound: its CRD went,
// nothing can be written there), until a list completes again.
func TestCatchingUp(t *testing.T) {
	c := New(Options{Metrics: NewMetrics(prometheus.NewRegistry())})
	ms := newMonitors(nil, c)
	add := func(resource string) (*graphStore, *streamLister) {
		r := Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: resource}, Kind: resource}
		st := &graphStore{res: r, graph: c}
		ms.byR[r.GVR] = &monitor{res: r, store: st}
		return st, &streamLister{store: st, logger: klog.Background()}
	}
	relisting, _ := add("relisting")
	failing, failingL := add("failing")
	gone, goneL := add("gone")
	never, _ := add("never")
	open, _ := add("open")
	for _, s := range []*graphStore{relisting, failing, gone, open} {
		s.synced.Store(true)
	}
	before := time.Now()
	for _, s := range []*graphStore{relisting, failing, gone, never, open} {
		s.watchEnded(time.Now())
	}
	open.watchOpened()
	failingL.fail(errors.New("connection refused"))
	goneL.fail(apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "gone"}, ""))
	names := func(rs []Resource) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.GVR.Resource)
		}
		return strings.Join(out, ",")
	}
	if got := names(ms.catchingUp(before.Add(-time.Second))); got != "failing,relisting" {
		t.Errorf("catching up: %q, want failing,relisting", got)
	}
	if got := names(ms.catchingUp(time.Now().Add(time.Second))); got != "" {
		t.Errorf("catching up since a moment after the watches ended: %q, want none", got)
	}
	_ = gone.Replace(nil, "5") // served again, listed; its watch not open yet
	if got := names(ms.catchingUp(before.Add(-time.Second))); got != "failing,gone,relisting" {
		t.Errorf("after the gone resource listed again: %q, want failing,gone,relisting", got)
	}
}
