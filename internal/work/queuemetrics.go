package work

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// QueueMetrics implements client-go's workqueue.MetricsProvider with Prometheus metrics
// labelled by queue name (attempt_to_delete, verify_owner, finalize_owner). Queue duration
// plus work duration is the collection latency of one object. Install it once with
// workqueue.SetProvider before any queue is created.
type QueueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

// NewQueueMetrics creates and registers the work queue metrics on reg.
func NewQueueMetrics(reg prometheus.Registerer) *QueueMetrics {
	const sub = "workqueue"
	buckets := prometheus.ExponentialBuckets(0.001, 2, 16) // 1 ms .. 33 s
	q := &QueueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "depth",
			Help: "Items waiting in the work queue."}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration_seconds."}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "longest_running_processor_seconds",
			Help: "Seconds the longest running item has been processed."}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "adds_total",
			Help: "Items added to the work queue."}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "retries_total",
			Help: "Items re-added with backoff."}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "queue_duration_seconds",
			Help: "Seconds an item waits in the queue before a worker takes it.", Buckets: buckets}, []string{"name"}),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: sub, Name: "work_duration_seconds",
			Help: "Seconds a worker spends on one item (decision and API calls).", Buckets: buckets}, []string{"name"}),
	}
	reg.MustRegister(q.depth, q.unfinished, q.longest, q.adds, q.retries, q.latency, q.work)
	return q
}

var _ workqueue.MetricsProvider = (*QueueMetrics)(nil)

func (q *QueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}
func (q *QueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}
func (q *QueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}
func (q *QueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.work.WithLabelValues(name)
}
func (q *QueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}
func (q *QueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}
func (q *QueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}
