//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// needsNode marks a line of a docs/examples script that needs a running pod (a port-forward,
// kubectl logs): the local control plane has no kubelet, so the test leaves such lines out and
// gives what they feed from the local cascade instead, as docs/troubleshooting.md says.
const needsNode = "# needs a node"

// docsRunner runs the scripts of docs/examples as an operator would: bash, in a directory that
// holds the clone as cascade/, with kubectl, helm and cascade on the PATH and the control
// plane's admin kubeconfig as $KUBECONFIG.
type docsRunner struct {
	root, dir string
	env       []string
	ran       []string
}

func newDocsRunner(t *testing.T, cp *harness.ControlPlane) *docsRunner {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, bin, home := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "cascade")); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"kubectl": filepath.Join(suite.CP.BinDir, "kubectl"),
		"helm":    filepath.Join(suite.CP.BinDir, "helm"),
		"cascade": suite.CascadeBin,
	} {
		if _, err := os.Stat(target); err != nil {
			t.Fatalf("%v: run make tools helm build (make e2e does)", err)
		}
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cp.KubeconfigPath,
		// helm's caches and configuration in the test's own directory, never the user's.
		"HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	return &docsRunner{root: root, dir: dir, env: env}
}

// run runs docs/examples/name with the extra environment and returns its combined output; a
// failing script fails the test.
func (r *docsRunner) run(t *testing.T, name string, env ...string) string {
	t.Helper()
	return r.runText(t, name, r.read(t, name), env...)
}

// read returns the text of docs/examples/name.
func (r *docsRunner) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.root, "docs", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runText runs text as the script name (its lines that need a node left out).
func (r *docsRunner) runText(t *testing.T, name, text string, env ...string) string {
	t.Helper()
	var script []string
	for line := range strings.Lines(text) {
		if strings.HasSuffix(strings.TrimSpace(line), needsNode) {
			t.Logf("%s: left out (no kubelet here): %s", name, strings.TrimSpace(line))
			continue
		}
		script = append(script, line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eu", "-o", "pipefail", "-c", strings.Join(script, ""))
	cmd.Dir, cmd.Env = r.dir, append(slices.Clone(r.env), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("docs/examples/%s (%s):\n%s", name, time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatalf("docs/examples/%s: %v", name, err)
	}
	r.ran = append(r.ran, name)
	return out.String()
}

// withReach runs reach-cascade.sh, then docs/examples/name, in one shell, as in a reader's
// terminal: the scripts of troubleshooting.md and runbooks.md use its variables.
func (r *docsRunner) withReach(t *testing.T, name string, env ...string) string {
	t.Helper()
	return r.runText(t, name, r.read(t, "reach-cascade.sh")+r.read(t, name), env...)
}

// writeLog puts c's log where the scripts' `kubectl logs ... > cascade.log` (a line that needs
// a node) would write the pods' logs.
func (r *docsRunner) writeLog(t *testing.T, c *harness.Cascade) {
	t.Helper()
	log, err := os.ReadFile(c.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "cascade.log"), log, 0o600); err != nil {
		t.Fatal(err)
	}
}

// mustContain fails the test unless out holds every one of want.
func mustContain(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: the output has no %q", what, w)
		}
	}
}

