//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// BenchmarkOrphan: one owner with 5,000 dependent ConfigMaps deleted with the orphan policy;
// cascade (unthrottled client, benchWorkers workers) removes the owner's reference from every
// dependent, then the orphan finalizer. Next to it, the raw rate: the benchmark's own client
// sends the same strategic merge patches to 5,000 ConfigMaps with the same concurrency.
// Reports objects/s (dependents per second from the delete until the finalizer is removed),
// API requests per dependent (kube-apiserver's apiserver_request_total on configmaps, the
// benchmark's own DELETE subtracted), the raw rate and the ratio.
func BenchmarkOrphan(b *testing.B) {
	total := 5000
	if os.Getenv("QUICK") != "" {
		total = 1000
	}
	cs := suite.Clients(b)
	for range b.N {
		ns := cs.NewNamespace(b)
		c := suite.StartCascade(b, "--kube-api-qps=0", "--workers="+strconv.Itoa(benchWorkers), "--enable-profiling")
		// Counted from once cascade has finished what earlier tests and iterations left, so that
		// neither its graph's ConfigMaps nor the requests measured include theirs.
		base, _ := settled(b, c).Value(cmObjectsSample)
		owner := cs.CreateCM(b, ns, "owner")
		cs.CreateCMs(b, ns, "dep", total, framework.CMRef(owner))
		framework.WaitForMetric(b, c, cmObjectsSample, base+float64(total+1), time.Minute)

		removed := framework.MetricValue(b, c, orphanRemovedSample)
		before := framework.APIServerRequests(b, cs)
		stopProfile := profileCascade(b, c, "orphan")
		cpu := startCPU(c.Pid(), suite.CP.APIServer.Pid())
		start := time.Now()
		cs.DeleteCM(b, ns, "owner", metav1.DeletePropagationOrphan)
		framework.WaitForMetric(b, c, orphanRemovedSample, removed+1, 10*time.Minute)
		elapsed := time.Since(start)
		used := cpu()
		stopProfile()
		after := framework.APIServerRequests(b, cs)
		reqs, detail := framework.ObjectRequests(before, after, "configmaps")
		reqs-- // the benchmark's DELETE of the owner
		_ = c.Stop(10 * time.Second)

		list, err := cs.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		kept := 0
		for _, cm := range list.Items {
			if cm.Name == "owner" {
				b.Fatal("the owner is still there after its finalizer was removed")
			}
			if len(cm.OwnerReferences) > 0 && cm.OwnerReferences[0].UID == owner.UID {
				b.Fatalf("%s still references the owner", cm.Name)
			}
			if len(cm.Name) > 4 && cm.Name[:4] == "dep-" {
				kept++
			}
		}
		if kept != total {
			b.Fatalf("%d of %d orphaned dependents left: none may be deleted", kept, total)
		}
		rate := float64(total) / elapsed.Seconds()

		// Raw: the same patch on as many objects, by the benchmark's client. cascade is stopped,
		// so nothing else touches them.
		const fakeOwner = types.UID("00000000-0000-0000-0000-00000000bee5")
		cs.CreateCMs(b, ns, "raw", total, framework.RefTo("v1", "ConfigMap", "raw-owner", fakeOwner, false))
		rawCPU := startCPU(suite.CP.APIServer.Pid())
		rawElapsed := rawParallel(b, total, func(i int) error {
			name := fmt.Sprintf("raw-%d", i)
			patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, fakeOwner)
			_, err := cs.Kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		})
		rawUsed := rawCPU()
		rawRate := float64(total) / rawElapsed.Seconds()
		if err := cs.Kube.CoreV1().ConfigMaps(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			b.Logf("cleanup: %v", err)
		}

		reportFinalizerBench(b, "orphan", fmt.Sprintf("1×%d", total), total, rate, elapsed, reqs, detail, rawRate, rawElapsed)
		reportCPU(b, total, used, rawUsed)
	}
}

