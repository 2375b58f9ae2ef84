//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// shardAuditPolicy logs every write at Metadata level: the check needs who wrote to which
// member when (the user agent names the member and the replica).
const shardAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// Timings of the shards' Leases in TestFleetShards: short, so that kills and pauses play out in
// seconds.
const (
	shardLease = 4 * time.Second
	shardRenew = 3 * time.Second
	shardRetry = time.Second
)

// TestFleetShards (issue 34): three cascade replicas share six members over six shards held
// through Leases in the host. Members are three member kube-apiservers, each registered twice
// (two members of the fleet on one API server, each its own shard, connection and graph: both
// collect the same objects, which Kubernetes' preconditions make harmless). While background,
// foreground and orphan deletions go on in every member:
//   - the shards spread two per replica;
//   - a replica killed: the others hold all six again, and collect (the time is logged);
//   - a replica paused (SIGSTOP) past its Leases: the others take its shards; resumed, it
//     sends no write (its write guard refuses them) and gets back to its fair share;
//   - a fourth replica added: every replica within one of its fair share; stopped again: its
//     shards go back to the others;
//   - the members' audit logs: no member ever received writes from two replicas less than one
//     lease duration apart, and every deletion finished.
func TestFleetShards(t *testing.T) {
	// Its members are API servers of its own, and its Leases are in a namespace of its own on
	// the suite's control plane: it runs beside the tests on control planes of their own, once
	// the others are done (t.Parallel), so that its waits on the Leases overlap theirs.
	t.Parallel()
	cs := suite.Clients(t)
	ctx := context.Background()
	ns := cs.NewNamespace(t) // the shards' and replicas' Leases
	dir := t.TempDir()
	var apis []*fleetMember
	var audits []string
	for i := range 3 {
		name := fmt.Sprintf("s%d", i)
		audit := filepath.Join(dir, name+"-audit.log")
		policy := filepath.Join(dir, name+"-audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(shardAuditPolicy), 0o600); err != nil {
			t.Fatal(err)
		}
		cp, err := harness.Start(ctx, harness.Options{BinDir: suite.CP.BinDir, SharedEtcd: suite.CP.EtcdURL, EtcdPrefix: "/" + ns + "-" + name,
			ExtraAPIServerArgs: []string{"--audit-log-path=" + audit, "--audit-policy-file=" + policy, "--audit-log-maxsize=0"}})
		if err != nil {
			t.Fatalf("member API server %s: %v", name, err)
		}
		t.Cleanup(func() { _ = cp.Stop() })
		m := &fleetMember{name: name, cp: cp, cs: framework.ClientsFor(t, cp.RestConfig())}
		m.cs.CreateNamespace(t, "work")
		apis = append(apis, m)
		audits = append(audits, audit)
	}
	members := filepath.Join(dir, "members")
	if err := os.MkdirAll(members, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		kc, err := os.ReadFile(apis[i%3].cp.KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(members, fmt.Sprintf("m%d", i)), kc, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	flags := []string{"--fleet-kubeconfig-dir=" + members, "--fleet-shards=6", "--orphan-record-configmap=",
		"--leader-elect-resource-namespace=" + ns,
		"--leader-elect-lease-duration=" + shardLease.String(), "--leader-elect-renew-deadline=" + shardRenew.String(), "--leader-elect-retry-period=" + shardRetry.String()}
	start := func(name string) *harness.Cascade {
		return framework.StartReady(t, suite.CP, "cascade-"+ns+"-"+name, suite.CascadeBin, flags...)
	}
	replicas := map[string]*harness.Cascade{"r0": start("r0"), "r1": start("r1"), "r2": start("r2")}
	held := func(names ...string) []int {
		var out []int
		for _, n := range names {
			m, err := framework.ReadMetrics(replicas[n])
			if err != nil {
				out = append(out, -1)
				continue
			}
			v, ok := m.Value("cascade_fleet_shards_held")
			if !ok {
				v = -1
			}
			out = append(out, int(v))
		}
		return out
	}
	// spread waits until the replicas named hold the six shards, each within one of its fair
	// share, and returns how long that took.
	spread := func(what string, timeout time.Duration, names ...string) time.Duration {
		t.Helper()
		begin := time.Now()
		fair := (6 + len(names) - 1) / len(names)
		framework.EventuallyEvery(t, 200*time.Millisecond, timeout, what, func() (bool, error) {
			sum := 0
			for _, h := range held(names...) {
				if h < fair-1 || h > fair {
					return false, nil
				}
				sum += h
			}
			return sum == 6, nil
		})
		d := time.Since(begin)
		t.Logf("%s: %v after %.1fs (shards held by %v)", what, held(names...), d.Seconds(), names)
		return d
	}
	spread("three replicas share the six shards", time.Minute, "r0", "r1", "r2")

	// Deletions in every member API server, all along: background, foreground and orphan.
	drive, stopDriving := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	rounds := 0
	for _, m := range apis {
		wg.Go(func() {
			for i := 0; drive.Err() == nil; i++ {
				if err := m.deletionRound(fmt.Sprintf("r%d", i)); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s round %d: %v", m.name, i, err))
					mu.Unlock()
					return
				}
				mu.Lock()
				rounds++
				mu.Unlock()
			}
		})
	}

	time.Sleep(2 * time.Second)
	if err := replicas["r0"].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := spread("r0 killed: r1 and r2 hold all six", 2*time.Minute, "r1", "r2")
	t.Logf("a killed replica's shards held again %.1fs after the kill (lease duration %v)", killed.Seconds(), shardLease)

	if err := replicas["r1"].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	framework.EventuallyEvery(t, 200*time.Millisecond, 2*time.Minute, "r2 holds all six while r1 is paused", func() (bool, error) {
		return held("r2")[0] == 6, nil
	})
	t.Logf("r1 paused: r2 held all six %.1fs later", time.Since(pausedAt).Seconds())
	time.Sleep(shardLease)
	if err := replicas["r1"].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	spread("r1 resumed: r1 and r2 share the six", 2*time.Minute, "r1", "r2")

	replicas["r3"] = start("r3")
	spread("r3 added: three replicas share the six", 2*time.Minute, "r1", "r2", "r3")
	if err := replicas["r3"].Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	spread("r3 stopped: r1 and r2 share the six", 2*time.Minute, "r1", "r2")

	stopDriving()
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d deletion rounds (background, foreground, orphan) finished in the members", rounds)
	if rounds == 0 {
		t.Fatal("no deletion round finished")
	}

	// The audit: writes to one member from two replicas at least a lease duration apart.
	var writes []framework.ReplicaWrite
	written := map[string]bool{}
	for _, a := range audits {
		ws, err := framework.ReplicaWrites(a)
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, ws...)
	}
	for _, w := range writes {
		written[w.Member] = true
	}
	if len(written) != 6 {
		t.Errorf("writes to %d members in the audit logs, want 6", len(written))
	}
	hs := framework.Handoffs(writes)
	handoffs := len(hs)
	var closest time.Duration = -1
	for _, h := range hs {
		if closest < 0 || h.Gap() < closest {
			closest = h.Gap()
		}
		if h.Gap() < shardLease {
			t.Errorf("%s, under the lease duration %v", h, shardLease)
		}
	}
	t.Logf("%d writes of the replicas to the six members; a member changed writer %d times, the closest two writers %v apart (lease duration %v)", len(writes), handoffs, closest, shardLease)
	if handoffs == 0 {
		t.Error("no member changed writer: the kills and pauses moved nothing")
	}
}

