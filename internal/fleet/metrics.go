package fleet

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cascade-gc/cascade/gc"
)

// Collectors are the fleet's series. One is read at scrape time: at most 4 series per member
// (removed with it, as they are read from the running members): up, objects in its graph,
// owners waiting on a GC finalizer, its delete queue's depth; and, fleet-wide, the members by
// state, the connections and the shards. The others count what became of the members that left
// and the members restarted alone.
func (f *Fleet) Collectors() []prometheus.Collector {
	return []prometheus.Collector{collector{f}, f.cleanups}
}

type collector struct{ f *Fleet }

var (
	descMembers = prometheus.NewDesc(gc.MetricsNamespace+"_fleet_members",
		"Fleet mode: members by state (up: its collector runs and its graph synced; down: not, see /readyz for why).", []string{"state"}, nil)
	descMemberUp = prometheus.NewDesc(gc.MetricsNamespace+"_member_up",
		"Fleet mode: 1 when the member's collector runs and its graph synced, else 0.", []string{"member"}, nil)
	descMemberObjects = prometheus.NewDesc(gc.MetricsNamespace+"_member_graph_objects",
		"Fleet mode: observed objects in the member's dependency graph.", []string{"member"}, nil)
	descMemberWaiting = prometheus.NewDesc(gc.MetricsNamespace+"_member_owners_waiting",
		"Fleet mode: the member's owners being deleted with a GC finalizer (orphan and foregroundDeletion).", []string{"member"}, nil)
	descMemberQueue = prometheus.NewDesc(gc.MetricsNamespace+"_member_delete_queue_depth",
		"Fleet mode: dependents waiting in the member's delete queue.", []string{"member"}, nil)
	descFleetConns = prometheus.NewDesc(gc.MetricsNamespace+"_fleet_connections",
		"Fleet mode: connections open to the members' API servers (each member has its own).", nil, nil)
	descShardsHeld = prometheus.NewDesc(gc.MetricsNamespace+"_fleet_shards_held",
		"Sharded fleet mode (--fleet-shards above 1): the shards whose Lease this replica holds.", nil, nil)
	descReplicas = prometheus.NewDesc(gc.MetricsNamespace+"_fleet_replicas",
		"Sharded fleet mode: the live replicas this replica sees (their own Leases), which set its fair share of the shards.", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMembers, descMemberUp, descMemberObjects, descMemberWaiting, descMemberQueue, descFleetConns, descShardsHeld, descReplicas} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	up, down := 0, 0
	for _, s := range c.f.States() {
		v := 0.0
		if s.Up {
			v = 1
			up++
		} else {
			down++
		}
		ch <- prometheus.MustNewConstMetric(descMemberUp, prometheus.GaugeValue, v, s.Name)
		ctrl, ok := c.f.Controller(s.Name)
		if !ok {
			continue
		}
		st := ctrl.GraphStats()
		ch <- prometheus.MustNewConstMetric(descMemberObjects, prometheus.GaugeValue, float64(st.Observed), s.Name)
		ch <- prometheus.MustNewConstMetric(descMemberWaiting, prometheus.GaugeValue, float64(st.WaitingOrphan+st.WaitingForeground), s.Name)
		ch <- prometheus.MustNewConstMetric(descMemberQueue, prometheus.GaugeValue, float64(ctrl.DeleteQueueDepth()), s.Name)
	}
	ch <- prometheus.MustNewConstMetric(descFleetConns, prometheus.GaugeValue, float64(c.f.Connections()))
	if c.f.shards != nil {
		ch <- prometheus.MustNewConstMetric(descShardsHeld, prometheus.GaugeValue, float64(len(c.f.shards.Held())))
		ch <- prometheus.MustNewConstMetric(descReplicas, prometheus.GaugeValue, float64(c.f.shards.LiveReplicas()))
	}
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(up), "up")
	ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(down), "down")
}