// BenchmarkForeground: 10 owners with 500 dependent ConfigMaps each (blockOwnerDeletion: true)
// deleted in the foreground; cascade deletes every dependent and then removes each owner's
// foregroundDeletion finalizer. Next to it, the raw rate: the benchmark's own client deletes
// 5,000 ConfigMaps with the same concurrency. Metrics as in BenchmarkOrphan (the benchmark's
// 10 owner DELETEs subtracted).
func BenchmarkForeground(b *testing.B) {
	owners, perOwner := 10, 500
	if os.Getenv("QUICK") != "" {
		perOwner = 100
	}
	total := owners * perOwner
	cs := suite.Clients(b)
	for range b.N {
		ns := cs.NewNamespace(b)
		c := suite.StartCascade(b, "--kube-api-qps=0", "--workers="+strconv.Itoa(benchWorkers), "--enable-profiling")
		base, _ := settled(b, c).Value(cmObjectsSample) // as in BenchmarkOrphan
		names := make([]string, owners)
		for i := range owners {
			o := cs.CreateCM(b, ns, fmt.Sprintf("owner-%d", i))
			names[i] = o.Name
			cs.CreateCMs(b, ns, fmt.Sprintf("dep-%d", i), perOwner, framework.RefTo("v1", "ConfigMap", o.Name, o.UID, true))
		}
		framework.WaitForMetric(b, c, cmObjectsSample, base+float64(total+owners), time.Minute)

		removed := framework.MetricValue(b, c, foregroundRemovedSample)
		before := framework.APIServerRequests(b, cs)
		stopProfile := profileCascade(b, c, "foreground")
		cpu := startCPU(c.Pid(), suite.CP.APIServer.Pid())
		start := time.Now()
		for _, name := range names {
			cs.DeleteCM(b, ns, name, metav1.DeletePropagationForeground)
		}
		framework.WaitForMetric(b, c, foregroundRemovedSample, removed+float64(owners), 10*time.Minute)
		elapsed := time.Since(start)
		used := cpu()
		stopProfile()
		after := framework.APIServerRequests(b, cs)
		reqs, detail := framework.ObjectRequests(before, after, "configmaps")
		reqs -= float64(owners) // the benchmark's owner DELETEs
		_ = c.Stop(10 * time.Second)
		if n, err := cs.CountCMs(ns, ""); err != nil || n != 0 {
			b.Fatalf("%d objects left after every owner's foregroundDeletion was removed (%v)", n, err)
		}
		rate := float64(total) / elapsed.Seconds()

		cs.CreateCMs(b, ns, "raw", total)
		rawCPU := startCPU(suite.CP.APIServer.Pid())
		rawElapsed := rawDelete(b, cs, ns, "raw", total)
		rawUsed := rawCPU()
		rawRate := float64(total) / rawElapsed.Seconds()

		reportFinalizerBench(b, "foreground", fmt.Sprintf("%d×%d", owners, perOwner), total, rate, elapsed, reqs, detail, rawRate, rawElapsed)
		reportCPU(b, total, used, rawUsed)
	}
}

const (
	cmObjectsSample         = `cascade_graph_objects{api_version="v1",kind="ConfigMap"}`
	orphanRemovedSample     = `cascade_finalizers_removed_total{finalizer="orphan"}`
	foregroundRemovedSample = `cascade_finalizers_removed_total{finalizer="foregroundDeletion"}`
)

func reportFinalizerBench(b *testing.B, name, shape string, total int, rate float64, elapsed time.Duration, reqs float64, detail string, rawRate float64, rawElapsed time.Duration) {
	perObject := reqs / float64(total)
	b.ReportMetric(rate, "objects/s")
	b.ReportMetric(perObject, "requests/object")
	b.ReportMetric(rawRate, "raw-objects/s")
	b.ReportMetric(rate/rawRate, "ratio-to-raw")
	b.Logf("%s %s: cascade %.0f objects/s (%s), %.4f requests/object (%s); raw %.0f objects/s (%s); cascade/raw %.2f",
		name, shape, rate, elapsed.Round(time.Millisecond), perObject, detail, rawRate, rawElapsed.Round(time.Millisecond), rate/rawRate)
}

// startCPU starts measuring the CPU time (user and system, from /proc) of the processes pids;
// the returned function reports what each used since. Where /proc is unreadable it reports 0.
func startCPU(pids ...int) func() []time.Duration {
	before := make([]time.Duration, len(pids))
	for i, pid := range pids {
		before[i] = procCPU(pid)
	}
	return func() []time.Duration {
		out := make([]time.Duration, len(pids))
		for i, pid := range pids {
			out[i] = procCPU(pid) - before[i]
		}
		return out
	}
}

// procCPU reads utime+stime of pid (fields 14 and 15 of /proc/pid/stat, in clock ticks of
// 10 ms on Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// reportCPU reports cascade's CPU per object, and logs the API server's CPU with cascade and
// for the raw client (the raw run has no watcher to send events to).
func reportCPU(b *testing.B, total int, used, rawUsed []time.Duration) {
	b.ReportMetric(float64(used[0].Microseconds())/float64(total), "cascade-cpu-us/object")
	b.Logf("CPU: cascade %s, kube-apiserver %s with cascade; kube-apiserver %s for the raw client",
		used[0].Round(10*time.Millisecond), used[1].Round(10*time.Millisecond), rawUsed[0].Round(10*time.Millisecond))
}
