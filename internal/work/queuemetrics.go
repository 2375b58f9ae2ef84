package work

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// QueueMetrics are the work queues' metrics, labelled by queue name (attempt_to_delete,
// verify_owner, finalize_owner, ...), with client-go's workqueue metric names under cascade_.
// Queue duration plus work duration is the collection latency of one object. Install them once
// with SetQueueMetrics before any queue is created; a fleet's members' queues of one name
// count into one series. The unfinished-work gauges are computed when scraped, over the queues
// served at that moment: no queue keeps a goroutine to update them.
type QueueMetrics struct {
	depth            *prometheus.GaugeVec
	adds, retries    *prometheus.CounterVec
	latency, work    *prometheus.HistogramVec
	unfinished, long *prometheus.Desc

	served tracked[unfinishedSource] // the queues being served (Queue.Run)
}

// unfinishedSource is a queue as the unfinished-work gauges read it.
type unfinishedSource interface {
	Name() string
	unfinished() (total, longest float64)
}

// queueSeries are one queue's series.
type queueSeries struct {
	depth         prometheus.Gauge
	adds, retries prometheus.Counter
	latency, work prometheus.Observer
}

// NewQueueMetrics creates and registers the work queue metrics on reg.
func NewQueueMetrics(reg prometheus.Registerer) *QueueMetrics {
	const sub = "workqueue"
	buckets := prometheus.ExponentialBuckets(0.001, 2, 16) // 1 ms .. 33 s
	q := &QueueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "depth",
			Help: "Items waiting in the work queue."}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "adds_total",
			Help: "Items added to the work queue."}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "retries_total",
			Help: "Items re-added with backoff."}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "queue_duration_seconds",
			Help: "Seconds an item waits in the queue before a worker takes it.", Buckets: buckets}, []string{"name"}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "work_duration_seconds",
			Help: "Seconds a worker spends on one item (decision and API calls).", Buckets: buckets}, []string{"name"}),
		unfinished: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, sub, "unfinished_work_seconds"),
			"Seconds of work in progress not yet observed by work_duration_seconds.", []string{"name"}, nil),
		long: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, sub, "longest_running_processor_seconds"),
			"Seconds the longest running item has been processed.", []string{"name"}, nil),
	}
	reg.MustRegister(q.depth, q.adds, q.retries, q.latency, q.work, q)
	return q
}

// series returns the series of the queue name.
func (q *QueueMetrics) series(name string) *queueSeries {
	return &queueSeries{
		depth: q.depth.WithLabelValues(name), adds: q.adds.WithLabelValues(name), retries: q.retries.WithLabelValues(name),
		latency: q.latency.WithLabelValues(name), work: q.work.WithLabelValues(name),
	}
}

func (q *QueueMetrics) serve(s unfinishedSource)       { q.served.add(s) }
func (q *QueueMetrics) stopServing(s unfinishedSource) { q.served.remove(s) }

// Describe implements prometheus.Collector for the unfinished-work gauges.
func (q *QueueMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.unfinished
	ch <- q.long
}

// Collect implements prometheus.Collector: per queue name, the seconds of work in progress
// summed over the queues of that name served now, and the longest of them.
func (q *QueueMetrics) Collect(ch chan<- prometheus.Metric) {
	served := q.served.all()
	type sums struct{ total, longest float64 }
	by := map[string]*sums{}
	var names []string
	for _, s := range served {
		total, longest := s.unfinished()
		n := s.Name()
		if by[n] == nil {
			by[n] = &sums{}
			names = append(names, n)
		}
		by[n].total += total
		by[n].longest = max(by[n].longest, longest)
	}
	for _, n := range names {
		ch <- prometheus.MustNewConstMetric(q.unfinished, prometheus.GaugeValue, by[n].total, n)
		ch <- prometheus.MustNewConstMetric(q.long, prometheus.GaugeValue, by[n].longest, n)
	}
}

// installed are the metrics every queue created from now on counts into (SetQueueMetrics).
var installed atomic.Pointer[QueueMetrics]

// SetQueueMetrics makes every queue created from now on count into m (once, before any queue
// is created, as client-go's workqueue.SetProvider; nil: no metrics).
func SetQueueMetrics(m *QueueMetrics) { installed.Store(m) }