// deletionRound deletes an owner in the background, one in the foreground and one with the
// orphan policy, in namespace work of m, and waits until cascade finished each.
func (m *fleetMember) deletionRound(prefix string) error {
	ctx := context.Background()
	cms := m.cs.Kube.CoreV1().ConfigMaps("work")
	mk := func(name string, owner *metav1.OwnerReference) (*metav1.OwnerReference, error) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if owner != nil {
			cm.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		got, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		yes := true
		return &metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: got.Name, UID: got.UID, BlockOwnerDeletion: &yes}, nil
	}
	for _, p := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan} {
		owner, err := mk(prefix+"-"+strings.ToLower(string(p))+"-owner", nil)
		if err != nil {
			return err
		}
		if _, err := mk(prefix+"-"+strings.ToLower(string(p))+"-dep", owner); err != nil {
			return err
		}
		if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &p}); err != nil {
			return err
		}
	}
	exists := func(name string) (bool, error) {
		_, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var left []string
		for _, name := range []string{"background-dep", "background-owner", "foreground-dep", "foreground-owner", "orphan-owner"} {
			ok, err := exists(prefix + "-" + name)
			if err != nil {
				return err
			}
			if ok {
				left = append(left, name)
			}
		}
		orphanDep, err := cms.Get(ctx, prefix+"-orphan-dep", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the orphan owner's dependent: %w", err)
		}
		if len(left) == 0 && len(orphanDep.OwnerReferences) == 0 {
			return cms.Delete(ctx, orphanDep.Name, metav1.DeleteOptions{})
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not finished after 2 minutes: %v left, the orphan dependent's references %v", left, orphanDep.OwnerReferences)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