// deploymentImage is the image of cascade's Deployment in cascade-system.
func deploymentImage(t *testing.T, kube kubernetes.Interface) string {
	t.Helper()
	d, err := kube.AppsV1().Deployments("cascade-system").Get(context.Background(), "cascade", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// deploymentArgs is the arguments of the Deployment cascade in cascade-system.
func deploymentArgs(t *testing.T, kube kubernetes.Interface) []string {
	t.Helper()
	d, err := kube.AppsV1().Deployments("cascade-system").Get(context.Background(), "cascade", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

// nothingOfCascadeLeft checks that the objects an install creates are gone: its Namespace and
// its cluster-scoped objects.
func nothingOfCascadeLeft(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	gone := func(what string, err error) {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after uninstalling: %v (want not found)", what, err)
		}
	}
	_, err := kube.CoreV1().Namespaces().Get(ctx, "cascade-system", metav1.GetOptions{})
	gone("namespace cascade-system", err)
	for _, name := range []string{"cascade", "cascade-metrics-reader", "cascade-debug-reader"} {
		_, err = kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		gone("ClusterRole "+name, err)
	}
	_, err = kube.FlowcontrolV1().FlowSchemas().Get(ctx, "cascade", metav1.GetOptions{})
	gone("FlowSchema cascade", err)
	_, err = dyn.Resource(apiServiceGVR).Get(ctx, aggregatedAPIService, metav1.GetOptions{})
	gone("APIService "+aggregatedAPIService, err)
}

// monitoringObjectsExist checks the ServiceMonitor, PrometheusRule and dashboard ConfigMap an
// install with monitoring creates.
func monitoringObjectsExist(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	for _, res := range []string{"servicemonitors", "prometheusrules"} {
		list, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: res}).Namespace("cascade-system").List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Errorf("%s in cascade-system: %v, %v (want one)", res, list, err)
		}
	}
	cm, err := kube.CoreV1().ConfigMaps("cascade-system").Get(ctx, "cascade-dashboard", metav1.GetOptions{})
	if err != nil || cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap cascade-dashboard: %v (labels %v)", err, cm.GetLabels())
	}
}

// waitAPIServiceAvailable waits until the APIService's Available condition is True.
func waitAPIServiceAvailable(t *testing.T, dyn dynamic.Interface, name string) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, "APIService "+name+" available", func() (bool, error) {
		as, err := dyn.Resource(apiServiceGVR).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
		for _, cond := range conds {
			if m, _ := cond.(map[string]any); m["type"] == "Available" {
				if m["status"] == "True" {
					return true, nil
				}
				return false, fmt.Errorf("%v: %v", m["reason"], m["message"])
			}
		}
		return false, errors.New("no Available condition yet")
	})
}

