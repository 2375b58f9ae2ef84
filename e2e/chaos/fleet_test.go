//go:build e2e

package chaos

import (
	"context"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// The chaos suite over a fleet (issue 40.7): TestChaosFleet.

// Timings of the fleet run: the replicas' Leases (one per shard, and one per replica) and the
// members' request deadline, short so that the faults below outlast them in seconds.
const (
	fleetLease          = 4 * time.Second
	fleetRequestTimeout = 5 * time.Second
	// maxPause bounds how long a member that is not at fault itself may go without a deletion
	// by cascade while its driver works: a replica SIGSTOP'd past its Leases (6 s), the other
	// taking its shards (a lease duration after it last saw them renewed) and the member
	// starting there (lists, sync), with room for a slow machine.
	maxPause = 45 * time.Second
)

// fleetConfig is the fleet run's size, from the environment (the seed is CHAOS_SEED's).
type fleetConfig struct {
	seed       uint64
	members    int           // CHAOS_FLEET_MEMBERS: member control planes (at least 3)
	ops        int           // CHAOS_FLEET_OPS: operations per member
	objects    int           // CHAOS_FLEET_OBJECTS: live objects each member's driver keeps around
	faultEvery time.Duration // CHAOS_FLEET_FAULT_EVERY: time between two faults
	rounds     int           // CHAOS_FLEET_ROUNDS: times every fault type occurs
	converge   time.Duration // CHAOS_CONVERGE_TIMEOUT
}

func loadFleetConfig(t *testing.T) fleetConfig {
	base := loadConfig(t)
	c := fleetConfig{seed: base.seed, members: 3, ops: 600, objects: 120, faultEvery: 3 * time.Second, rounds: 2, converge: base.converge}
	for _, e := range []struct {
		name string
		dst  *int
		min  int
	}{{"CHAOS_FLEET_MEMBERS", &c.members, 3}, {"CHAOS_FLEET_OPS", &c.ops, 1}, {"CHAOS_FLEET_OBJECTS", &c.objects, 10}, {"CHAOS_FLEET_ROUNDS", &c.rounds, 1}} {
		if v := os.Getenv(e.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < e.min {
				t.Fatalf("%s=%q: want a count of at least %d", e.name, v, e.min)
			}
			*e.dst = n
		}
	}
	if v := os.Getenv("CHAOS_FLEET_FAULT_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_FLEET_FAULT_EVERY=%q: want a duration", v)
		}
		c.faultEvery = d
	}
	return c
}

func (c fleetConfig) replay() string {
	return fmt.Sprintf("CHAOS_SEED=%d CHAOS_FLEET_MEMBERS=%d CHAOS_FLEET_OPS=%d CHAOS_FLEET_OBJECTS=%d CHAOS_FLEET_FAULT_EVERY=%s CHAOS_FLEET_ROUNDS=%d make chaos-fleet",
		c.seed, c.members, c.ops, c.objects, c.faultEvery, c.rounds)
}

// chaosMember is one member control plane: its kube-apiserver (on the host's etcd) with an
// audit log of its own, the proxy cascade reaches it through, the driver working in it, and
// the kubeconfig of cascade's ServiceAccount there that registers it in the fleet.
type chaosMember struct {
	name       string
	cp         *harness.ControlPlane
	kube       kubernetes.Interface
	a          *api
	d          *driver
	proxy      *faultProxy
	audit      string
	file       string // its registration: a file of the fleet's kubeconfig directory
	kubeconfig []byte
	// mu is held by the driver for each operation and by a fault that takes the API server
	// away: the driver never has a request in flight across it (as in TestChaos).
	mu sync.Mutex
	// faults are the windows of this member's own faults.
	faults []window
}

type window struct {
	what     string
	from, to time.Time
}

var memberFaults = []string{"member-apiserver-kill", "member-sigstop", "member-500", "member-rotate", "member-remove"}
var replicaFaults = []string{"replica-kill", "replica-sigstop"}

