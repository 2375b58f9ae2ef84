//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// config is the run's size, from the environment.
type config struct {
	seed       uint64
	ops        int           // CHAOS_OPS: stop after this many operations (0: no limit)
	duration   time.Duration // CHAOS_DURATION: stop after this long (0: no limit)
	faultEvery int           // CHAOS_FAULT_EVERY: one fault every this many operations
	objects    int           // CHAOS_OBJECTS: live objects the driver keeps around
	converge   time.Duration // CHAOS_CONVERGE_TIMEOUT: bound on the wait after healing
}

func loadConfig(t *testing.T) config {
	c := config{seed: 1, ops: 1500, faultEvery: 75, objects: 250, converge: 3 * time.Minute}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		c.seed = s
	}
	intEnv := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a count", name, v)
			}
			*dst = n
		}
	}
	durEnv := func(name string, dst *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
			*dst = d
		}
	}
	durEnv("CHAOS_DURATION", &c.duration)
	if c.duration > 0 && os.Getenv("CHAOS_OPS") == "" {
		c.ops = 0 // a duration alone means: run that long
	}
	intEnv("CHAOS_OPS", &c.ops)
	intEnv("CHAOS_FAULT_EVERY", &c.faultEvery)
	intEnv("CHAOS_OBJECTS", &c.objects)
	durEnv("CHAOS_CONVERGE_TIMEOUT", &c.converge)
	if c.ops == 0 && c.duration == 0 {
		t.Fatal("CHAOS_OPS=0 needs CHAOS_DURATION")
	}
	if c.faultEvery == 0 {
		c.faultEvery = 1 << 30
	}
	return c
}

// replay is the command that runs the same operations again: the seed fixes every random
// choice of the driver and of the fault injector; what cascade does in between is timing, so a
// replay meets the same operations and faults, not always the same interleaving.
func (c config) replay() string {
	s := fmt.Sprintf("CHAOS_SEED=%d CHAOS_OPS=%d CHAOS_FAULT_EVERY=%d CHAOS_OBJECTS=%d", c.seed, c.ops, c.faultEvery, c.objects)
	if c.duration > 0 && c.ops == 0 {
		s += " CHAOS_DURATION=" + c.duration.String()
	}
	return s + " make chaos"
}

// auditPolicy logs deletes and patches at Metadata level, and the writes of cascade and of the
// driver at Request level: their bodies name the object (the UID precondition of a DELETE) and
// the references a PATCH removes, which the audit check needs, and the driver's bodies let a
// finding be traced.
//
// Every stage is logged, RequestReceived too: a request kube-apiserver was killed while serving
// has only that one, and the check counts it as perhaps applied.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
  - group: ""
    resources: ["events"]
- level: Request
  users: ["` + cascadeUser + `", "` + harness.AdminUser + `"]
  verbs: ["create", "delete", "patch", "update", "deletecollection"]
- level: Metadata
  verbs: ["delete", "patch", "deletecollection"]
