//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// systemNamespace holds cascade's ServiceAccount, its Lease and the aggregated API's Service.
const systemNamespace = "chaos-system"

// cascadeUser is the identity cascade runs as (its own token, so the audit log tells its
// writes from the driver's).
const cascadeUser = "system:serviceaccount:" + systemNamespace + ":cascade"

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// replica is one cascade process of the pair (leader election).
type replica struct {
	name   string
	c      *harness.Cascade
	gen    int
	killed bool // ended by the suite (not on its own)
}

// cluster runs the cascade pair and injects the faults.
type cluster struct {
	ctx        context.Context
	cp         *harness.ControlPlane
	bin        string
	kubeconfig string
	flags      []string
	replicas   []*replica
	api        *api
	rng        *rand.Rand
	logf       func(string, ...any)

	faults map[string]int
	// exits of a replica not caused by the suite: expected ones (the Lease lost while the
	// apiserver was down: cascade exits to rejoin as a standby) and crashes (anything else).
	leaseExits int
	crashes    []string
	agg        *aggBackend // the aggregated API's backend (aggregated.go)
	lastFault  time.Time
}

func (cl *cluster) startReplica(i int) error {
	r := cl.replicas[i]
	r.gen++
	c, err := cl.cp.StartCascade(fmt.Sprintf("%s-%d", r.name, r.gen), cl.bin, nil,
		append([]string{"--kubeconfig=" + cl.kubeconfig}, cl.flags...)...)
	if err != nil {
		return err
	}
	r.c, r.killed = c, false
	return nil
}

// supervise restarts a replica that ended on its own, as a kubelet would, and classifies the
// exit from its log.
func (cl *cluster) supervise() error {
	for i, r := range cl.replicas {
		exited, werr := r.c.Exited()
		if !exited || r.killed {
			continue
		}
		tail := r.c.Tail(40)
		if strings.Contains(tail, "Leadership lost") || strings.Contains(tail, "lost the leader-election Lease") {
			cl.leaseExits++
		} else {
			cl.crashes = append(cl.crashes, fmt.Sprintf("%s exited on its own (%v); log %s:\n%s", r.c.Name, werr, r.c.LogPath, tail))
		}
		if err := cl.startReplica(i); err != nil {
			return err
		}
	}
	return nil
}

// leader returns the index of the replica reporting cascade_leader 1, or -1.
func (cl *cluster) leader() int {
	for i, r := range cl.replicas {
		text, err := r.c.Metrics()
		if err != nil {
			continue
		}
		m, err := framework.ParseMetrics(text)
		if err != nil {
			continue
		}
		if v, _ := m.Value("cascade_leader"); v == 1 {
			return i
		}
	}
	return -1
}

func (cl *cluster) kill(i int) error {
	r := cl.replicas[i]
	r.killed = true
	_ = r.c.Signal(syscall.SIGKILL)
	<-r.c.Done()
	return cl.startReplica(i)
}

var faultTypes = []string{"cascade-kill", "leader-failover", "apiserver-restart", "etcd-restart", "apiservice"}

// inject runs one fault of type f. It returns when the control plane answers again (the
// driver never has a request in flight across a restart, so every answer it gets is certain;
// cascade, which runs on, gets no such favour).
func (cl *cluster) inject(f string) error {
	cl.faults[f]++
	cl.lastFault = time.Now()
	ctx, cancel := context.WithTimeout(cl.ctx, 2*time.Minute)
	defer cancel()
	switch f {
	case "cascade-kill":
		return cl.kill(cl.rng.IntN(len(cl.replicas)))
	case "leader-failover":
		l := cl.leader()
		if l < 0 {
			l = cl.rng.IntN(len(cl.replicas))
		}
		return cl.kill(l)
	case "apiserver-restart":
		sig := syscall.SIGTERM
		if cl.rng.IntN(2) == 0 {
			sig = syscall.SIGKILL
		}
		return cl.cp.RestartAPIServer(ctx, sig)
	case "etcd-restart":
		return cl.cp.RestartEtcd(ctx, syscall.SIGKILL)
	case "apiservice":
		if cl.agg.up() {
			cl.agg.stop() // the APIService turns unavailable: discovery of its group fails
			return cl.waitGroupFailing(ctx)
		}
		return cl.agg.start() // it comes back
	}
	return fmt.Errorf("unknown fault %q", f)
}

// heal ends every fault: the aggregated API served and available, both replicas running and
// ready, one leading.
func (cl *cluster) heal() error {
	ctx, cancel := context.WithTimeout(cl.ctx, 2*time.Minute)
	defer cancel()
	if err := cl.agg.start(); err != nil {
		return err
	}
	if err := cl.waitAggregated(ctx, true); err != nil {
		return err
	}
	if err := cl.supervise(); err != nil {
		return err
	}
	for _, r := range cl.replicas {
		if err := r.c.WaitReady(ctx); err != nil {
			return err
		}
	}
	for cl.leader() < 0 {
		if err := cl.supervise(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no replica leads after healing: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
