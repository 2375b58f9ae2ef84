// Package gctest is the scenario harness that the scenario tests of packages gc and finalizers
// share, in the style of in-tree TestConflictingData: numbered steps, the assertion of a fake
// client's API calls (rendered by clienttest.Action), of Events (drained by clienttest.Events)
// and of metrics, and assertions on a collector's graph through its read-only queries. It is
// for tests only.
//
// It does not import package gc (gc's own tests use it): the graph is read through Graph, which
// gc.View and *gc.Controller satisfy.
package gctest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/record"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/internal/work/worktest"
)

// Graph is the part of gc.View the assertions read.
type Graph interface {
	Node(uid types.UID) (graph.NodeView, bool)
	Owners(uid types.UID) []graph.OwnerView
	BlockingDependents(uid types.UID) int
}

// Harness is one scenario's plumbing: its steps, its fake API, Events and metrics. Only the
// test goroutine touches it.
type Harness struct {
	T    testing.TB
	Fake *metadatafake.FakeMetadataClient
	Rec  *record.FakeRecorder
	Reg  *prometheus.Registry
	// Graph is what the graph assertions read; set it once the collector exists.
	Graph Graph
	// ByKind maps the scenario's kinds to their resources.
	ByKind map[schema.GroupVersionKind]schema.GroupVersionResource
	// Outcomes of the items processed (Drive) since the last AssertOutcomes.
	Outcomes []string

	stepN    int
	stepName string
}

// New returns the harness of a scenario over fake, with a fresh Event recorder and registry.
// At the end of the test, it fails for every API call and Event never asserted.
func New(t testing.TB, fake *metadatafake.FakeMetadataClient) *Harness {
	h := &Harness{
		T: t, Fake: fake, Rec: record.NewFakeRecorder(100), Reg: prometheus.NewRegistry(),
		ByKind: map[schema.GroupVersionKind]schema.GroupVersionResource{},
	}
	t.Cleanup(func() {
		if a := h.Actions(); len(a) > 0 {
			t.Errorf("API calls never asserted: %q", a)
		}
		if e := h.Events(); len(e) > 0 {
			t.Errorf("Events never asserted: %q", e)
		}
	})
	return h
}

// --- step plumbing ---

// Begin starts the next step; failures name it: "step 3 (observe a,b)".
func (h *Harness) Begin(format string, args ...any) {
	h.stepN++
	h.stepName = fmt.Sprintf("step %d (%s)", h.stepN, fmt.Sprintf(format, args...))
}

// StepName is the name of the current step.
func (h *Harness) StepName() string { return h.stepName }

// Errorf reports a failure of the current step.
func (h *Harness) Errorf(format string, args ...any) {
	h.T.Helper()
	h.T.Errorf("%s: %s", h.stepName, fmt.Sprintf(format, args...))
}

// Fatalf reports a failure of the current step and ends the test.
func (h *Harness) Fatalf(format string, args ...any) {
	h.T.Helper()
	h.T.Fatalf("%s: %s", h.stepName, fmt.Sprintf(format, args...))
}

// GVR returns the resource of obj's kind in this scenario.
func (h *Harness) GVR(obj *metav1.PartialObjectMetadata) schema.GroupVersionResource {
	h.T.Helper()
	gvr, ok := h.ByKind[obj.GroupVersionKind()]
	if !ok {
		h.Fatalf("no resource of %v in this scenario", obj.GroupVersionKind())
	}
	return gvr
}

// Tracked reads obj's live version from the fake's tracker (no action recorded); obj itself
// with the error when there is none.
func (h *Harness) Tracked(obj *metav1.PartialObjectMetadata) (*metav1.PartialObjectMetadata, error) {
	o, err := h.Fake.Tracker().Get(h.GVR(obj), obj.Namespace, obj.Name)
	if err != nil {
		return obj, err
	}
	return o.(*metav1.PartialObjectMetadata).DeepCopy(), nil
}

// Live is Tracked, failing the test when obj is not in the API.
func (h *Harness) Live(obj *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	h.T.Helper()
	l, err := h.Tracked(obj)
	if err != nil {
		h.Fatalf("%s: %v", obj.Name, err)
	}
	return l
}

// SetObjects writes objs to the fake API (create or replace) without any watch event.
func (h *Harness) SetObjects(objs ...*metav1.PartialObjectMetadata) {
	h.T.Helper()
	for _, o := range objs {
		err := h.Fake.Tracker().Update(h.GVR(o), o.DeepCopy(), o.Namespace)
		if apierrors.IsNotFound(err) {
			err = h.Fake.Tracker().Add(o.DeepCopy())
		}
		if err != nil {
			h.Fatalf("%s: %v", o.Name, err)
		}
	}
}

