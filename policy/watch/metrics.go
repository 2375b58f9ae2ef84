package watch

import "github.com/prometheus/client_golang/prometheus"

// metricsNamespace prefixes every cascade metric (gc.MetricsNamespace).
const metricsNamespace = "cascade"

// Metrics are the policy watcher's metrics. A nil *Metrics records nothing.
type Metrics struct {
	// Generation counts the policies put in force: 0 is the built-in one at start; every
	// accepted version of the ConfigMap, and its removal, adds one.
	Generation prometheus.Gauge
	// LoadErrors counts rejected versions of the policy ConfigMap.
	LoadErrors prometheus.Counter
	// LastLoadSuccess is 1 when the last version of the ConfigMap (or its absence) was put in
	// force, 0 when it was rejected and an older policy stays in force.
	LastLoadSuccess prometheus.Gauge
	// RulesUnenforced is the number of rules of the policy in force that cascade does not
	// enforce in its mode: in companion mode its collect rules; always 0 in collector mode.
	RulesUnenforced prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Name:      "policy_generation",
			Help:      "Policies put in force since start: 0 is the built-in policy; each accepted version of the policy ConfigMap, and its removal, adds one.",
		}),
		LoadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Name:      "policy_load_errors_total",
			Help:      "Versions of the policy ConfigMap rejected (decoding or validation errors); the last good policy stays in force.",
		}),
		LastLoadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Name:      "policy_last_load_success",
			Help:      "1 when the last version of the policy ConfigMap (or its absence: built-in policy) is in force, 0 when it was rejected.",
		}),
		RulesUnenforced: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Name:      "policy_rules_unenforced",
			Help:      "Rules of the policy in force that cascade does not enforce in its --mode: in companion mode its collect rules (Never, After), which need the collector (the PolicyRulesUnenforced Event on the policy ConfigMap names them); 0 in collector mode.",
		}),
	}
	m.LastLoadSuccess.Set(1)
	reg.MustRegister(m.Generation, m.LoadErrors, m.LastLoadSuccess, m.RulesUnenforced)
	return m
}