// TestDocsExamples runs every script of docs/examples, which the operator docs include
// verbatim (docs TestDocsExamples checks that), on a control plane of its own: kube-apiserver
// with docs/examples/audit-policy.yaml as its audit policy, kube-controller-manager's namespace
// controller alone (so that a deleted namespace goes), the Prometheus Operator's CRDs and
// kube-prometheus' ServiceAccount monitoring/prometheus-k8s. No kubelet: the objects are real,
// the pods never start. In the order of docs/install.md and docs/troubleshooting.md:
//   - docs/cli.md's shell completion, which needs no cluster;
//   - kustomize: install (an overlay of the base with the monitoring component and the image),
//     then, with a cascade running as deploy/base's ServiceAccount with the installed
//     Deployment's arguments and serving its aggregated API through the API server:
//     docs/cli.md's cascade status (also as kubectl's plugin) and the three ways to explain;
//     the three troubleshooting trees on situations made for them (an owned dependent; an owner
//     held by a blocking dependent with a foreign finalizer; a dependent cascade collects, then
//     found in the audit log and cascade's JSON log); docs/runbooks.md's diagnoses (docsRunbooks);
//     then the FlowSchema check, upgrade, rollback and uninstall;
//   - docs/migration.md with kustomize (docsMigration): the shadow overlay, the switch to the
//     base and a cascade with its arguments that stamps for a defaultPropagation rule, the
//     rollback to the shadow, cascade uninstall, the removal;
//   - helm: the README's three commands and the uninstall; docs/migration.md's shadow release,
//     switch and rollback (docsMigrationHelm); then install with monitoring, upgrade, rollback,
//     JSON logs, uninstall.
//
// After each step it checks what the step is for (the image, the revisions, the monitoring
// objects, the answers the docs tell the reader to look for, the mode and RBAC of each
// migration step, nothing left after uninstall), and
// at the end that every script ran.
func TestDocsExamples(t *testing.T) {
	// On a control plane of its own: runs beside the other such tests, once the tests on the
	// suite's control plane are done (t.Parallel), so that their waits overlap (CI's time).
	t.Parallel()
	ip := hostIP()
	if ip == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no non-loopback IPv4 address on this host: cascade's aggregated API cannot be reached through the API server")
		}
		t.Skip("no non-loopback IPv4 address on this host: an EndpointSlice may not name loopback")
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	cp := framework.StartControlPlane(t, harness.Options{ExtraAPIServerArgs: []string{
		"--audit-policy-file=" + filepath.Join(root, "docs", "examples", "audit-policy.yaml"),
		"--audit-log-path=" + auditLog, "--audit-log-maxsize=0",
	}})
	if _, err := cp.StartKubeControllerManager("kcm-namespaces", harness.KCMOptions{Controllers: "namespace-controller"}); err != nil {
		t.Fatal(err)
	}
	cs := framework.ClientsFor(t, cp.RestConfig())
	kube, dyn := cs.Kube, cs.Dyn
	r := newDocsRunner(t, cp)

	// docs/cli.md: completion for the shell the scripts run in.
	mustContain(t, "completion.sh", r.run(t, "completion.sh"), "-F __start_cascade cascade")

	// What the docs assume exists: the Prometheus Operator's CRDs, Prometheus' ServiceAccount.
	crds := os.Getenv("CASCADE_PROMETHEUS_OPERATOR_CRDS")
	if crds == "" {
		matches, _ := filepath.Glob(filepath.Join(suite.CP.BinDir, "prometheus-operator-crds-*"))
		if len(matches) != 1 {
			t.Fatalf("found %d copies of the Prometheus Operator's CRDs in %s: run make prometheus-operator-crds (make e2e does)", len(matches), suite.CP.BinDir)
		}
		crds = matches[0]
	}
	for _, crd := range []string{"servicemonitors", "prometheusrules"} {
		kubectl := exec.Command(filepath.Join(suite.CP.BinDir, "kubectl"), "--kubeconfig", cp.KubeconfigPath, "apply", "--server-side", "-f", filepath.Join(crds, "monitoring.coreos.com_"+crd+".yaml"))
		if out, err := kubectl.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		wait := exec.Command(filepath.Join(suite.CP.BinDir, "kubectl"), "--kubeconfig", cp.KubeconfigPath, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crd+".monitoring.coreos.com")
		if out, err := wait.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	cs.CreateNamespace(t, "monitoring")
	if _, err := kube.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-k8s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// docs/install.md, kustomize.
	r.run(t, "install-kustomize.sh")
	if got, want := deploymentImage(t, kube), "registry.example.com/cascade:v0.1.0"; got != want {
		t.Errorf("after install-kustomize.sh the image is %s, want %s", got, want)
	}
	monitoringObjectsExist(t, kube, dyn)

	docsTroubleshooting(t, cp, cs, r, ip, auditLog)

	out := r.run(t, "flowschema-metrics.sh")
	mustContain(t, "flowschema-metrics.sh", out, `flow_schema="cascade"`, `priority_level="workload-high"`)

	r.run(t, "upgrade-kustomize.sh")
	if got, want := deploymentImage(t, kube), "registry.example.com/cascade:v0.2.0"; got != want {
		t.Errorf("after upgrade-kustomize.sh the image is %s, want %s", got, want)
	}
	out = r.run(t, "rollback-kustomize.sh")
	mustContain(t, "rollback-kustomize.sh", out, "registry.example.com/cascade:v0.1.0")
	r.run(t, "uninstall-kustomize.sh")
	nothingOfCascadeLeft(t, kube, dyn)
	if _, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, "prometheus-cascade-metrics", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRoleBinding prometheus-cascade-metrics after uninstall-kustomize.sh: %v", err)
	}

	// docs/migration.md with kustomize: shadow, switch, rollback, uninstall, removal.
	docsMigration(t, cp, cs, r)

	// docs/modes.md: a policy checked for companion mode.
	out = r.run(t, "validate-companion.sh")
	mustContain(t, "validate-companion.sh", out, "not enforced in companion mode")

	// The chart's pre-delete hook Job (cascade uninstall --stop-deployment) runs here as a
	// kubelet would run it.
	hooks := framework.RunHookJobs(t, cp, cs, suite.CascadeBin, "cascade-system")

	// The README's three commands, and docs/install.md's Helm sections.
	out = r.run(t, "quickstart-helm.sh")
	mustContain(t, "quickstart-helm.sh", out, "STATUS: deployed", "mode collector")
	r.run(t, "uninstall-helm.sh")
	nothingOfCascadeLeft(t, kube, dyn)
	if code, ran := hooks.Ran("cascade-uninstall"); !ran || code != 0 {
		t.Errorf("the chart's pre-delete hook cascade-uninstall: ran %v, exit %d; want it run, exit 0", ran, code)
	}
	// docs/migration.md with Helm: shadow, switch, rollback, uninstall.
	docsMigrationHelm(t, cs, r)

	r.run(t, "install-helm.sh")
	monitoringObjectsExist(t, kube, dyn)
	if _, err := kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	out = r.run(t, "upgrade-helm.sh")
	if got, want := deploymentImage(t, kube), "registry.example.com/cascade:v0.2.0"; got != want {
		t.Errorf("after upgrade-helm.sh the image is %s, want %s", got, want)
	}
	mustContain(t, "upgrade-helm.sh", out, "Install complete", "Upgrade complete")
	out = r.run(t, "rollback-helm.sh")
	mustContain(t, "rollback-helm.sh", out, "Rollback was a success", "registry.example.com/cascade:v0.1.0")
	// docs/operations.md, logs.
	out = r.run(t, "logs-helm.sh")
	mustContain(t, "logs-helm.sh", out, "--logging-format=json", "--v=2")
	r.run(t, "uninstall-helm.sh")
	nothingOfCascadeLeft(t, kube, dyn)

	// Every script ran.
	files, err := filepath.Glob(filepath.Join(root, "docs", "examples", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.Contains(r.ran, filepath.Base(f)) {
			t.Errorf("docs/examples/%s was not run", filepath.Base(f))
		}
	}
}

