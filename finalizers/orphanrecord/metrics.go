package orphanrecord

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the store's metrics. A nil *Metrics records nothing.
type Metrics struct {
	// Entries is the number of owners the ConfigMap held after the last read or write.
	Entries prometheus.Gauge
	// Bytes is the ConfigMap's data size after the last read or write.
	Bytes prometheus.Gauge
	// Writes counts owners written, by result (ok, error, full).
	Writes *prometheus.CounterVec
	// Malformed counts entries skipped because they could not be parsed.
	Malformed prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Entries: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "cascade",
			Name:      "orphan_record_entries",
			Help:      "Owners deleted with the orphan policy that the orphan record ConfigMap held after cascade last read or wrote it.",
		}),
		Bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "cascade",
			Name:      "orphan_record_bytes",
			Help:      "Size of the orphan record ConfigMap's data (keys and values, as kube-apiserver counts its 1 MiB limit) after cascade last read or wrote it; owners that would take it past 786432 (768 KiB) are not recorded (result=\"full\").",
		}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "cascade",
			Name:      "orphan_record_writes_total",
			Help:      "Owners written to the orphan record before their orphan finalizer was removed, by result: ok; error (the write failed: retried for a bounded time, then the finalizer is removed without a record); full (the entry would not fit under the record's size bound, no request made: the finalizer is removed at once without a record). Owners removed without a record are counted in cascade_orphan_record_degraded_total.",
		}, []string{"result"}),
		Malformed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "cascade",
			Name:      "orphan_record_malformed_total",
			Help:      "Entries of the orphan record skipped because they could not be parsed.",
		}),
	}
	for _, r := range []string{"ok", "error", "full"} {
		m.Writes.WithLabelValues(r)
	}
	reg.MustRegister(m.Entries, m.Bytes, m.Writes, m.Malformed)
	return m
}

func (m *Metrics) written(n int, err error) {
	if n == 0 {
		return
	}
	result := "ok"
	switch {
	case errors.Is(err, ErrFull):
		result = "full"
	case err != nil:
		result = "error"
	}
	m.Writes.WithLabelValues(result).Add(float64(n))
}

func (m *Metrics) size(entries, bytes int) {
	m.Entries.Set(float64(entries))
	m.Bytes.Set(float64(bytes))
}

func (m *Metrics) malformed() {
	m.Malformed.Inc()
}
