package finalizers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cascade-gc/cascade/gc"
)

// Metrics are the processor's own metrics, registered on an injected registerer. A nil
// *Metrics records nothing.
type Metrics struct {
	// FinalizersRemoved counts GC finalizers cascade removed, by finalizer.
	FinalizersRemoved *prometheus.CounterVec
	// OrphanedDependents counts owner references removed from dependents by orphaning.
	OrphanedDependents prometheus.Counter
	// Errors counts failed attempts (retried with backoff), by finalizer.
	Errors *prometheus.CounterVec
	// BlockedByUnsynced counts foreground owners found waiting on a blocking dependent of a
	// resource whose view is incomplete, by resource (once per owner and resource).
	BlockedByUnsynced *prometheus.CounterVec
	// RecordDegraded counts owners whose orphan finalizer was removed without recording them,
	// by reason (RecordDegradedFull, RecordDegradedError), and leaders that collect without the
	// record because its load kept failing (RecordDegradedLoad).
	RecordDegraded *prometheus.CounterVec
	// RecordSkipped counts owners not recorded because their dependents cannot need it.
	RecordSkipped prometheus.Counter
	// OldestWaiting is how long the oldest owner being deleted with each GC finalizer has
	// waited (since this process found it waiting), updated every resync period.
	OldestWaiting *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		FinalizersRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: gc.MetricsNamespace,
			Name:      "finalizers_removed_total",
			Help:      "GC finalizers removed from owners being deleted, by finalizer (orphan, foregroundDeletion).",
		}, []string{"finalizer"}),
		OrphanedDependents: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: gc.MetricsNamespace,
			Name:      "orphaned_dependents_total",
			Help:      "Owner references removed from dependents of owners deleted with the orphan policy.",
		}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: gc.MetricsNamespace,
			Name:      "finalizer_errors_total",
			Help:      "Failed attempts to finish an owner's GC finalizer (retried with backoff), by finalizer.",
		}, []string{"finalizer"}),
		BlockedByUnsynced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: gc.MetricsNamespace,
			Name:      "foreground_blocked_by_unsynced_total",
			Help:      "Owners being deleted in the foreground found waiting on a blocking dependent of a resource cascade cannot list or watch, by resource (once per owner).",
		}, []string{"resource"}),
		RecordDegraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: gc.MetricsNamespace,
			Name:      "orphan_record_degraded_total",
			Help:      "Owners deleted with the orphan policy whose orphan finalizer was removed without recording them in the orphan record, by reason: full (at once), error (the write kept failing for 20s); and load: a leader whose load of the record kept failing for 20s collects without it (counted once per leadership). Protection across a failover is reduced for each: a dependent that gained its reference just before the owner's deletion, not yet seen by cascade, may be collected by a new leader. Each also gets a Warning Event OrphanRecordUnavailable (on the owner; for load, on the record's ConfigMap).",
		}, []string{"reason"}),
		RecordSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: gc.MetricsNamespace,
			Name:      "orphan_record_skipped_total",
			Help:      "Owners deleted with the orphan policy that were not recorded in the orphan record because no dependent of theirs was seen and they were deleted more than --orphan-record-ttl after their creation.",
		}),
		OldestWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: gc.MetricsNamespace,
			Name:      "oldest_waiting_owner_seconds",
			Help:      "Seconds the oldest owner being deleted with each GC finalizer (orphan, foregroundDeletion) has waited, since cascade found it waiting; 0 when none waits. Updated every --finalizer-resync-period.",
		}, []string{"finalizer"}),
	}
	for _, r := range []string{RecordDegradedFull, RecordDegradedError, RecordDegradedLoad} {
		m.RecordDegraded.WithLabelValues(r)
	}
	reg.MustRegister(m.FinalizersRemoved, m.OrphanedDependents, m.Errors, m.BlockedByUnsynced, m.RecordDegraded, m.RecordSkipped, m.OldestWaiting)
	return m
}

func (m *Metrics) removed(finalizer string) {
	m.FinalizersRemoved.WithLabelValues(finalizer).Inc()
}

func (m *Metrics) orphaned(n int) {
	m.OrphanedDependents.Add(float64(n))
}

func (m *Metrics) failed(finalizer string) {
	m.Errors.WithLabelValues(finalizer).Inc()
}

func (m *Metrics) blockedByUnsynced(resource string) {
	m.BlockedByUnsynced.WithLabelValues(resource).Inc()
}

func (m *Metrics) recordDegraded(reason string) {
	m.RecordDegraded.WithLabelValues(reason).Inc()
}

func (m *Metrics) recordSkipped() {
	m.RecordSkipped.Inc()
}
