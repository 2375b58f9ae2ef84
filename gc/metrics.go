package gc

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricsNamespace prefixes every cascade metric.
const MetricsNamespace = "cascade"

// Metrics are the collector's own metrics, registered on an injected registerer so tests can
// use a fresh registry. Graph sizes are read from the graph at scrape time (graphCollector).
type Metrics struct {
	reg prometheus.Registerer

	// ResourceWatched is 1 for each resource (group, version, resource) cascade watches.
	ResourceWatched *prometheus.GaugeVec
	// DiscoveryErrors counts failed discovery rounds and failed API groups.
	DiscoveryErrors *prometheus.CounterVec
	// Collected counts successful collection actions: action="delete" or "remove_refs".
	Collected *prometheus.CounterVec
	// OwnerVerifications counts live owner checks by result (present, absent, cached_absent,
	// error, unreferenced, gone_kind).
	OwnerVerifications *prometheus.CounterVec
	// RESTMappingErrors counts owner references whose kind had no REST mapping (retried).
	RESTMappingErrors prometheus.Counter
	// InvalidNamespaceRefs counts OwnerRefInvalidNamespace reports.
	InvalidNamespaceRefs prometheus.Counter
	// GraphSyncSeconds is the time from start to the first complete graph.
	GraphSyncSeconds prometheus.Gauge
	// CollectionDuration is the collection latency per propagation (latency.go).
	CollectionDuration *prometheus.HistogramVec
	// WatchEventsTooLarge counts list and watch streams ended by an object above the decoder's
	// bound (16 MiB): the resource lists again.
	WatchEventsTooLarge prometheus.Counter
}

// NewMetrics creates and registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		ResourceWatched: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: MetricsNamespace,
			Name:      "resource_watched",
			Help:      "1 for every deletable resource cascade watches (preferred version); the single cluster's only (fleet members export cascade_member_* instead).",
		}, []string{"group", "version", "resource"}),
		DiscoveryErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace,
			Name:      "discovery_errors_total",
			Help:      "Discovery failures: group_version is the API group that failed, or \"all\" when discovery failed as a whole; in fleet mode, a member's failed groups are counted under \"fleet-member\".",
		}, []string{"group_version"}),
		Collected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace,
			Name:      "collected_total",
			Help:      "Garbage collected: action=\"delete\" (dependent deleted) or \"remove_refs\" (references to gone owners removed).",
		}, []string{"action"}),
		OwnerVerifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace,
			Name:      "owner_verifications_total",
			Help:      "Live checks of owners never observed, by result: present, absent, cached_absent, error, unreferenced (dropped: no reference makes the claim any more), gone_kind (absent: the owner's kind was served by a CRD cascade saw deleted, and nothing serves it now).",
		}, []string{"result"}),
		RESTMappingErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: MetricsNamespace,
			Name:      "rest_mapping_errors_total",
			Help:      "Owner references whose apiVersion and kind had no REST mapping; their dependents are kept and retried with backoff.",
		}),
		InvalidNamespaceRefs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: MetricsNamespace,
			Name:      "invalid_namespace_refs_total",
			Help:      "References to a namespaced owner from another namespace (OwnerRefInvalidNamespace events).",
		}),
		GraphSyncSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: MetricsNamespace,
			Name:      "graph_sync_seconds",
			Help:      "Seconds from start until every watched resource's initial list was in the graph.",
		}),
		CollectionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: MetricsNamespace,
			Name:      "collection_duration_seconds",
			Help:      "From an owner's deletion observed to its last dependent's deletion observed (Background), or to the owner gone (Foreground, Orphan), by propagation.",
			Buckets:   prometheus.ExponentialBuckets(0.01, 2, 16), // 10 ms .. 5.5 min
		}, []string{"propagation"}),
		WatchEventsTooLarge: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: MetricsNamespace,
			Name:      "watch_events_too_large_total",
			Help:      "Watches and streamed lists ended by an object larger than 16 MiB (the decoder's bound): the resource is listed again after a backoff, and counts as unsynced meanwhile. In fleet mode, every member's; the log names the member and the resource.",
		}),
	}
	reg.MustRegister(m.ResourceWatched, m.DiscoveryErrors, m.Collected, m.OwnerVerifications,
		m.RESTMappingErrors, m.InvalidNamespaceRefs, m.GraphSyncSeconds, m.CollectionDuration, m.WatchEventsTooLarge)
	return m
}

// registerGraph adds the scrape-time collector of the controller's graph and monitors.
func (m *Metrics) registerGraph(c *Controller) {
	m.reg.MustRegister(&graphCollector{c: c})
}

var (
	descNodes = prometheus.NewDesc(MetricsNamespace+"_graph_nodes",
		"Nodes in the dependency graph by state: observed, virtual (referenced, never observed), absent (deleted, still referenced).", []string{"state"}, nil)
	descNodesPerKind = prometheus.NewDesc(MetricsNamespace+"_graph_objects",
		"Observed objects in the dependency graph per apiVersion and kind.", []string{"api_version", "kind"}, nil)
	descWaiting = prometheus.NewDesc(MetricsNamespace+"_owners_waiting",
		"Owners being deleted with a GC finalizer, by finalizer (orphan, foregroundDeletion).", []string{"finalizer"}, nil)
	descMonitors = prometheus.NewDesc(MetricsNamespace+"_monitors",
		"Resource watches by state: running, synced (initial list in the graph).", []string{"state"}, nil)
	descLeader = prometheus.NewDesc(MetricsNamespace+"_leader",
		"1 when this replica acts (holds the Lease, or runs without leader election), 0 on a standby.", nil, nil)
	descUnsynced = prometheus.NewDesc(MetricsNamespace+"_resource_unsynced",
		"1 for each watched resource whose view is incomplete: its initial list never arrived, or listing or watching it fails (decisions that need it wait).", []string{"group", "version", "resource"}, nil)
)

// graphCollector reads the graph at scrape time, so no gauge is updated on the hot path.
type graphCollector struct{ c *Controller }

func (g *graphCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descNodes
	ch <- descNodesPerKind
	ch <- descWaiting
	ch <- descMonitors
	ch <- descUnsynced
	ch <- descLeader
}

func (g *graphCollector) Collect(ch chan<- prometheus.Metric) {
	st := g.c.GraphStats()
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(st.Observed), "observed")
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(st.Virtual), "virtual")
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(st.Absent), "absent")
	for key, n := range st.PerResource {
		apiVersion, kind := splitKindKey(key)
		ch <- prometheus.MustNewConstMetric(descNodesPerKind, prometheus.GaugeValue, float64(n), apiVersion, kind)
	}
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(st.WaitingOrphan), "orphan")
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(st.WaitingForeground), "foregroundDeletion")
	total, synced := g.c.monitors.counts()
	ch <- prometheus.MustNewConstMetric(descMonitors, prometheus.GaugeValue, float64(total), "running")
	ch <- prometheus.MustNewConstMetric(descMonitors, prometheus.GaugeValue, float64(synced), "synced")
	leader := 0.0
	if g.c.leading.Load() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader)
	for _, u := range g.c.monitors.unsynced() {
		gvr := u.Resource.GVR
		ch <- prometheus.MustNewConstMetric(descUnsynced, prometheus.GaugeValue, 1, gvr.Group, gvr.Version, gvr.Resource)
	}
}

// splitKindKey splits the graph's "<apiVersion>, Kind=<kind>" key.
func splitKindKey(key string) (apiVersion, kind string) {
	apiVersion, kind, _ = strings.Cut(key, ", Kind=")
	return apiVersion, kind
}