// DeleteObjects removes objs from the fake API without any watch event.
func (h *Harness) DeleteObjects(objs ...*metav1.PartialObjectMetadata) {
	h.T.Helper()
	for _, o := range objs {
		if err := h.Fake.Tracker().Delete(h.GVR(o), o.Namespace, o.Name); err != nil {
			h.Fatalf("%s: %v", o.Name, err)
		}
	}
}

// Drive processes q until it is empty, recording each outcome in Outcomes ("delete u-dep:
// Done") and in pending the items whose outcome asks for a later retry; at most 1000 items, so
// a loop fails instead of hanging.
func Drive[T comparable](h *Harness, ctx context.Context, q *work.Queue[T], name string, key func(T) string, fn work.Func[T], pending *Pending[T]) {
	h.T.Helper()
	for range 1000 {
		if q.Len() == 0 {
			return
		}
		q.ProcessNext(ctx, func(ctx context.Context, item T) (work.Outcome, error) {
			out, err := fn(ctx, item)
			line := fmt.Sprintf("%s %s: %s", name, key(item), out)
			if err != nil {
				line += " error"
			}
			h.Outcomes = append(h.Outcomes, line)
			if out == work.Done {
				pending.forget(item)
			} else {
				pending.add(item)
			}
			return out, err
		})
	}
	h.Fatalf("%s: more than 1000 items processed", name)
}

// Pending holds the items whose last outcome asked for a later retry, in the order they first
// asked: a retry hands them back in that order, so scenarios see the same order on every run.
type Pending[T comparable] struct {
	order []T
}

func (p *Pending[T]) add(item T) {
	if !slices.Contains(p.order, item) {
		p.order = append(p.order, item)
	}
}

func (p *Pending[T]) forget(item T) {
	if i := slices.Index(p.order, item); i >= 0 {
		p.order = slices.Delete(p.order, i, i+1)
	}
}

// Retry hands every pending item to add, as their backoff would once elapsed, and forgets them.
func Retry[T comparable](pending *Pending[T], add func(T)) {
	items := pending.order
	pending.order = nil
	for _, item := range items {
		add(item)
	}
}

// Peek returns the items waiting in q and puts them back in the same order.
func Peek[T comparable](q *work.Queue[T]) []T {
	items := worktest.Drain(q)
	for _, it := range items {
		q.Add(it)
	}
	return items
}

// --- assertions ---

// AssertOutcomes checks the items processed since the last call, in order.
func (h *Harness) AssertOutcomes(want ...string) {
	h.T.Helper()
	h.Begin("assertOutcomes")
	if !slices.Equal(h.Outcomes, want) {
		h.Errorf("outcomes\n got: %q\nwant: %q", h.Outcomes, want)
	}
	h.Outcomes = nil
}

// AssertActions checks the API calls since the last call (Actions), in order.
func (h *Harness) AssertActions(want ...string) {
	h.T.Helper()
	h.AssertActionsUnordered(0, want...)
}

// AssertActionsUnordered is AssertActions where the order of the first unordered calls is
// free (concurrent patches).
func (h *Harness) AssertActionsUnordered(unordered int, want ...string) {
	h.T.Helper()
	h.Begin("assertActions")
	got := h.Actions()
	if len(got) >= unordered && len(want) >= unordered {
		slices.Sort(got[:unordered])
		want = slices.Clone(want)
		slices.Sort(want[:unordered])
	}
	if !slices.Equal(got, want) {
		h.Errorf("API calls\n got: %q\nwant: %q", got, want)
	}
}

// Actions renders (clienttest.Action) and clears the fake's actions but lists and watches (a
// reflector's): "DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background",
// "GET configmaps.v1 ns/cm", "PATCH widgets.v1.example.com ns/dep strategic {...}".
func (h *Harness) Actions() []string {
	var out []string
	for _, a := range h.Fake.Actions() {
		if verb := a.GetVerb(); verb == "list" || verb == "watch" {
			continue
		}
		out = append(out, clienttest.Action(a))
	}
	h.Fake.ClearActions()
	return out
}

// AssertEvents checks the Events emitted since the last call, in order.
func (h *Harness) AssertEvents(want ...string) {
	h.T.Helper()
	h.Begin("assertEvents")
	if got := h.Events(); !slices.Equal(got, want) {
		h.Errorf("Events\n got: %q\nwant: %q", got, want)
	}
}