// TestChaosFleet: the seeded drivers work in every member at once while faults hit members
// (API server killed, SIGSTOP'd past the request deadline, answering 500s, kubeconfig rotated,
// member removed and added back) and the two replicas sharing the members' shards (killed,
// SIGSTOP'd past their Leases). Then, per member, from its own audit log and the oracle: no
// wrongful deletion or reference removal, no foreground deletion finished early, nothing stuck;
// no member written by two replicas less than a lease duration apart; and every member kept
// being collected while it was not itself at fault.
func TestChaosFleet(t *testing.T) {
	// On control planes of its own: runs beside the suite's other such tests once TestChaos, which
	// runs alone, is done (t.Parallel; go test's -parallel is GOMAXPROCS, 2 here), CI's time.
	t.Parallel()
	cfg := loadFleetConfig(t)
	start := time.Now()
	t.Logf("chaos-fleet: seed %d (replay: %s)", cfg.seed, cfg.replay())
	t.Cleanup(func() {
		if t.Failed() {
			fmt.Printf("chaos-fleet: FAILED with seed %d; replay exactly with:\n  %s\n", cfg.seed, cfg.replay())
		}
	})
	dir, err := os.MkdirTemp("", "cascade-chaos-fleet-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startCP := func(name string, opts harness.Options) *harness.ControlPlane {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 3*time.Minute)
		defer scancel()
		opts.Dir, opts.KeepDir = filepath.Join(dir, name), true
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cp, err := harness.Start(sctx, opts)
		if err != nil {
			t.Fatalf("start control plane %s: %v", name, err)
		}
		t.Cleanup(func() { _ = cp.Stop() })
		return cp
	}
	// The host holds the replicas' and shards' Leases; it takes no fault: what the replicas do
	// when their host goes is TestChaos's leader failover.
	host := startCP("host", harness.Options{})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane directories kept: %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	hostKube, err := kubernetes.NewForConfig(host.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hostKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bin, err := harness.BuildCascade(dir)
	if err != nil {
		t.Fatal(err)
	}
	membersDir := filepath.Join(dir, "members")
	if err := os.MkdirAll(membersDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var members []*chaosMember
	for i := range cfg.members {
		name := fmt.Sprintf("m%d", i)
		audit := filepath.Join(dir, name+"-audit.log")
		policy := filepath.Join(dir, name+"-audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			t.Fatal(err)
		}
		cp := startCP(name, harness.Options{SharedEtcd: host.EtcdURL, EtcdPrefix: "/chaos-" + name, ExtraAPIServerArgs: []string{
			"--audit-log-path=" + audit, "--audit-policy-file=" + policy, "--audit-log-maxsize=0",
		}})
		m := &chaosMember{name: name, cp: cp, audit: audit, file: filepath.Join(membersDir, name)}
		if m.a, err = newAPI(cp.RestConfig()); err != nil {
			t.Fatal(err)
		}
		if m.kube, err = kubernetes.NewForConfig(cp.RestConfig()); err != nil {
			t.Fatal(err)
		}
		if m.proxy, err = startFaultProxy(cp.RestConfig()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.proxy.close)
		kc := setup(t, ctx, cp, m.kube, m.a, m.proxy.url())
		if m.kubeconfig, err = m.memberKubeconfig(kc, ""); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(m.file, m.kubeconfig, 0o600); err != nil {
			t.Fatal(err)
		}
		m.d = newDriver(ctx, cfg.seed+uint64(i)*7919, m.a, cfg.objects, t.Logf)
		members = append(members, m)
	}

	cl := &cluster{
		ctx: ctx, cp: host, bin: bin, kubeconfig: host.KubeconfigPath, logf: t.Logf,
		rng:    rand.New(rand.NewPCG(cfg.seed, 0x666c656574)),
		faults: map[string]int{},
		flags: []string{
			"--fleet-kubeconfig-dir=" + membersDir, "--fleet-shards=" + strconv.Itoa(cfg.members),
			"--fleet-member-request-timeout=" + fleetRequestTimeout.String(), "--fleet-member-qps=200", "--fleet-member-burst=400",
			"--leader-elect-resource-namespace=" + systemNamespace,
			"--leader-elect-lease-duration=" + fleetLease.String(), "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
			"--discovery-period=2s", "--finalizer-resync-period=3s", "--owner-reverify-period=5s", "--sync-timeout=10s", "--v=1",
		},
		replicas: []*replica{{name: "fleet-a"}, {name: "fleet-b"}},
	}
	for i := range cl.replicas {
		if err := cl.startReplica(i); err != nil {
			t.Fatal(err)
		}
	}
	healFleet(t, cl, members)

	// The drivers, each in its member, all at once; the faults meanwhile, in a seeded rotation,
	// until every driver made its operations and every fault type occurred cfg.rounds times.
	opsStart := time.Now()
	var faultsDone atomic.Bool
	var wg sync.WaitGroup
	ops := make([]int, len(members))
	for i, m := range members {
		wg.Go(func() {
			for n := 0; n < cfg.ops || !faultsDone.Load(); n++ {
				m.mu.Lock()
				m.d.step()
				m.mu.Unlock()
				if n > 0 && n%500 == 0 {
					t.Logf("chaos-fleet: %s: %d operations, %d objects believed alive", m.name, n, len(m.d.alive))
				}
				ops[i] = n + 1
			}
		})
	}
	driving := make(chan struct{})
	go func() { wg.Wait(); close(driving) }()
	all := append(slices.Clone(memberFaults), replicaFaults...)
	var rotation []string
	for round := 0; round < cfg.rounds; {
		time.Sleep(cfg.faultEvery)
		if len(rotation) == 0 {
			rotation = slices.Clone(all)
			cl.rng.Shuffle(len(rotation), func(i, j int) { rotation[i], rotation[j] = rotation[j], rotation[i] })
		}
		f := rotation[0]
		rotation = rotation[1:]
		if err := injectFleet(ctx, cl, members, f); err != nil {
			t.Fatalf("fault %s: %v", f, err)
		}
		if err := cl.supervise(); err != nil {
			t.Fatal(err)
		}
		if len(rotation) == 0 {
			round++
		}
	}
	faultsDone.Store(true)
	<-driving
	opsDone := time.Now()
	healFleet(t, cl, members)

	// Judged per member, from its own audit log.
	var b strings.Builder
	fmt.Fprintf(&b, "chaos-fleet report (seed %d): %d members, 2 replicas over %d shards\n", cfg.seed, cfg.members, cfg.members)
	fmt.Fprintf(&b, "  operations:  %v (per member) in %s\n", ops, opsDone.Sub(opsStart).Round(time.Second))
	fmt.Fprintf(&b, "  faults:      %s\n", summarize(cl.faults))
	fmt.Fprintf(&b, "  replicas:    %d exits on their own after losing a Lease, %d crashes\n", cl.leaseExits, len(cl.crashes))
	var findings []string
	var writes []framework.ReplicaWrite
	for _, m := range members {
		line, fs := judgeMember(t, m, cfg, opsStart, opsDone)
		fmt.Fprintf(&b, "  %s\n", line)
		findings = append(findings, fs...)
		ws, err := framework.ReplicaWrites(m.audit)
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, ws...)
	}
	handoffs := framework.Handoffs(writes)
	var closest time.Duration = -1
	for _, h := range handoffs {
		if closest < 0 || h.Gap() < closest {
			closest = h.Gap()
		}
		if h.Gap() < fleetLease {
			findings = append(findings, fmt.Sprintf("TWO WRITERS: %s, under the lease duration %v", h, fleetLease))
		}
	}
	fmt.Fprintf(&b, "  writers:     %d writes of the replicas; members changed writer %d times, the closest two writers %v apart (lease %v)\n", len(writes), len(handoffs), closest, fleetLease)
	fmt.Fprintf(&b, "  total time:  %s\n", time.Since(start).Round(time.Second))
	fmt.Print(b.String())
	t.Log(b.String())
	if len(handoffs) == 0 {
		findings = append(findings, "no member changed writer: the replica faults moved no shard")
	}
	for _, c := range cl.crashes {
		findings = append(findings, "cascade crashed: "+c)
	}
	if len(findings) > 0 {
		t.Errorf("%d findings:\n  %s", len(findings), strings.Join(findings, "\n  "))
	}
}

// memberKubeconfig is cascade's kubeconfig of m as a fleet member: kc's token (or token, when
// set), and the proxy as the server, trusted by its own certificate, inline (a member's
// kubeconfig is data: no file path is followed).
func (m *chaosMember) memberKubeconfig(kc, token string) ([]byte, error) {
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		return nil, err
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.proxy.srv.Certificate().Raw})
	for _, c := range cfg.Clusters {
		c.Server, c.CertificateAuthority, c.CertificateAuthorityData = m.proxy.url(), "", ca
	}
	if token != "" {
		for _, u := range cfg.AuthInfos {
			u.Token = token
		}
	}
	return clientcmd.Write(*cfg)
}

