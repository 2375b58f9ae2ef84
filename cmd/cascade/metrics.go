package main

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cascade-gc/cascade/finalizers"
	"github.com/cascade-gc/cascade/finalizers/orphanrecord"
	"github.com/cascade-gc/cascade/finalizers/stamp"
	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/internal/work"
	"github.com/cascade-gc/cascade/policy/watch"
)

// metricSet is every metric cascade registers up front, one constructor per package, all on
// one injected registerer. (The scrape-time collector of the graph is registered by gc.New,
// cascade_dry_run_actions_total by client.NewDryRun, in --dry-run only, and
// cascade_companion_refused_writes_total by client.Edge.Companion, in --mode=companion only.)
// docs/metrics.md is generated from it (TestMetricsDoc).
type metricSet struct {
	requests   *prometheus.CounterVec
	rest       *client.RESTMetrics
	queues     *work.QueueMetrics
	work       *work.Metrics
	gc         *gc.Metrics
	finalizers *finalizers.Metrics
	policy     *watch.Metrics
	defaults   *stamp.Metrics
	features   *features.Set

	orphanRecord *orphanrecord.Metrics
}

func newMetricSet(reg prometheus.Registerer) metricSet {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: gc.MetricsNamespace,
		Name:      "api_requests_total",
		Help:      "Requests cascade sent to the API server, by verb and response code.",
	}, []string{"verb", "code"})
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: gc.MetricsNamespace,
		Name:      "build_info",
		Help:      "Always 1: the version, the commit (revision) and the Go version cascade was built with.",
	}, []string{"version", "revision", "goversion"})
	buildInfo.WithLabelValues(version, commit, runtime.Version()).Set(1)
	reg.MustRegister(requests, buildInfo)
	return metricSet{
		requests:   requests,
		rest:       client.NewRESTMetrics(reg),
		queues:     work.NewQueueMetrics(reg),
		work:       work.NewMetrics(reg),
		gc:         gc.NewMetrics(reg),
		finalizers: finalizers.NewMetrics(reg),
		policy:     watch.NewMetrics(reg),
		defaults:   stamp.NewMetrics(reg),
		features:   features.New(reg),

		orphanRecord: orphanrecord.NewMetrics(reg),
	}
}
