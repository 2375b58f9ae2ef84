package stamp

import "github.com/prometheus/client_golang/prometheus"

const metricsNamespace = "cascade"

// Metrics are the Applier's metrics. A nil *Metrics records nothing.
type Metrics struct {
	// Changes counts objects whose stamp the pass changed, by action (stamped, unstamped,
	// replaced).
	Changes *prometheus.CounterVec
	// Pending is the number of objects the last pass found to stamp or unstamp that are not
	// done yet.
	Pending prometheus.Gauge
	// AdmissionSynced is 1 when the admission objects match the policy in force, 0 when the last
	// attempt to make them so failed or the server serves no admission policy while a rule
	// wants one.
	AdmissionSynced prometheus.Gauge
	// ForeignAdmission is the number of admission objects of cascade's name, at the version in
	// use, that are not labelled as cascade's: left alone, and in the way of the defaults.
	ForeignAdmission prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Name:      "default_propagation_changes_total",
			Help:      "Objects whose default-propagation stamp (finalizer and cascade.dev/default-propagation annotation) cascade changed, by action: stamped, unstamped, replaced.",
		}, []string{"action"}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Name:      "default_propagation_pending",
			Help:      "Objects the default-propagation pass found to stamp or unstamp and has not done yet.",
		}),
		AdmissionSynced: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Name:      "default_propagation_admission_synced",
			Help:      "1 when the MutatingAdmissionPolicy and binding that stamp defaults at creation match the policy in force, 0 when the last attempt to make them so failed, or when the API server serves no MutatingAdmissionPolicy while a rule stamps (cascade_feature_in_use{feature=\"admission_policy\",level=\"none\"}: the stamping pass alone applies defaults).",
		}),
		ForeignAdmission: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Name:      "default_propagation_foreign_admission_objects",
			Help:      "MutatingAdmissionPolicy and binding objects named cascade-default-propagation, at the version in use, without the label app.kubernetes.io/managed-by=cascade: someone else's, which cascade neither applies over nor deletes (the defaults are then stamped by the pass alone).",
		}),
	}
	for _, a := range []string{actionStamped, actionUnstamped, actionReplaced} {
		m.Changes.WithLabelValues(a)
	}
	reg.MustRegister(m.Changes, m.Pending, m.AdmissionSynced, m.ForeignAdmission)
	return m
}
