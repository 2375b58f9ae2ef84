package finalizers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cascade-gc/cascade/finalizers/orphanrecord"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/work"
)

// The orphan record never stalls orphan deletion: a full record degrades at once, a failing
// one after recordRetryFor; owners whose dependents cannot need it are not recorded.

// recordCase is an owner being deleted with the orphan finalizer and one dependent, a processor
// with a fake clock, Events, metrics and a Recorder failing with err.
type recordCase struct {
	fake    *metadatafake.FakeMetadataClient
	view    *fakeView
	rec     *fakeRecords
	events  *record.FakeRecorder
	metrics *Metrics
	clk     *testingclock.FakeClock
	p       *Processor
}

func newRecordCase(t *testing.T, err error) *recordCase {
	t.Helper()
	c := &recordCase{
		fake: newFakeClient(
			widget("owner", "u-owner", "5", true, []string{metav1.FinalizerOrphanDependents}),
			widget("d1", "u-d1", "2", false, nil, refTo("owner", "u-owner")),
		),
		view:    newFakeView(),
		events:  record.NewFakeRecorder(10),
		metrics: NewMetrics(prometheus.NewRegistry()),
		clk:     testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
	c.view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	c.view.deps["u-owner"] = [][]graph.Ref{{wref("d1", "u-d1")}}
	c.rec = &fakeRecords{fake: c.fake, err: err}
	c.p = newTestProcessor(t, c.view, c.fake, Options{OrphanRecord: c.rec, RecordWindow: 10 * time.Minute, Events: c.events, Metrics: c.metrics, Clock: c.clk})
	return c
}

func (c *recordCase) process(t *testing.T, want work.Outcome) {
	t.Helper()
	got, err := c.p.process(context.Background(), "u-owner")
	if got != want {
		t.Fatalf("process() = %v, %v; want %v", got, err, want)
	}
}

func (c *recordCase) finalizers(t *testing.T) []string {
	t.Helper()
	return live(t, c.fake, "owner").Finalizers
}

// degradedEvent checks that exactly one Warning Event says why the owner went without a record.
func (c *recordCase) degradedEvent(t *testing.T, why string) {
	t.Helper()
	if n := len(c.events.Events); n != 1 {
		t.Fatalf("%d events, want 1", n)
	}
	ev := <-c.events.Events
	for _, want := range []string{"Warning " + EventReasonRecordUnavailable, why, "Protection across a failover is reduced"} {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q lacks %q", ev, want)
		}
	}
}

// TestOrphanRecordFullDegrades: a full record does not hold the finalizer for a moment: the
// dependent is orphaned, the finalizer goes in the same pass, and a Warning Event and
// cascade_orphan_record_degraded_total{reason="full"} say that protection is reduced.
func TestOrphanRecordFullDegrades(t *testing.T) {
	c := newRecordCase(t, fmt.Errorf("%w", orphanrecord.ErrFull))
	c.process(t, work.Done)
	if f := c.finalizers(t); len(f) != 0 {
		t.Errorf("owner finalizers = %q with the record full, want none", f)
	}
	if o := liveOwners(t, c.fake, "d1"); len(o) != 0 {
		t.Errorf("dependent still references %v", o)
	}
	if len(c.rec.records) != 1 {
		t.Errorf("Record called %d times, want 1", len(c.rec.records))
	}
	c.degradedEvent(t, "the orphan record is full")
	if v := testutil.ToFloat64(c.metrics.RecordDegraded.WithLabelValues(RecordDegradedFull)); v != 1 {
		t.Errorf("degraded{full} = %v, want 1", v)
	}
	if v := testutil.ToFloat64(c.metrics.FinalizersRemoved.WithLabelValues(metav1.FinalizerOrphanDependents)); v != 1 {
		t.Errorf("finalizers removed = %v, want 1", v)
	}
}

// TestOrphanRecordErrorDegradesAfterBound: a failing write keeps the finalizer while it is
// retried, for recordRetryFor after its first failure; the first failure after that degrades:
// the finalizer goes, with one Event and degraded{reason="error"}.
func TestOrphanRecordErrorDegradesAfterBound(t *testing.T) {
	c := newRecordCase(t, errors.New("configmaps is forbidden"))
	c.process(t, work.Retry)
	c.clk.Step(recordRetryFor - time.Second)
	c.process(t, work.Retry)
	if f := c.finalizers(t); !slices.Equal(f, []string{metav1.FinalizerOrphanDependents}) {
		t.Fatalf("owner finalizers = %q while the record is retried, want orphan kept", f)
	}
	if n := len(c.events.Events); n != 0 {
		t.Fatalf("%d events while the record is retried, want none", n)
	}
	c.clk.Step(time.Second)
	c.process(t, work.Done)
	if f := c.finalizers(t); len(f) != 0 {
		t.Errorf("owner finalizers = %q after %s of failed records, want none", f, recordRetryFor)
	}
	if len(c.rec.records) != 3 {
		t.Errorf("Record called %d times, want 3", len(c.rec.records))
	}
	c.degradedEvent(t, "configmaps is forbidden")
	if v := testutil.ToFloat64(c.metrics.RecordDegraded.WithLabelValues(RecordDegradedError)); v != 1 {
		t.Errorf("degraded{error} = %v, want 1", v)
	}
}

