package gc

import (
	"github.com/prometheus/client_golang/prometheus"
)

// MetricsNamespace prefixes every cascade metric.
const MetricsNamespace = "cascade"

// Metrics are the collector's own metrics, registered on an injected registerer so tests can
// use a fresh registry.
type Metrics struct {
	// ResourceWatched is 1 for each resource (group, version, resource) cascade watches.
	ResourceWatched *prometheus.GaugeVec
	// DiscoveryErrors counts failed discovery rounds and failed API groups.
	DiscoveryErrors *prometheus.CounterVec
}

// NewMetrics creates and registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ResourceWatched: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: MetricsNamespace,
			Name:      "resource_watched",
			Help:      "1 for every deletable resource cascade watches (preferred version).",
		}, []string{"group", "version", "resource"}),
		DiscoveryErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace,
			Name:      "discovery_errors_total",
			Help:      "Discovery failures: group_version is the API group that failed, or \"all\" when discovery failed as a whole.",
		}, []string{"group_version"}),
	}
	reg.MustRegister(m.ResourceWatched, m.DiscoveryErrors)
	return m
}