- level: None
`

// TestChaos: the seeded random driver, the faults and the oracle (see the package doc).
// What must never happen: an object the oracle says must exist is deleted; cascade deletes an
// object that had a live owner, or one whose reference to an orphan-deleted owner it should
// have removed; cascade removes a reference to a live owner; an owner keeps a GC finalizer
// after healing longer than the bound.
func TestChaos(t *testing.T) {
	cfg := loadConfig(t)
	start := time.Now()
	t.Logf("chaos: seed %d (replay: %s)", cfg.seed, cfg.replay())
	t.Cleanup(func() {
		if t.Failed() {
			fmt.Printf("chaos: FAILED with seed %d; replay exactly with:\n  %s\n", cfg.seed, cfg.replay())
		}
	})

	dir, err := os.MkdirTemp("", "cascade-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	auditLog := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startCtx, cancelStart := context.WithTimeout(ctx, 3*time.Minute)
	cp, err := harness.Start(startCtx, harness.Options{Dir: dir, KeepDir: true, ExtraAPIServerArgs: []string{
		"--audit-log-path=" + auditLog,
		"--audit-policy-file=" + policy,
		"--audit-log-maxsize=0",
		"--enable-aggregator-routing=true", // the aggregated API's endpoint is dialled directly (aggregated.go)
	}})
	cancelStart()
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		_ = cp.Stop()
		if t.Failed() {
			t.Logf("control plane directory kept: %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	bin, err := harness.BuildCascade(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAPI(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	// cascade reaches the apiserver through a proxy that drops every connection every 3 to 10 s
	// while the operations run (watches cut often).
	cut, err := startCutter(strings.TrimPrefix(cp.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cut.close)
	kubeconfig := setup(t, ctx, cp, kube, a, "https://"+cut.addr())

	cl := &cluster{
		ctx: ctx, cp: cp, bin: bin, kubeconfig: kubeconfig, api: a, logf: t.Logf,
		rng:    rand.New(rand.NewPCG(cfg.seed, 0x6661756c74)),
		faults: map[string]int{},
		flags: []string{
			"--leader-elect=true", "--leader-elect-resource-namespace=" + systemNamespace, "--leader-elect-resource-name=cascade",
			"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
			"--discovery-period=2s", "--finalizer-resync-period=3s", "--owner-reverify-period=5s",
			"--sync-timeout=10s", "--kube-api-qps=200", "--kube-api-burst=400", "--v=1",
		},
		replicas: []*replica{{name: "cascade-a"}, {name: "cascade-b"}},
	}
	if cl.agg, err = newAggBackend(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.agg.stop)
	if err := cl.registerAggregated(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range cl.replicas {
		if err := cl.startReplica(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.heal(); err != nil {
		t.Fatal(err)
	}

	// The operations, with a fault every cfg.faultEvery of them (types in a seeded rotation,
	// so that every type occurs).
	d := newDriver(ctx, cfg.seed, a, cfg.objects, t.Logf)
	var rotation []string
	cutCtx, stopCuts := context.WithCancel(ctx)
	go cut.run(cutCtx, cfg.seed)
	opsStart := time.Now()
	n := 0
	for ; (cfg.ops == 0 || n < cfg.ops) && (cfg.duration == 0 || time.Since(opsStart) < cfg.duration); n++ {
		if n > 0 && n%cfg.faultEvery == 0 {
			if len(rotation) == 0 {
				rotation = slices.Clone(faultTypes)
				cl.rng.Shuffle(len(rotation), func(i, j int) { rotation[i], rotation[j] = rotation[j], rotation[i] })
			}
			f := rotation[0]
			rotation = rotation[1:]
			if err := cl.inject(f); err != nil {
				t.Fatalf("fault %s: %v", f, err)
			}
		}
		if err := cl.supervise(); err != nil {
			t.Fatal(err)
		}
		d.step()
		if n%500 == 0 && n > 0 {
			t.Logf("chaos: %d operations, %d objects believed alive, faults %v", n, len(d.alive), cl.faults)
		}
	}
	opsDone := time.Now()
	stopCuts()
	cuts, drops := cut.stats()
	cl.faults["watch-cut"] = cuts
	if cfg.ops == 0 {
		cfg.ops = n // a duration-bound run replays as this many operations
	}

	// Heal: every fault ends, foreign finalizers are removed, deleted CRDs come back.
	if err := cl.heal(); err != nil {
		t.Fatal(err)
	}
	lastFault := cl.lastFault
	healed := time.Now()
	// Owners carrying a GC finalizer when the faults end, and how long after healing each
	// lost it (or went).
	withFinalizer := map[string]bool{}
	finalizerGone := map[string]time.Duration{}
	if live, err := liveObjects(ctx, a); err == nil {
		for u, got := range live {
			if hasGCFinalizer(got) {
				withFinalizer[u] = true
			}
		}
	} else {
		t.Fatalf("list objects after healing: %v", err)
	}
	d.removeAllHolds()
	// A CRD that still terminates after a minute is held by objects that can never go (a
	// foreground cycle): healthy runs recreate every CRD within seconds of healing, and the
	// convergence wait below still gives the objects their time. (It was 2 minutes: a third of
	// the runs spent them waiting for such a CRD, a minute and a half of CI's budget.)
	if err := d.recreateCRDs(time.Minute); err != nil {
		t.Fatal(err)
	}
	d.removeAllHolds() // objects the CRD finalizer was waiting on may have been read before
	fgDone := d.refreshForeground()
	t.Logf("chaos: %d foreground deletions already finished when the operations ended", fgDone)

	or := d.oracle(cfg.seed)
	verdicts := or.Verdicts()
	var must, gone, either int
	for _, v := range verdicts {
		switch v.Fate {
		case MustExist:
			must++
		case MustBeGone:
			gone++
		default:
			either++
		}
	}
	t.Logf("chaos: oracle over %d objects: %d must exist, %d must be gone, %d either", len(verdicts), must, gone, either)

	// Wait (bounded) for the live state to match: every must-be-gone object gone. What must
	// exist can only be lost, never come back, so it is checked at every poll.
	var live map[string]*unstructured.Unstructured
	var wrongful []string
	convergeStart := time.Now()
	var converged time.Duration
	explainedSlow := false
	_ = framework.Poll(cfg.converge, 500*time.Millisecond, func() (bool, error) {
		live, err = liveObjects(ctx, a)
		if err == nil {
			now := time.Since(healed)
			for u := range withFinalizer {
				if _, done := finalizerGone[u]; done {
					continue
				}
				if got, ok := live[u]; !ok || !hasGCFinalizer(got) {
					finalizerGone[u] = now
				}
			}
			wrongful = wrongfulDeletions(d, verdicts, live)
			if len(wrongful) > 0 {
				return true, nil
			}
			if len(pending(d, verdicts, live)) == 0 {
				converged = time.Since(convergeStart)
				return true, nil
			}
			if !explainedSlow && time.Since(convergeStart) > 30*time.Second {
				// Slow to converge (it takes seconds when nothing is wrong): say what waits, and
				// why, while it waits.
				explainedSlow = true
				t.Logf("chaos: still pending %s after healing: %v", time.Since(convergeStart).Round(time.Second), pending(d, verdicts, live))
				explain(t, dir, "slow", cl, d, pendingUIDs(verdicts, live))
			}
		}
		_ = cl.supervise()
		return false, nil
	}) // not converged within cfg.converge: what is still pending is reported below
	stuck := pending(d, verdicts, live)
	// A GC finalizer that must go: present on an object the oracle says must be gone (listed in
	// stuck), or on one that must exist but has no reason to keep it.
	badFinalizers := leftFinalizers(d, verdicts, live)
	convergedAfterFault := time.Since(lastFault)

	// Canaries, to prove the checks are not blind: as cascade, delete an object the oracle
	// says must exist (it has a live owner), and remove a reference to a live owner from
	// another. Both checks must report exactly those; they are then taken out of the findings.
	canaryDel, canaryRef := plantCanaries(t, ctx, cp, kubeconfig, d, verdicts, live)
	if live2, err := liveObjects(ctx, a); err == nil && canaryDel != "" {
		found := false
		for _, w := range wrongfulDeletions(d, verdicts, live2) {
			if strings.Contains(w, canaryDel) {
				found = true
			}
		}
		if !found {
			t.Errorf("canary: the oracle's check missed the deletion of %s", canaryDel)
		}
	}

	// Proof from the audit log.
	audit, err := checkAudit(auditLog, d)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	audit.wrongDeletes = dropCanary(t, "deletion", audit.wrongDeletes, canaryDel)
	audit.wrongRefRemovals = dropCanary(t, "reference removal", audit.wrongRefRemovals, canaryRef)
	if canaryDel != "" {
		audit.deletes-- // the canary's, not cascade's
	}
	if canaryRef != "" {
		audit.refRemovals--
	}
	if err := cl.supervise(); err != nil {
		t.Fatal(err)
	}
	deletes, _ := cascadeDeletes(cl)

	// The report.
	var b strings.Builder
	fmt.Fprintf(&b, "chaos report (seed %d)\n", cfg.seed)
	fmt.Fprintf(&b, "  operations:               %d in %s (%s)\n", n, opsDone.Sub(opsStart).Round(time.Second), summarize(d.ops))
	fmt.Fprintf(&b, "  refused by the apiserver: %s; answers lost and re-read: %d (%d could not be read back)\n", summarize(d.failed), d.uncertain, d.unsettled)
	for op, why := range d.failReasons {
		fmt.Fprintf(&b, "    first refusal of %s: %s\n", op, why)
	}
	if len(d.crdStuck) > 0 {
		fmt.Fprintf(&b, "  CRDs still terminating at the end (held by their objects): %v\n", d.crdStuck)
	}
	fmt.Fprintf(&b, "  objects:                  %d created; oracle: %d must exist, %d must be gone, %d either\n", len(d.recs), must, gone, either)
	fmt.Fprintf(&b, "  faults injected:          %s (watch-cut: every connection of cascade dropped, %d connections in all)\n", summarize(cl.faults), drops)
	fmt.Fprintf(&b, "  cascade exits on its own: %d after losing the Lease (by design), %d crashes\n", cl.leaseExits, len(cl.crashes))
	fmt.Fprintf(&b, "  deletions by cascade:     %d (audit log: DELETE answered 2xx; the replicas running now count %.0f since their start); %d PATCH removing references\n", audit.deletes, deletes, audit.refRemovals)
	fmt.Fprintf(&b, "  wrongful deletions:       %d (oracle) + %d (audit)\n", len(wrongful), len(audit.wrongDeletes))
	fmt.Fprintf(&b, "  wrongful ref removals:    %d (audit)\n", len(audit.wrongRefRemovals))
	fmt.Fprintf(&b, "  foreground finished early: %d of %d foregroundDeletion finalizers cascade removed (audit: a blocking dependent still existed; %d blocking references written within %s of the deletion left out as watch races)\n",
		len(audit.earlyForeground), audit.foregroundDone, audit.foregroundRaces, watchLag)
	fmt.Fprintf(&b, "  stuck owners:             %d (must be gone but present) + %d (GC finalizer left)\n", len(stuck), len(badFinalizers))
	if converged > 0 {
		// Between healing and the oracle the driver removes its holds and recreates the deleted
		// CRDs, waiting up to 2 minutes for a CRD its objects hold: cascade was converging all
		// along, but the check only starts after those steps (the 2-minute convergences of
		// earlier long runs were that wait).
		fmt.Fprintf(&b, "  converged:                %s after healing, %s after the last fault; %s after the driver's end steps (%s: holds removed, CRDs recreated)\n",
			(time.Since(healed) - time.Since(convergeStart) + converged).Round(100*time.Millisecond), (convergedAfterFault - time.Since(convergeStart) + converged).Round(100*time.Millisecond),
			converged.Round(100*time.Millisecond), convergeStart.Sub(healed).Round(100*time.Millisecond))
	} else {
		fmt.Fprintf(&b, "  converged:                NO (bound %s)\n", cfg.converge)
	}
	var maxFin time.Duration
	for _, dur := range finalizerGone {
		maxFin = max(maxFin, dur)
	}
	held := 0
	for u := range withFinalizer {
		if _, done := finalizerGone[u]; !done && verdicts[u].FinalizerMayStay {
			held++
		}
	}
	fmt.Fprintf(&b, "  GC finalizers at healing:  %d owners; %d lost it, the last %s after healing (at most: first checked after the driver's end steps); %d held by a dependent that can never go (oracle)\n",
		len(withFinalizer), len(finalizerGone), maxFin.Round(100*time.Millisecond), held)
	fmt.Fprintf(&b, "  audit: %d cascade writes unverifiable (object unknown to the driver); %d DELETEs answered with a server error or not at all (perhaps applied; judged like the others, but for %d shown not applied: their resourceVersion precondition refused, or the object outlived one never answered)\n", audit.unverifiable, audit.maybeDeletes, audit.refusedDeletes)
	fmt.Fprintf(&b, "  total time:               %s\n", time.Since(start).Round(time.Second))
	fmt.Print(b.String())
	t.Log(b.String())

	if len(wrongful)+len(audit.wrongDeletes)+len(audit.wrongRefRemovals)+len(audit.earlyForeground)+len(audit.noPrecondition)+len(stuck)+len(badFinalizers) > 0 {
		// The driver's view of every object, for tracing a finding with the audit log.
		if b, err := json.MarshalIndent(d.dump(), "", " "); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "driver.json"), b, 0o644)
			t.Logf("the driver's events and objects: %s", filepath.Join(dir, "driver.json"))
		}
	}
	if d.unsettled > 0 {
		t.Errorf("the driver could not read back %d objects after lost answers within %s: its view, and so the checks, may be wrong (the control plane did not heal)", d.unsettled, settleFor)
	}
	for _, c := range cl.crashes {
		t.Errorf("cascade crashed: %s", c)
	}
	for _, w := range wrongful {
		t.Errorf("WRONGFUL DELETION: %s%s", w, traceFinding(d, auditLog, w))
	}
	for _, w := range audit.wrongDeletes {
		t.Errorf("WRONGFUL DELETION (audit): %s%s", w, traceFinding(d, auditLog, w))
	}
	for _, w := range audit.wrongRefRemovals {
		t.Errorf("WRONGFUL REFERENCE REMOVAL (audit): %s%s", w, traceFinding(d, auditLog, w))
	}
	for _, w := range audit.earlyForeground {
		t.Errorf("FOREGROUND FINISHED EARLY (audit): %s%s", w, traceFinding(d, auditLog, w))
	}
	for _, w := range audit.noPrecondition {
		t.Errorf("DELETE WITHOUT PRECONDITIONS (audit): %s", w)
	}
	for _, s := range stuck {
		t.Errorf("NOT COLLECTED after %s: %s%s", cfg.converge, s, traceFinding(d, auditLog, s))
	}
	if len(stuck) > 0 {
		explain(t, dir, "stuck", cl, d, pendingUIDs(verdicts, live))
	}
	for _, s := range badFinalizers {
		t.Errorf("GC FINALIZER LEFT: %s%s", s, traceFinding(d, auditLog, s))
	}
	// The findings once more, without their traces, last: a CI log that keeps only the end of
	// the output still names each (the traces above can push the first finding's line out).
	var findings []string
	for _, f := range []struct {
		what string
		list []string
	}{
		{"WRONGFUL DELETION", wrongful}, {"WRONGFUL DELETION (audit)", audit.wrongDeletes},
		{"WRONGFUL REFERENCE REMOVAL (audit)", audit.wrongRefRemovals}, {"FOREGROUND FINISHED EARLY (audit)", audit.earlyForeground},
		{"DELETE WITHOUT PRECONDITIONS (audit)", audit.noPrecondition}, {"NOT COLLECTED", stuck}, {"GC FINALIZER LEFT", badFinalizers},
	} {
		for _, s := range f.list {
			findings = append(findings, "  "+f.what+": "+s)
		}
	}
	if len(findings) > 0 {
		t.Errorf("%d findings, traced above:\n%s", len(findings), strings.Join(findings, "\n"))
	}
}

// setup creates the namespaces, the CRDs, and cascade's ServiceAccount (cluster-admin) with a
// token; it returns a kubeconfig for cascade.
func setup(t *testing.T, ctx context.Context, cp *harness.ControlPlane, kube kubernetes.Interface, a *api, server string) string {
	t.Helper()
	for _, ns := range append([]string{systemNamespace}, namespaces...) {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// No kube-controller-manager makes the default ServiceAccount, which Pods need.
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := cp.ClusterAdminKubeconfig(ctx, kube, systemNamespace, "cascade", "chaos-cascade", 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kcfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, cluster := range kcfg.Clusters {
		cluster.Server = server
	}
	if err := clientcmd.WriteToFile(*kcfg, kc); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		if k.crd == "" {
			continue
		}
		if _, err := a.dyn.Resource(crdGVR).Create(ctx, crdObject(k), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitCRDsEstablished(ctx, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	return kc
}

// liveObjects lists every object of the driver's kinds, by UID.
func liveObjects(ctx context.Context, a *api) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	for _, k := range kinds {
		nss := namespaces
		if !k.namespaced {
			nss = []string{""}
		}
		for _, ns := range nss {
			list, err := a.res(k, ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("list %s: %w", k.gvr.Resource, err)
			}
			for i := range list.Items {
				u := &list.Items[i]
				out[string(u.GetUID())] = u
			}
		}
	}
	return out, nil
}

func describe(r *record) string {
	ns := r.Namespace
	if ns == "" {
		ns = "(cluster)"
	}
	return fmt.Sprintf("%s %s/%s uid %s refs %v deletion %d", r.k.kind, ns, r.Name, r.UID, r.Refs, r.Deletion)
}

// wrongfulDeletions lists the objects the oracle says must exist that are gone, or that must
// stay undeleted and are being deleted.
func wrongfulDeletions(d *driver, v map[string]Verdict, live map[string]*unstructured.Unstructured) []string {
	var out []string
	for u, vd := range v {
		if vd.Fate != MustExist {
			continue
		}
		r := d.recs[u]
		got, ok := live[u]
		switch {
		case !ok && r.Deletion != NotDeleted:
			// Its deletion was asked for: it went although the oracle has it held forever by a
			// blocking dependent that can never go (a foreground deletion finished early).
			out = append(out, "foreground owner gone while a blocking dependent that can never go remained: "+describe(r))
		case !ok:
			out = append(out, "gone: "+describe(r))
		case got.GetDeletionTimestamp() != nil && r.Deletion == NotDeleted && !vd.FinalizerMayStay:
			out = append(out, fmt.Sprintf("being deleted (finalizers %v): %s", got.GetFinalizers(), describe(r)))
		}
	}
	sort.Strings(out)
	return out
}

// pending lists the objects the oracle says must be gone that are still there. A Pod being
// deleted without any finalizer left is not the collector's to finish (the apiserver's graceful
// deletion waits for a kubelet, and none runs here): not counted.
func pending(d *driver, v map[string]Verdict, live map[string]*unstructured.Unstructured) []string {
	var out []string
	for _, u := range pendingUIDs(v, live) {
		out = append(out, fmt.Sprintf("finalizers %v, live refs %v: %s", live[u].GetFinalizers(), refsOf(live[u]), describe(d.recs[u])))
	}
	sort.Strings(out)
	return out
}

// pendingUIDs are the UIDs of the objects pending lists.
func pendingUIDs(v map[string]Verdict, live map[string]*unstructured.Unstructured) []string {
	var out []string
	for u, vd := range v {
		if got, ok := live[u]; ok && vd.Fate == MustBeGone {
			if got.GetKind() == "Pod" && got.GetDeletionTimestamp() != nil && len(got.GetFinalizers()) == 0 {
				continue
			}
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}

// leftFinalizers lists live objects that keep a GC finalizer the oracle says must go.
func leftFinalizers(d *driver, v map[string]Verdict, live map[string]*unstructured.Unstructured) []string {
	var out []string
	for u, got := range live {
		vd, ok := v[u]
		if !ok || vd.Fate == MustBeGone || vd.FinalizerMayStay || got.GetDeletionTimestamp() == nil {
			continue // a GC finalizer on an object not being deleted is its own (the driver stamps them)
		}
		for _, f := range got.GetFinalizers() {
			if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents {
				out = append(out, fmt.Sprintf("%s on %s (oracle: %s)", f, describe(d.recs[u]), vd.Fate))
			}
		}
	}
	sort.Strings(out)
	return out
}

// explain asks every running replica what it knows of each object in uids (must be gone, still
// there) and what it would decide now (/debug/graph, the Explanation of `cascade explain`), and
// writes the answers next to the logs: explain-WHEN-NAME-UID.json (at most 20 objects). A line
// per object and replica says the gist.
func explain(t *testing.T, dir, when string, cl *cluster, d *driver, uids []string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	for i, u := range uids {
		if i == 20 {
			t.Logf("explain: %d more not asked for", len(uids)-i)
			break
		}
		name := d.recs[u].Name
		var all []json.RawMessage
		for _, r := range cl.replicas {
			url := strings.TrimSuffix(r.c.MetricsURL, "/metrics") + "/debug/graph?uid=" + u
			resp, err := client.Get(url) //nolint:noctx
			if err != nil {
				t.Logf("explain %s (%s): %s: %v", name, u, r.c.Name, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Logf("explain %s (%s): %s: %s %s", name, u, r.c.Name, resp.Status, strings.TrimSpace(string(b)))
				continue
			}
			var e struct {
				State  string `json:"state"`
				Owners []struct {
					Name, State string
				} `json:"owners"`
				Decision *struct{ Action, Reason string } `json:"decision"`
			}
			if err := json.Unmarshal(b, &e); err == nil {
				t.Logf("explain (%s) %s (%s): %s: %s, owners %v, decision %v", when, name, u, r.c.Name, e.State, e.Owners, e.Decision)
			}
			all = append(all, b)
		}
		if out, err := json.MarshalIndent(all, "", " "); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "explain-"+when+"-"+name+"-"+u+".json"), out, 0o644)
		}
	}
}

// cascadeDeletes sums the successful DELETEs of the running replicas since their start (a
// lower bound across restarts; the audit log has the exact count).
func cascadeDeletes(cl *cluster) (float64, error) {
	var sum float64
	for _, r := range cl.replicas {
		text, err := r.c.Metrics()
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, `cascade_collected_total{action="delete"}`) {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				sum += v
			}
		}
	}
	return sum, nil
}

// plantCanaries deletes (with cascade's credentials) an object that must exist, has a live
// owner and no dependent, and removes a live owner's reference from another; it returns their
// UIDs ("" when no candidate exists).
func plantCanaries(t *testing.T, ctx context.Context, cp *harness.ControlPlane, kubeconfig string, d *driver, v map[string]Verdict, live map[string]*unstructured.Unstructured) (string, string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	as, err := newAPI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hasDependents := map[string]bool{}
	for _, got := range live {
		for _, r := range got.GetOwnerReferences() {
			hasDependents[string(r.UID)] = true
		}
	}
	liveOwner := func(r *record) (Ref, bool) {
		for _, ref := range r.Refs {
			o := d.recs[ref.UID]
			if o == nil || o.GK != ref.GK() || o.Name != ref.Name || !validOwner(r.k, r.Namespace, o) || o.UID == r.UID {
				continue
			}
			if got, ok := live[o.UID]; ok && got.GetDeletionTimestamp() == nil && v[o.UID].Fate == MustExist {
				return ref, true
			}
		}
		return Ref{}, false
	}
	var del, rem string
	var remOwner Ref
	for _, u := range d.order {
		r := d.recs[u]
		got, ok := live[u]
		if !ok || got.GetDeletionTimestamp() != nil || v[u].Fate != MustExist || hasDependents[u] {
			continue
		}
		if _, ok := liveOwner(r); !ok {
			continue
		}
		if del == "" {
			del = u
		} else if rem == "" {
			if ref, ok := liveOwner(r); ok && ref.UID != del {
				rem, remOwner = u, ref
				break
			}
		}
	}
	if del != "" {
		r := d.recs[del]
		uid := types.UID(del)
		// With both preconditions, as cascade sends every DELETE (the audit check requires it),
		// at the live version (read again after a conflict).
		rv := live[del].GetResourceVersion()
		for attempt := 0; ; attempt++ {
			_, err := as.del(ctx, r.k, r.Namespace, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
			if err == nil {
				break
			}
			if !apierrors.IsConflict(err) || attempt == 4 {
				t.Fatalf("canary delete: %v", err)
			}
			got, gerr := as.res(r.k, r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
			if gerr != nil {
				t.Fatalf("canary delete: %v; reading it again: %v", err, gerr)
			}
			rv = got.GetResourceVersion()
		}
	}
	if rem != "" {
		r := d.recs[rem]
		patch := fmt.Sprintf(`{"metadata":{"uid":%q,"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, rem, remOwner.UID)
		pt := types.StrategicMergePatchType
		if r.k.crd != "" {
			got := live[rem]
			keep := slices.DeleteFunc(refsOf(got), func(x Ref) bool { return x.UID == remOwner.UID })
			b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": got.GetResourceVersion(), "ownerReferences": toOwnerRefs(keep)}})
			patch, pt = string(b), types.MergePatchType
		}
		if _, err := as.res(r.k, r.Namespace).Patch(ctx, r.Name, pt, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("canary reference removal: %v", err)
		}
	}
	t.Logf("canaries: deleted %s, removed a live owner's reference from %s (as cascade)", del, rem)
	return del, rem
}

// dropCanary takes the canary's finding out of findings; it fails the test when the check
// missed it.
func dropCanary(t *testing.T, what string, findings []string, canary string) []string {
	t.Helper()
	if canary == "" {
		return findings
	}
	var out []string
	found := false
	for _, f := range findings {
		if strings.Contains(f, canary) {
			found = true
			continue
		}
		out = append(out, f)
	}
	if !found {
		t.Errorf("canary: the audit check missed the wrongful %s of %s", what, canary)
	}
	return out
}

func hasGCFinalizer(u *unstructured.Unstructured) bool {
	for _, f := range u.GetFinalizers() {
		if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents {
			return true
		}
	}
	return false
}

func summarize(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	total := 0
	for k, v := range m {
		keys = append(keys, k)
		total += v
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, " "))
}