// TestOrphanRecordRecoveredIsNotDegraded: a write that fails and then works within the bound
// records the owner; nothing is degraded.
func TestOrphanRecordRecoveredIsNotDegraded(t *testing.T) {
	c := newRecordCase(t, errors.New("etcdserver: request timed out"))
	c.process(t, work.Retry)
	c.rec.err = nil
	c.clk.Step(time.Second)
	c.process(t, work.Done)
	if n := len(c.events.Events); n != 0 {
		t.Errorf("%d events, want none", n)
	}
	for _, r := range []string{RecordDegradedFull, RecordDegradedError} {
		if v := testutil.ToFloat64(c.metrics.RecordDegraded.WithLabelValues(r)); v != 0 {
			t.Errorf("degraded{%s} = %v, want 0", r, v)
		}
	}
}

// TestOrphanRecordOnlyWhenNeeded: an owner is recorded when a dependent of it was seen, or
// when it was deleted within the record window of its creation (its first dependent may be in
// flight), or when its creation time is unknown; an older owner without any dependent seen is
// not, and costs no more requests than without a record (the GET that read its creation time
// is the one the finalizer's removal starts from).
func TestOrphanRecordOnlyWhenNeeded(t *testing.T) {
	deleted := clienttest.DeletedAt.Time
	tests := []struct {
		name    string
		created time.Time // zero: unknown
		deps    bool
		record  bool
	}{
		{name: "dependent seen, old owner", created: deleted.Add(-time.Hour), deps: true, record: true},
		{name: "no dependent, young owner", created: deleted.Add(-9 * time.Minute), record: true},
		{name: "no dependent, creation unknown", record: true},
		{name: "no dependent, old owner", created: deleted.Add(-10 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owner := widget("owner", "u-owner", "5", true, []string{metav1.FinalizerOrphanDependents})
			owner.CreationTimestamp = metav1.NewTime(tt.created)
			fake := newFakeClient(owner, widget("d1", "u-d1", "2", false, nil, refTo("owner", "u-owner")))
			view := newFakeView()
			view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
			if tt.deps {
				view.deps["u-owner"] = [][]graph.Ref{{wref("d1", "u-d1")}}
			}
			rec := &fakeRecords{fake: fake}
			m := NewMetrics(prometheus.NewRegistry())
			p := newTestProcessor(t, view, fake, Options{OrphanRecord: rec, RecordWindow: 10 * time.Minute, Metrics: m})
			if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
				t.Fatalf("process() = %v, %v; want done", got, err)
			}
			if recorded := len(rec.records) == 1; recorded != tt.record {
				t.Errorf("recorded: %t, want %t", recorded, tt.record)
			}
			if v := testutil.ToFloat64(m.RecordSkipped); v != map[bool]float64{true: 0, false: 1}[tt.record] {
				t.Errorf("skipped = %v", v)
			}
			got := actions(fake)
			gets := 0
			for _, a := range got {
				if strings.HasPrefix(a, "GET widgets.v1.example.com ns/owner") {
					gets++
				}
			}
			if gets != 1 {
				t.Errorf("%d GETs of the owner, want 1: %q", gets, got)
			}
			if f := live(t, fake, "owner").Finalizers; len(f) != 0 {
				t.Errorf("owner finalizers = %q, want none", f)
			}
		})
	}
}

// TestOrphanRecordWindowZeroRecordsAll: without a window every owner is recorded, and nothing
// is read for it.
func TestOrphanRecordWindowZeroRecordsAll(t *testing.T) {
	owner := widget("owner", "u-owner", "5", true, []string{metav1.FinalizerOrphanDependents})
	owner.CreationTimestamp = metav1.NewTime(clienttest.DeletedAt.Add(-time.Hour))
	fake := newFakeClient(owner)
	view := newFakeView()
	view.nodes["u-owner"] = ownerNode("owner", "u-owner", graph.FinalizerOrphan)
	rec := &fakeRecords{fake: fake}
	p := newTestProcessor(t, view, fake, Options{OrphanRecord: rec})
	if got, err := p.process(context.Background(), "u-owner"); got != work.Done || err != nil {
		t.Fatalf("process() = %v, %v; want done", got, err)
	}
	if len(rec.records) != 1 || len(rec.before[0]) != 0 {
		t.Errorf("records %v after %q; want the owner, before any request", rec.records, rec.before)
	}
}