// docsTroubleshooting runs docs/troubleshooting.md's blocks, and docs/cli.md's and
// docs/runbooks.md's that need a cascade, against a cascade running as deploy/base's
// ServiceAccount (installed by the kustomize steps before), reached as in a cluster: explain
// through the API server (the opt-in APIService, the Service cascade-metrics and an
// EndpointSlice naming cascade's address on this host), /readyz and /metrics at the addresses
// the port-forward would give (HEALTH, METRICS), its JSON log as the cascade.log kubectl logs
// would write, and the API server's audit log.
func docsTroubleshooting(t *testing.T, cp *harness.ControlPlane, cs framework.Clients, r *docsRunner, ip, auditLog string) {
	ctx := context.Background()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(kc, "system:serviceaccount:cascade-system:cascade", serviceAccountToken(t, cs)); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, ip)
	metrics := net.JoinHostPort(ip, strconv.Itoa(port))
	// The installed Deployment's arguments (what a pod of it runs), the addresses this host
	// gives, the Lease's namespace (a pod's own namespace in a cluster), and the JSON logs at
	// -v=2 that troubleshooting.md tells the reader to turn on for its log query. No timing of
	// the test's own: the stuck-deletion tree runs with the shipped --stuck-deletion-threshold
	// (5m) and --finalizer-resync-period (30s), as a reader's cascade does (see that tree below).
	args := []string{"--kubeconfig=" + kc, "--leader-elect-resource-namespace=cascade-system"}
	for _, a := range deploymentArgs(t, cs.Kube) {
		if !strings.HasPrefix(a, "--metrics-bind-address=") && !strings.HasPrefix(a, "--health-probe-bind-address=") {
			args = append(args, a)
		}
	}
	args = append(args, "--metrics-bind-address="+metrics, "--logging-format=json", "--v=2")
	c, err := cp.StartSecureCascade("cascade-docs", suite.CascadeBin, harness.ProcessOptions{}, args...)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.WaitReady(waitCtx); err != nil {
		t.Fatalf("%v\n%s", err, c.Tail(40))
	}
	defer func() {
		if t.Failed() {
			t.Logf("cascade's log:\n%s", c.Tail(60))
		}
	}()

	slice := "cascade-metrics-docs"
	createMetricsEndpoint(ctx, t, cs.Kube, slice, ip, port)
	// The default install has no APIService, and `cascade explain` port-forwards to a pod of
	// cascade, which needs a kubelet: here the trees' explain goes through the API server, as
	// with the opt-in component deploy/components/aggregated-api (install-kustomize.sh names
	// it); the uninstall scripts delete the APIService first.
	kubectl := exec.Command(filepath.Join(suite.CP.BinDir, "kubectl"), "--kubeconfig", cp.KubeconfigPath, "apply", "-f",
		filepath.Join(r.root, "deploy", "components", "aggregated-api", "aggregated-api.yaml"))
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	waitAPIServiceAvailable(t, cs.Dyn, aggregatedAPIService)
	env := []string{"HEALTH=" + strings.TrimPrefix(c.HealthURL, "http://"), "METRICS=" + metrics}
	// reach-cascade.sh's variables feed the trees: it runs alone first, then in the same shell
	// before each tree (withReach), as in a reader's terminal.
	r.run(t, "reach-cascade.sh", env...)
	// docs/security.md's /metrics by hand, with the token of Prometheus' ServiceAccount (bound to
	// cascade-metrics-reader by the kustomize install).
	mustContain(t, "metrics-by-hand.sh", r.run(t, "metrics-by-hand.sh", env...), "cascade_build_info{")

	// docs/cli.md's cascade status: the leader publishes its status on its Lease, which the
	// command reads with the admin's kubeconfig; then the same command as kubectl's plugin.
	holder := waitLeaseStatus(t, cs, "cascade.dev/synced", "true")
	pod, _, _ := strings.Cut(holder, "_")
	out := r.run(t, "status.sh")
	mustContain(t, "status.sh", out, "Leader:    "+pod+" (identity "+holder+")", "Lease:     cascade-system/cascade",
		"Mode:      collector", "Sync:      synced", `"leader":"`+pod+`"`, `"mode":"collector"`, `"synced":true`,
		`"policy":"ConfigMap cascade-system/cascade-policy, resourceVersion `, `"cascade.dev/mode":"collector"`)
	out = r.run(t, "kubectl-plugin.sh")
	mustContain(t, "kubectl-plugin.sh", out, "plugins/kubectl-cascade", "Leader:    "+pod+" (identity "+holder+")", "Lease:     cascade-system/cascade")

	// Why is my object not deleted: web-config has a live owner, web. It also blocks web's
	// foreground deletion and carries a foreign finalizer, for the next tree.
	cs.CreateNamespace(t, "shop")
	owner := cs.CreateCM(t, "shop", "web")
	ref := framework.RefTo("v1", "ConfigMap", "web", owner.UID, true)
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: "shop",
		OwnerReferences: []metav1.OwnerReference{ref}, Finalizers: []string{"example.com/hold"}}}
	dep, err = cs.Kube.CoreV1().ConfigMaps("shop").Create(ctx, dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, collectTimeout, "cascade explain sees web-config's live owner", func() (bool, error) {
		out, code := explainRun(t, "--kubeconfig="+cp.KubeconfigPath, "-n", "shop", "configmap/web-config")
		return code == 0 && strings.Contains(out, "SolidOwner"), fmt.Errorf("exit %d: %s", code, out)
	})
	out = r.withReach(t, "not-deleted.sh", env...)
	mustContain(t, "not-deleted.sh", out, "ConfigMap shop/web-config", "SolidOwner", string(owner.UID), "\nok", "cascade_workqueue_depth")

	// docs/cli.md: the same decision by cascade explain (through the API server: the APIService
	// is installed), by kubectl get --raw on the aggregated API's path, and by --url straight to
	// cascade's port (METRICS, where reach-cascade.sh's port-forward would listen), with the
	// admin's token.
	out = r.withReach(t, "explain-routes.sh", env...)
	if n := strings.Count(out, `"reason":"SolidOwner"`); n != 3 {
		t.Errorf("explain-routes.sh: %d of the three ways answer SolidOwner, want all three", n)
	}

	// Why is this owner stuck Terminating: web deleted in the foreground waits for web-config,
	// which its foreign finalizer holds. cascade runs with the Deployment's
	// --stuck-deletion-threshold, 5 minutes, which the test does not wait out (nor shorten: a
	// reader's cascade does not): the DeletionStuck Event comes after it (its message is
	// TestStuckDeletionDiagnosed's), while cascade explain on the owner, which the tree runs
	// next, names the blocking dependent and the finalizer that holds it from the moment the
	// owner waits. So the tree is checked for what it shows before the threshold: no Event
	// yet, the owner's GC finalizer, the dependent held by example.com/hold, the gauges.
	fg := metav1.DeletePropagationForeground
	if err := cs.Kube.CoreV1().ConfigMaps("shop").Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	held := fmt.Sprintf("ConfigMap shop/web-config (%s) blocking, being deleted, held by finalizers [example.com/hold]", dep.UID)
	framework.Eventually(t, collectTimeout, "cascade explain: web waits for web-config, held by its finalizer", func() (bool, error) {
		out, code := explainRun(t, "--kubeconfig="+cp.KubeconfigPath, "-n", "shop", "configmap/web")
		return code == 0 && strings.Contains(out, held), fmt.Errorf("exit %d: %s", code, out)
	})
	out = r.withReach(t, "stuck.sh", env...)
	mustContain(t, "stuck.sh", out, "No resources found", "being deleted, GC finalizers [foregroundDeletion]", held,
		`["foregroundDeletion"]`, `["example.com/hold"]`, `cascade_owners_waiting{finalizer="foregroundDeletion"} 1`,
		`cascade_oldest_waiting_owner_seconds{finalizer="foregroundDeletion"}`)
	if strings.Contains(out, "DeletionStuck") {
		t.Errorf("stuck.sh lists a DeletionStuck Event before the Deployment's 5-minute --stuck-deletion-threshold")
	}
	// Release it: the finalizer's holder finishes, cascade finishes web.
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := cs.Kube.CoreV1().ConfigMaps("shop").Patch(ctx, "web-config", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.WaitCMGone(t, "shop", "web", collectTimeout)

	// Why did cascade delete this: old-config's owner goes, cascade collects it.
	oldOwner := cs.CreateCM(t, "shop", "old-owner")
	cs.CreateCM(t, "shop", "old-config", framework.CMRef(oldOwner))
	cs.DeleteCM(t, "shop", "old-owner", metav1.DeletePropagationBackground)
	cs.WaitCMGone(t, "shop", "old-config", collectTimeout)
	r.writeLog(t, c)
	out = r.run(t, "deleted.sh", "AUDIT_LOG="+auditLog)
	mustContain(t, "deleted.sh", out, `"name":"old-config","code":200`, `"msg":"Deleted dependent whose owners are gone"`)

	docsRunbooks(t, cs, r, c, env, ip, pod, holder)

	// Stopping cascade releases its Lease, which cascade uninstall checks.
	if err := c.Stop(10 * time.Second); err != nil {
		t.Logf("stopping cascade: %v", err)
	}
	if err := cs.Kube.DiscoveryV1().EndpointSlices("cascade-system").Delete(ctx, slice, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitLeaseStatus waits until cascade's Lease in cascade-system has a holder and the annotation
// key says value (the status its leader publishes), and returns the holder's identity.
func waitLeaseStatus(t *testing.T, cs framework.Clients, key, value string) string {
	t.Helper()
	var holder string
	framework.Eventually(t, collectTimeout, fmt.Sprintf("cascade's Lease held, %s=%s", key, value), func() (bool, error) {
		l, err := cs.Kube.CoordinationV1().Leases("cascade-system").Get(context.Background(), "cascade", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, errors.New("no holder")
		}
		holder = *l.Spec.HolderIdentity
		return strings.Contains(l.Annotations[key], value), fmt.Errorf("%s=%q", key, l.Annotations[key])
	})
	return holder
}

// docsRunbooks runs docs/runbooks.md's diagnoses against docsTroubleshooting's cascade (pod is
// its leader's name as the Lease gives it, holder the Lease's holder), each on the situation
// of its alert where one can be made here, and checks that each command shows what its section
// tells the reader to look for:
//   - the install as it is for CascadeDown, CascadeNoLeader and CascadeAPIErrors: the
//     Deployment, /readyz, the metrics reader's binding, the Service's EndpointSlice; the
//     leader, the Lease's RBAC, the election in the log; the request counts by code, the RBAC
//     of a resource, API Priority and Fairness' counts of cascade's FlowSchema;
//   - CascadeUnknownOwnerKinds: a dependent whose owner reference has a typo in apiVersion
//     (app/v1 for apps/v1);
//   - CascadeResourceUnsynced and CascadeDiscoveryFailing: a CRD whose preferred version cannot
//     be listed (its conversion webhook's Service does not exist) and metrics-server's
//     APIService without its Service, both removed afterwards (cascade uninstall, later, must
//     read every resource of every group).
//
// CascadeOwnerWaitingLong's block is stuck.sh, run by the stuck tree. No kubelet: no pod of the
// Deployment exists, so the pods' lines list none (nothing is asserted of them), and the logs
// are the local cascade's (writeLog).
func docsRunbooks(t *testing.T, cs framework.Clients, r *docsRunner, c *harness.Cascade, env []string, ip, pod, holder string) {
	ctx := context.Background()
	out := r.withReach(t, "runbook-down.sh", env...)
	mustContain(t, "runbook-down.sh", out, "deployment.apps/cascade", "\nok", "prometheus-cascade-metrics", "monitoring/prometheus-k8s",
		"cascade-metrics-docs", ip)

	r.writeLog(t, c)
	out = r.withReach(t, "runbook-no-leader.sh", env...)
	mustContain(t, "runbook-no-leader.sh", out, "Leader:    "+pod+" (identity "+holder+")", "\nyes\n", "Elected leader: starting workers")

	out = r.withReach(t, "runbook-api-errors.sh", env...)
	mustContain(t, "runbook-api-errors.sh", out, `cascade_api_requests_total{code="200"`, "\nyes\n",
		`apiserver_flowcontrol_dispatched_requests_total{flow_schema="cascade"`)

	// CascadeUnknownOwnerKinds: legacy-config names its owner with apiVersion app/v1, which no
	// API serves. cascade keeps it and retries; the first failure is in the log.
	cs.CreateCM(t, "shop", "legacy-config", framework.RefTo("app/v1", "Deployment", "web", uuid.NewUUID(), false))
	framework.Eventually(t, collectTimeout, "cascade's log: the owner's kind has no REST mapping", func() (bool, error) {
		return logLines(t, c, "Work item failed", "no matches for kind", "app/v1") > 0, nil
	})
	r.writeLog(t, c)
	out = r.withReach(t, "runbook-unknown-kinds.sh", env...)
	mustContain(t, "runbook-unknown-kinds.sh", out, "app/v1 Deployment/web", "no REST mapping for this apiVersion/kind", "no matches for kind",
		"deployments", "apps/v1")
	if !regexp.MustCompile(`(?m)^cascade_rest_mapping_errors_total [1-9]`).MatchString(out) {
		t.Errorf("runbook-unknown-kinds.sh: cascade_rest_mapping_errors_total is not above 0")
	}
	cs.MustExistCM(t, "shop", "legacy-config")
	if err := cs.Kube.CoreV1().ConfigMaps("shop").Delete(ctx, "legacy-config", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// CascadeResourceUnsynced: widgets.example.com, whose preferred version v2 needs a conversion
	// webhook that does not exist. CascadeDiscoveryFailing: v1beta1.metrics.k8s.io, whose Service
	// kube-system/metrics-server does not exist (metrics-server removed).
	widgets := createUnlistableCRD(t, cs, "shop", "example.com", "Widget")
	metricsAPI := brokenAPIService("metrics.k8s.io", "v1beta1")
	if err := unstructured.SetNestedMap(metricsAPI.Object, map[string]any{"namespace": "kube-system", "name": "metrics-server", "port": int64(443)}, "spec", "service"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Dyn.Resource(apiServiceGVR).Create(ctx, metricsAPI, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	removeMetricsAPI := func() {
		if err := cs.Dyn.Resource(apiServiceGVR).Delete(context.Background(), metricsAPI.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete APIService %s: %v", metricsAPI.GetName(), err)
		}
	}
	t.Cleanup(removeMetricsAPI)
	waitLeaseStatus(t, cs, "cascade.dev/unsynced-resources", "widgets.example.com")
	framework.Eventually(t, collectTimeout, "cascade's log: listing widgets failed, discovery of metrics.k8s.io/v1beta1 failed", func() (bool, error) {
		return logLines(t, c, "Cannot list or watch resource", "widgets.v2.example.com") > 0 && logLines(t, c, "Failed to discover API group", "metrics.k8s.io/v1beta1") > 0, nil
	})
	framework.Eventually(t, collectTimeout, "APIService "+metricsAPI.GetName()+" not available", func() (bool, error) {
		as, err := cs.Dyn.Resource(apiServiceGVR).Get(ctx, metricsAPI.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
		for _, cond := range conds {
			if m, _ := cond.(map[string]any); m["type"] == "Available" {
				return m["status"] == "False", fmt.Errorf("%v: %v", m["status"], m["message"])
			}
		}
		return false, errors.New("no Available condition yet")
	})
	r.writeLog(t, c)
	out = r.withReach(t, "runbook-unsynced.sh", env...)
	mustContain(t, "runbook-unsynced.sh", out, "ok; 1 resources unsynced", "1 resources unsynced, decisions that need them wait: widgets.example.com",
		`cascade_resource_unsynced{group="example.com",resource="widgets",version="v2"} 1`, "Cannot list or watch resource", "widgets.v2.example.com",
		"\nyes\n", "Webhook", "no-such-webhook")
	out = r.withReach(t, "runbook-discovery.sh", env...)
	mustContain(t, "runbook-discovery.sh", out, "v1beta1.metrics.k8s.io", "kube-system/metrics-server", "False",
		`service/metrics-server in "kube-system" is not present`, "Failed to discover API group", "metrics.k8s.io/v1beta1",
		`cascade_discovery_errors_total{group_version="metrics.k8s.io/v1beta1"}`)

	// Both repaired, as the sections' fixes say: the APIService of a backend that is gone
	// deleted, the CRD's object deleted at its stored version, then the CRD.
	removeMetricsAPI()
	stored := widgets
	stored.Version = "v1"
	if err := cs.Dyn.Resource(stored).Namespace("shop").Delete(ctx, "stored-at-v1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteCRD(t, cs, widgets.Resource+"."+widgets.Group)
	framework.WaitGone(t, "CRD "+widgets.Resource+"."+widgets.Group, collectTimeout, func() error {
		_, err := cs.Dyn.Resource(crdGVR).Get(ctx, widgets.Resource+"."+widgets.Group, metav1.GetOptions{})
		return err
	})
}
