//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/policy"
)

// companionNamespace holds cascade's ServiceAccount, its Lease and the policy ConfigMap.
const companionNamespace = "cascade-system"

// companionUser is cascade's identity in TestCompanion: a token of its own, so that the audit
// log tells its requests from kube-controller-manager's and the test's (both the admin).
const companionUser = "system:serviceaccount:" + companionNamespace + ":cascade"

// companionAuditPolicy logs every write of cascade's user with its body (Request level), and
// nothing else; its Lease renewals and Events are left out.
const companionAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
  - group: ""
    resources: ["events"]
- level: Request
  users: ["` + companionUser + `"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// TestCompanion (issue 24.3): cascade in --mode=companion beside kube-controller-manager's
// garbage collector, on a control plane of its own that writes an audit log, with a policy
// whose default for ConfigMaps in the selected namespace is Orphan and which has a collect rule
// (not enforced in this mode). cascade takes the Lease and says the collect rule is not
// enforced (a Warning Event on the policy ConfigMap, cascade_policy_rules_unenforced). A plain
// delete of an owner stamped before cascade started (by the pass) and of one stamped at
// creation (by admission) orphans their dependents: the in-tree collector orphans them because
// cascade's finalizer made the delete an orphan delete; in a namespace the rule does not select,
// the same plain delete collects the dependents (the in-tree default), a Secret that the collect:
// Never rule would keep in collector mode included. A foreground owner held by
// a blocking dependent that a foreign finalizer keeps gets cascade's DeletionStuck Event. At the
// end the audit log shows cascade's writes: stamps that add a GC finalizer, its admission
// objects, no DELETE, no ownerReference write and no GC-finalizer removal; two canaries (a
// DELETE and an ownerReference removal sent with cascade's token after it stopped) prove the
// check sees both kinds of write.
func TestCompanion(t *testing.T) {
	// On a control plane of its own: runs beside the other such tests, once the tests on the
	// suite's control plane are done (t.Parallel), so that their waits overlap (CI's time).
	t.Parallel()
	dir := t.TempDir()
	auditPolicy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(auditPolicy, []byte(companionAuditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	cp := framework.StartControlPlane(t, harness.Options{Dir: filepath.Join(dir, "cp"), ExtraAPIServerArgs: []string{
		"--audit-log-path=" + auditLog, "--audit-policy-file=" + auditPolicy, "--audit-log-maxsize=0",
	}})
	cs := companionClients(t, cp)
	ctx := context.Background()

	k, err := cp.StartKubeControllerManager("kcm", harness.KCMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.StopAtCleanup(t, k.Process)
	syncCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := framework.WaitInTreeGCSynced(syncCtx, k, 1); err != nil {
		t.Fatal(err)
	}

	kubeconfig := companionIdentity(t, cp, cs.Kube)
	selected, other, stuckNS := "companion-orphan", "companion-other", "companion-stuck"
	for _, ns := range []string{selected, other, stuckNS} {
		cs.CreateNamespace(t, ns)
	}
	labelNamespace(t, cs, selected)
	doc := policyDoc(fmt.Sprintf("rules:\n- resource: configmaps\n  namespaceSelector:\n    matchLabels: {%s: \"true\"}\n  defaultPropagation: Orphan\n- resource: secrets\n  collect: Never\n", keepLabel))
	policyCM := writePolicy(t, cs, companionNamespace, doc)

	// Before cascade starts: an owner the pass must stamp, with a dependent.
	before := cs.CreateCM(t, selected, "owner-before")
	cs.CreateCM(t, selected, "dep-before", framework.CMRef(before))

	c := framework.StartReady(t, cp, "cascade-companion", suite.CascadeBin,
		"--kubeconfig="+kubeconfig, "--mode=companion", "--policy-configmap="+companionNamespace+"/"+policyName,
		"--leader-elect", "--leader-elect-resource-namespace="+companionNamespace,
		"--stuck-deletion-threshold=2s", "--finalizer-resync-period=1s", "--discovery-period=5s")
	framework.WaitForMetric(t, c, "cascade_leader", 1, collectTimeout)
	if _, err := cs.Kube.CoordinationV1().Leases(companionNamespace).Get(ctx, "cascade", metav1.GetOptions{}); err != nil {
		t.Errorf("the Lease: %v", err)
	}

	// The collect rule is not enforced, and cascade says so.
	framework.WaitForMetric(t, c, "cascade_policy_rules_unenforced", 1, collectTimeout)
	ev := waitEvent(t, cs, companionNamespace, policyCM.UID, "PolicyRulesUnenforced")
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "rules[1].collect") {
		t.Errorf("PolicyRulesUnenforced event: %s %q", ev.Type, ev.Message)
	}

	// The pass stamps the owner that existed; admission stamps owners created now.
	waitFinalizers(t, cs, selected, "owner-before", metav1.FinalizerOrphanDependents)
	waitAdmission(t, cs, corev1.SchemeGroupVersion.WithResource("configmaps"), "ConfigMap", selected, metav1.FinalizerOrphanDependents)
	after := cs.CreateCM(t, selected, "owner-after")
	if !slices.Contains(after.Finalizers, metav1.FinalizerOrphanDependents) {
		t.Errorf("owner-after created with finalizers %v, want the orphan finalizer from admission", after.Finalizers)
	}
	cs.CreateCM(t, selected, "dep-after", framework.CMRef(after))
	unselected := cs.CreateCM(t, other, "owner")
	cs.CreateCM(t, other, "dep", framework.CMRef(unselected))
	// A Secret the unenforced collect: Never rule names, owned by that ConfigMap too.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kept-by-never", OwnerReferences: []metav1.OwnerReference{framework.CMRef(unselected)}}}
	if _, err := cs.Kube.CoreV1().Secrets(other).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Plain deletes (no propagation policy): the in-tree collector collects the unselected
	// namespace's dependent (the built-in default), and orphans the stamped owners' dependents.
	for _, o := range []struct{ ns, name string }{{selected, "owner-before"}, {selected, "owner-after"}, {other, "owner"}} {
		if err := cs.Kube.CoreV1().ConfigMaps(o.ns).Delete(ctx, o.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cs.WaitCMGone(t, other, "dep", collectTimeout)
	framework.WaitGone(t, "Secret "+other+"/kept-by-never (collect: Never is not enforced)", collectTimeout, func() error {
		_, err := cs.Kube.CoreV1().Secrets(other).Get(ctx, "kept-by-never", metav1.GetOptions{})
		return err
	})
	for _, name := range []string{"owner-before", "owner-after"} {
		cs.WaitCMGone(t, selected, name, collectTimeout)
	}
	for _, name := range []string{"dep-before", "dep-after"} {
		if dep := cs.MustExistCM(t, selected, name); len(dep.OwnerReferences) != 0 {
			t.Errorf("%s/%s still references %v after its owner's orphan delete", selected, name, dep.OwnerReferences)
		}
	}

	// A foreground owner held by a blocking dependent that a foreign finalizer keeps.
	fg := cs.CreateCM(t, stuckNS, "fg-owner")
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{holdFinalizer},
		OwnerReferences: []metav1.OwnerReference{framework.RefTo("v1", "ConfigMap", fg.Name, fg.UID, true)}}}
	if _, err := cs.Kube.CoreV1().ConfigMaps(stuckNS).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_, _ = cs.Kube.CoreV1().ConfigMaps(stuckNS).Patch(context.Background(), "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	t.Cleanup(release)
	cs.DeleteCM(t, stuckNS, "fg-owner", metav1.DeletePropagationForeground)
	stuck := waitEvent(t, cs, stuckNS, fg.UID, "DeletionStuck")
	for _, want := range []string{"on finalizer foregroundDeletion for 1 dependent(s)", "ConfigMap " + stuckNS + "/held (being deleted, held by finalizers [" + holdFinalizer + "])"} {
		if !strings.Contains(stuck.Message, want) {
			t.Errorf("DeletionStuck message %q lacks %q", stuck.Message, want)
		}
	}
	if stuck.Source.Component != "cascade" {
		t.Errorf("DeletionStuck from %q, want cascade", stuck.Source.Component)
	}
	// explain says it is companion mode.
	if e := companionExplain(t, c, fg.UID); e.Mode != gc.ModeCompanion || e.BlockingDependents != 1 {
		t.Errorf("explained fg-owner: mode %q, %d blocking dependents; want companion, 1", e.Mode, e.BlockingDependents)
	}
	release()
	cs.WaitCMGone(t, stuckNS, "fg-owner", collectTimeout) // the in-tree collector finishes it
	m := framework.Scrape(t, c)
	if v, _ := m.Value("cascade_companion_refused_writes_total"); v != 0 {
		t.Errorf("cascade_companion_refused_writes_total = %v, want 0 (nothing asks for a forbidden write)", v)
	}
	if v, _ := m.Value("cascade_collected_total"); v != 0 {
		t.Errorf("cascade_collected_total = %v in companion mode, want 0", v)
	}
	if err := c.Stop(10 * time.Second); err != nil {
		t.Logf("stop cascade: %v", err)
	}

	// The canaries, sent with cascade's token now that cascade is stopped.
	canary := companionCanaries(t, cs, kubeconfig, selected)
	var found auditFindings
	framework.Eventually(t, collectTimeout, "both canaries in the audit log", func() (bool, error) {
		var err error
		found, err = readCompanionAudit(auditLog)
		return err == nil && len(found.forbidden) >= 2, err
	})
	if want := []string{"delete configmaps " + selected + "/" + canary.deleted, "ownerReferences configmaps " + selected + "/" + canary.unowned}; !slices.Equal(found.forbidden, want) {
		t.Errorf("forbidden writes by cascade's user: %q, want only the canaries %q", found.forbidden, want)
	}
	if found.stamps == 0 || found.admission == 0 {
		t.Errorf("cascade's writes seen: %d stamps, %d admission objects; want some of each (else the audit check reads nothing)", found.stamps, found.admission)
	}
	t.Logf("audit log: cascade's stamps %d, admission writes %d, other writes %d, forbidden %q", found.stamps, found.admission, found.other, found.forbidden)
}

// companionExplain reads cascade's explanation of uid (/debug/graph).
func companionExplain(t *testing.T, c *harness.Cascade, uid types.UID) gc.Explanation {
	t.Helper()
	resp, err := c.Get(context.Background(), "/debug/graph?uid="+string(uid))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var e gc.Explanation
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("/debug/graph?uid=%s (%s): %v", uid, resp.Status, err)
	}
	return e
}

// companionClients are admin clients of cp.
func companionClients(t *testing.T, cp *harness.ControlPlane) framework.Clients {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	return framework.Clients{Kube: kube, Dyn: dyn}
}

// companionIdentity makes cascade's ServiceAccount (cluster-admin: the test is about what
// cascade chooses to write, not what RBAC lets it) and returns a kubeconfig with its token.
func companionIdentity(t *testing.T, cp *harness.ControlPlane, kube kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: companionNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, err := cp.ClusterAdminKubeconfig(ctx, kube, companionNamespace, "cascade", "companion-cascade", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// waitFinalizers waits until ns/name carries finalizer.
func waitFinalizers(t *testing.T, cs framework.Clients, ns, name, finalizer string) {
	t.Helper()
	framework.Eventually(t, collectTimeout, fmt.Sprintf("%s/%s stamped with %s", ns, name, finalizer), func() (bool, error) {
		cm, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && slices.Contains(cm.Finalizers, finalizer), err
	})
}

type companionCanary struct{ deleted, unowned string }

// companionCanaries sends, with cascade's credentials, one DELETE and one ownerReference
// removal: what the audit check must find.
func companionCanaries(t *testing.T, cs framework.Clients, kubeconfig, ns string) companionCanary {
	t.Helper()
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := companionCanary{deleted: "canary-deleted", unowned: "canary-unowned"}
	owner := cs.CreateCM(t, ns, "canary-owner")
	cs.CreateCM(t, ns, c.deleted)
	dep := cs.CreateCM(t, ns, c.unowned, framework.CMRef(owner))
	if err := as.CoreV1().ConfigMaps(ns).Delete(ctx, c.deleted, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"uid":%q,"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, dep.UID, owner.UID)
	if _, err := as.CoreV1().ConfigMaps(ns).Patch(ctx, c.unowned, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// auditFindings are cascade's writes in the audit log, by what they were.
type auditFindings struct {
	// forbidden are the writes companion mode never sends ("delete RESOURCE NS/NAME",
	// "ownerReferences ...", "finalizer removal ..."), in the log's order.
	forbidden []string
	// stamps add a GC finalizer with the default-propagation annotation; admission are the
	// MutatingAdmissionPolicy and binding; other is anything else (the policy never changes in
	// the test, so no unstamp is expected: one would be counted here).
	stamps, admission, other int
}

// readCompanionAudit reads the audit log: every completed write of cascade's user (the policy
// logs no other), judged on its request body.
func readCompanionAudit(path string) (auditFindings, error) {
	var out auditFindings
	f, err := os.Open(path)
	if err != nil {
		return out, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Stage string `json:"stage"`
			Verb  string `json:"verb"`
			User  struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource, Namespace, Name, APIGroup string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			RequestObject struct {
				Metadata struct {
					Finalizers      *[]string          `json:"finalizers"`
					Annotations     map[string]*string `json:"annotations"`
					OwnerReferences *json.RawMessage   `json:"ownerReferences"`
				} `json:"metadata"`
			} `json:"requestObject"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("audit line %q: %w", sc.Text(), err)
		}
		if e.User.Username != companionUser || e.Stage != "ResponseComplete" {
			continue
		}
		what := e.ObjectRef.Resource + " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		m := e.RequestObject.Metadata
		switch {
		case e.Verb == "delete" || e.Verb == "deletecollection":
			out.forbidden = append(out.forbidden, "delete "+what)
		case m.OwnerReferences != nil:
			out.forbidden = append(out.forbidden, "ownerReferences "+what)
		case e.ObjectRef.APIGroup == "admissionregistration.k8s.io":
			out.admission++
		case m.Finalizers != nil:
			stamp, ok := m.Annotations[policy.DefaultPropagationAnnotation]
			if !ok || stamp == nil || !slices.Contains(*m.Finalizers, policy.StampFinalizer(metav1.DeletionPropagation(*stamp))) {
				out.forbidden = append(out.forbidden, "finalizer removal "+what)
				continue
			}
			out.stamps++
		default:
			out.other++
		}
	}
	return out, sc.Err()
}