// Events returns and consumes the Events emitted since the last call.
func (h *Harness) Events() []string { return clienttest.Events(h.Rec) }

// AssertMetric checks one sample of the registry; labels are name, value pairs. A counter never
// incremented reads 0.
func (h *Harness) AssertMetric(name string, want float64, labels ...string) {
	h.T.Helper()
	h.Begin("assertMetric %s%v", name, labels)
	got, err := Sample(h.Reg, name, labels...)
	if err != nil {
		h.Fatalf("%v", err)
	}
	if got != want {
		h.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// Sample reads the counter or gauge name with exactly labels (name, value pairs) from reg; 0
// when there is none.
func Sample(reg prometheus.Gatherer, name string, labels ...string) (float64, error) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), nil
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), nil
			}
			return 0, fmt.Errorf("%s is neither a counter nor a gauge", name)
		}
	}
	return 0, nil
}

// AssertLiveOwners checks that obj is in the fake API with the owner references owners (by
// UID).
func (h *Harness) AssertLiveOwners(obj *metav1.PartialObjectMetadata, owners ...types.UID) {
	h.T.Helper()
	h.assertLive(obj, owners, false, nil)
}

// AssertLive checks that obj is in the fake API with the owner references owners (by UID) and
// the finalizers finalizers.
func (h *Harness) AssertLive(obj *metav1.PartialObjectMetadata, owners []types.UID, finalizers ...string) {
	h.T.Helper()
	h.assertLive(obj, owners, true, finalizers)
}

func (h *Harness) assertLive(obj *metav1.PartialObjectMetadata, owners []types.UID, checkFinalizers bool, finalizers []string) {
	h.T.Helper()
	h.Begin("assertLive %s", obj.Name)
	live, err := h.Tracked(obj)
	if err != nil {
		h.Errorf("%s: %v", obj.Name, err)
		return
	}
	var got []types.UID
	for _, r := range live.OwnerReferences {
		got = append(got, r.UID)
	}
	if !slices.Equal(got, owners) {
		h.Errorf("%s references %v, want %v", obj.Name, got, owners)
	}
	if checkFinalizers && !slices.Equal(live.Finalizers, finalizers) {
		h.Errorf("%s finalizers %q, want %q", obj.Name, live.Finalizers, finalizers)
	}
}

// AssertBlocking checks the graph's BlockingDependents of uid.
func (h *Harness) AssertBlocking(uid types.UID, want int) {
	h.T.Helper()
	h.Begin("assertBlocking %s", uid)
	if got := h.Graph.BlockingDependents(uid); got != want {
		h.Errorf("BlockingDependents(%s) = %d, want %d", uid, got, want)
	}
}

// AssertOwnerStates checks the graph's verdict on each owner reference of uid.
func (h *Harness) AssertOwnerStates(uid types.UID, want ...graph.OwnerState) {
	h.T.Helper()
	h.Begin("assertOwnerStates %s", uid)
	var got []graph.OwnerState
	for _, o := range h.Graph.Owners(uid) {
		got = append(got, o.State)
	}
	if !slices.Equal(got, want) {
		h.Errorf("owner states of %s = %v, want %v", uid, got, want)
	}
}

// AssertNoNode checks that the graph holds nothing for uid.
func (h *Harness) AssertNoNode(uid types.UID) {
	h.T.Helper()
	h.Begin("assertNoNode %s", uid)
	if n, ok := h.Graph.Node(uid); ok {
		h.Errorf("node %s = %+v, want none", uid, n)
	}
}

// --- objects ---

// Obj is an object of kind gvk, in namespace "ns" when namespaced.
func Obj(gvk schema.GroupVersionKind, namespaced bool, name string, uid types.UID, rv string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	ns := ""
	if namespaced {
		ns = "ns"
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, ResourceVersion: rv, OwnerReferences: refs},
	}
}

// RefTo is a reference to obj.
func RefTo(obj *metav1.PartialObjectMetadata) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: obj.APIVersion, Kind: obj.Kind, Name: obj.Name, UID: obj.UID}
}

// Blocking is ref with blockOwnerDeletion: true.
func Blocking(ref metav1.OwnerReference) metav1.OwnerReference {
	t := true
	ref.BlockOwnerDeletion = &t
	return ref
}

// Names joins the names of objs: "a,b".
func Names(objs []*metav1.PartialObjectMetadata) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return strings.Join(out, ",")
}