// register writes m's registration (atomically: a file renamed into the directory).
func (m *chaosMember) register(content []byte) error {
	tmp := filepath.Join(filepath.Dir(filepath.Dir(m.file)), "."+m.name+".tmp")
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, m.file)
}

// injectFleet runs one fault: on a member picked at random, or on a replica.
func injectFleet(ctx context.Context, cl *cluster, members []*chaosMember, f string) error {
	cl.faults[f]++
	cl.lastFault = time.Now()
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if slices.Contains(replicaFaults, f) {
		i := cl.rng.IntN(len(cl.replicas))
		switch f {
		case "replica-kill":
			return cl.kill(i)
		case "replica-sigstop":
			// Past its Leases: the other replica takes its shards; resumed, it must not write
			// to them (its fences) before it holds them again.
			r := cl.replicas[i]
			if err := r.c.Signal(syscall.SIGSTOP); err != nil {
				return err
			}
			time.Sleep(fleetLease + 2*time.Second)
			return r.c.Signal(syscall.SIGCONT)
		}
		return fmt.Errorf("unknown fault %q", f)
	}
	m := members[cl.rng.IntN(len(members))]
	w := window{what: f, from: time.Now()}
	defer func() { w.to = time.Now(); m.faults = append(m.faults, w) }()
	switch f {
	case "member-apiserver-kill":
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.cp.RestartAPIServer(fctx, syscall.SIGKILL)
	case "member-sigstop":
		// Past the request deadline: the member's requests in flight end on it, the member is
		// down, and no other member waits on it.
		m.mu.Lock()
		defer m.mu.Unlock()
		if err := m.cp.APIServer.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		time.Sleep(fleetRequestTimeout + 2*time.Second)
		return m.cp.APIServer.Signal(syscall.SIGCONT)
	case "member-500":
		m.proxy.fail500(true)
		time.Sleep(6 * time.Second)
		m.proxy.fail500(false)
		return nil
	case "member-rotate":
		// A new token of the same ServiceAccount: the member restarts on it.
		exp := int64(48 * 3600)
		tok, err := m.kube.CoreV1().ServiceAccounts(systemNamespace).CreateToken(fctx, "cascade",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		kc, err := m.memberKubeconfig(filepath.Join(m.cp.Dir, "cascade.kubeconfig"), tok.Status.Token)
		if err != nil {
			return err
		}
		m.kubeconfig = kc
		return m.register(kc)
	case "member-remove":
		// Removed, it leaves clean (what cascade wrote there goes), then comes back.
		if err := os.Remove(m.file); err != nil {
			return err
		}
		time.Sleep(6 * time.Second)
		return m.register(m.kubeconfig)
	}
	return fmt.Errorf("unknown fault %q", f)
}

// healFleet ends every fault: every member registered and served, both replicas running and
// ready, every shard held.
func healFleet(t *testing.T, cl *cluster, members []*chaosMember) {
	t.Helper()
	ctx, cancel := context.WithTimeout(cl.ctx, 3*time.Minute)
	defer cancel()
	for _, m := range members {
		m.proxy.fail500(false)
		if _, err := os.Stat(m.file); err != nil {
			if err := m.register(m.kubeconfig); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cl.supervise(); err != nil {
		t.Fatal(err)
	}
	for _, r := range cl.replicas {
		if err := r.c.WaitReady(ctx); err != nil {
			t.Fatalf("replica %s not ready: %v", r.c.Name, err)
		}
	}
	err := framework.Poll(2*time.Minute, 200*time.Millisecond, func() (bool, error) {
		_ = cl.supervise()
		held, up := 0.0, 0.0
		for _, r := range cl.replicas {
			text, err := r.c.Metrics()
			if err != nil {
				return false, nil
			}
			m, err := framework.ParseMetrics(text)
			if err != nil {
				return false, nil
			}
			h, _ := m.Value("cascade_fleet_shards_held")
			u, _ := m.Value(`cascade_fleet_members{state="up"}`)
			held, up = held+h, up+u
		}
		return int(held) == len(members) && int(up) == len(members), nil
	})
	if err != nil {
		t.Fatalf("the fleet did not heal (every shard held, every member up): %v", err)
	}
}

// judgeMember ends a member's run as TestChaos ends its cluster's (holds removed, CRDs
// recreated, the oracle's verdicts awaited), checks its audit log, and measures how long its
// collection paused while the member itself was not at fault. It returns the report's line
// and the findings.
func judgeMember(t *testing.T, m *chaosMember, cfg fleetConfig, opsStart, opsDone time.Time) (string, []string) {
	t.Helper()
	d := m.d
	d.removeAllHolds()
	if err := d.recreateCRDs(time.Minute); err != nil {
		t.Fatal(err)
	}
	d.removeAllHolds()
	d.refreshForeground()
	verdicts := d.oracle(cfg.seed).Verdicts()
	var live map[string]*unstructured.Unstructured
	var wrongful []string
	var err error
	converged := framework.Poll(cfg.converge, 500*time.Millisecond, func() (bool, error) {
		if live, err = liveObjects(d.ctx, m.a); err != nil {
			return false, nil
		}
		wrongful = wrongfulDeletions(d, verdicts, live)
		return len(wrongful) > 0 || len(pending(d, verdicts, live)) == 0, nil
	}) == nil
	stuck := pending(d, verdicts, live)
	badFinalizers := leftFinalizers(d, verdicts, live)
	audit, err := checkAudit(m.audit, d)
	if err != nil {
		t.Fatalf("%s: audit log: %v", m.name, err)
	}
	var findings []string
	add := func(what string, list []string) {
		for _, s := range list {
			findings = append(findings, fmt.Sprintf("%s: %s: %s%s", m.name, what, s, traceFinding(d, m.audit, s)))
		}
	}
	add("WRONGFUL DELETION", wrongful)
	add("WRONGFUL DELETION (audit)", audit.wrongDeletes)
	add("WRONGFUL REFERENCE REMOVAL (audit)", audit.wrongRefRemovals)
	add("FOREGROUND FINISHED EARLY (audit)", audit.earlyForeground)
	add("DELETE WITHOUT PRECONDITIONS (audit)", audit.noPrecondition)
	add("NOT COLLECTED", stuck)
	add("GC FINALIZER LEFT", badFinalizers)
	if d.unsettled > 0 {
		findings = append(findings, fmt.Sprintf("%s: the driver could not read back %d objects after lost answers", m.name, d.unsettled))
	}
	if audit.deletes == 0 {
		findings = append(findings, m.name+": cascade deleted nothing there")
	}
	pause, at := longestPause(m, opsStart, opsDone)
	if pause > maxPause {
		findings = append(findings, fmt.Sprintf("%s: its collection paused %v from %s while it was not at fault itself (bound %v: a replica's pause and its shards' handoff)",
			m.name, pause.Round(100*time.Millisecond), at.Format("15:04:05.000"), maxPause))
	}
	line := fmt.Sprintf("%s: %d objects (%d must exist, %d must be gone); cascade: %d deletions, %d reference removals, %d foreground finishes (%d early); converged: %v; %d stuck, %d GC finalizers left; own faults %d; longest pause of its collection outside them %v (from %s)",
		m.name, len(verdicts), count(verdicts, MustExist), count(verdicts, MustBeGone), audit.deletes, audit.refRemovals, audit.foregroundDone, len(audit.earlyForeground),
		converged, len(stuck), len(badFinalizers), len(m.faults), pause.Round(100*time.Millisecond), at.Format("15:04:05"))
	return line, findings
}

func count(v map[string]Verdict, f Fate) int {
	n := 0
	for _, vd := range v {
		if vd.Fate == f {
			n++
		}
	}
	return n
}

// longestPause is the longest time during the operations between two deletions cascade made in
// m, leaving out the time of m's own faults (and a lease duration after each, for its shard to
// be held again), and when it began.
func longestPause(m *chaosMember, from, to time.Time) (time.Duration, time.Time) {
	ws, err := framework.ReplicaWrites(m.audit)
	if err != nil {
		return 0, time.Time{}
	}
	times := []time.Time{from}
	for _, w := range ws {
		if strings.HasPrefix(w.What, "delete ") && w.At.After(from) && w.At.Before(to) {
			times = append(times, w.At)
		}
	}
	times = append(times, to)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var longest time.Duration
	var at time.Time
	for i := 1; i < len(times); i++ {
		gap := times[i].Sub(times[i-1])
		for _, f := range m.faults {
			lo, hi := maxTime(times[i-1], f.from), minTime(times[i], f.to.Add(2*fleetLease))
			if hi.After(lo) {
				gap -= hi.Sub(lo)
			}
		}
		if gap > longest {
			longest, at = gap, times[i-1]
		}
	}
	return longest, at
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
