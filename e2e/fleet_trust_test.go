//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/policy"
)

// TestFleetKubeconfigIsData (issue 39.2): a member kubeconfig is data, never code or a path. A
// tenant's Secret whose kubeconfig reads cascade's own token from a file (tokenFile: here the
// host's admin token, as /var/run/secrets/kubernetes.io/serviceaccount/token is in a pod) and
// names a server the test runs, and one whose exec plugin would run a command, make members
// that are down, each with a Warning Event on its Secret naming the field; the test's server
// receives no request at all, and the command never runs.
func TestFleetKubeconfigIsData(t *testing.T) {
	cs := suite.Clients(t)
	ctx := context.Background()
	fleetNS := cs.NewNamespace(t)
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte(suite.CP.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "exec-ran")
	kubeconfig := func(user string) []byte {
		return fmt.Appendf(nil, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority-data: %s\nusers:\n- name: u\n  user:\n%s\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n", srv.URL, ca, user)
	}
	putMemberSecret(t, cs, fleetNS, "token-file", kubeconfig("    tokenFile: "+tokenPath))
	putMemberSecret(t, cs, fleetNS, "exec", kubeconfig(fmt.Sprintf("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [\"-c\", \"touch %s\"]\n      interactiveMode: Never", marker)))
	casc := suite.StartCascade(t, "--fleet-secrets-namespace="+fleetNS, "--orphan-record-configmap=")
	for member, field := range map[string]string{"token-file": "tokenFile", "exec": "exec"} {
		framework.Eventually(t, collectTimeout, member+": a Warning Event on its Secret naming "+field, func() (bool, error) {
			evs, err := cs.Kube.CoreV1().Events(fleetNS).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": member, "reason": "MemberUnavailable"}.String()})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, field) {
					if strings.Contains(e.Message, suite.CP.Token) {
						t.Errorf("the Event carries the token: %s", e.Message)
					}
					return true, nil
				}
			}
			return false, nil
		})
		if v, ok := framework.Scrape(t, casc).Value(`cascade_member_up{member="` + member + `"}`); !ok || v != 0 {
			t.Errorf("cascade_member_up{member=%s} = %v (%v), want 0", member, v, ok)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server named by the refused kubeconfigs received %d requests, want none", n)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the exec plugin's command ran (%v)", err)
	}
}

// TestFleetMemberLeavesClean (issue 39.5): a member removed from the fleet (its Secret deleted)
// while its API server answers is left clean by the replica that ran it, and its deletions
// under way finish first: with defaultPropagation Foreground for ConfigMaps in the member's own
// policy, an owner stamped and deleted waits on a blocking dependent held by a foreign
// finalizer when the member leaves; the admission objects go at once, every stamp is lifted
// from objects not being deleted (a foreign finalizer never), the owner's deletion finishes
// once the test lets the dependent go, the orphan record goes, and the leave is counted clean.
// Then `cascade uninstall` on the member refuses without --fleet-member (no Lease there) and,
// with it, finds nothing left.
func TestFleetMemberLeavesClean(t *testing.T) {
	cs := suite.Clients(t)
	ctx := context.Background()
	fleetNS := cs.NewNamespace(t)
	m := startFleetMember(t, fleetNS, "leaver")
	const ns = "shop"
	m.cs.CreateNamespace(t, ns)
	if _, err := m.cs.Kube.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, keepLabel), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	m.cs.CreateNamespace(t, "cascade-system")
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	writePolicy(t, m.cs, "cascade-system", policyDoc(fmt.Sprintf("rules:\n- resource: configmaps\n  namespaceSelector:\n    matchLabels: {%s: \"true\"}\n  defaultPropagation: Foreground\n", keepLabel)))
	level := expectedAdmissionLevel(t, m.cs)
	kc := m.kubeconfig(t, "leaver")
	putMemberSecret(t, cs, fleetNS, "leaver", kc)
	recordNS, recordName := "cascade-system", "cascade-orphaned-owners"
	extra := []string{"--fleet-secrets-namespace=" + fleetNS, "--orphan-record-configmap=" + recordNS + "/" + recordName}
	if level == "none" {
		extra = append(extra, "--default-propagation-period=2s")
	}
	casc := suite.StartCascade(t, extra...)
	framework.WaitForMetric(t, casc, `cascade_member_up{member="leaver"}`, 1, collectTimeout)
	if level != "none" {
		waitAdmission(t, m.cs, configMaps, "ConfigMap", ns, policy.FinalizerForeground)
	}

	idle := m.cs.CreateCM(t, ns, "idle")
	waitStamped(t, m.cs, configMaps, ns, idle.Name, wantStamp([]string{policy.FinalizerForeground}, "Foreground"))
	// An orphan deletion, so that the member has an orphan record.
	orphanOwner := m.cs.CreateCM(t, ns, "orphan-owner")
	m.cs.CreateCM(t, ns, "orphan-dep", framework.CMRef(orphanOwner))
	m.cs.DeleteCM(t, ns, orphanOwner.Name, metav1.DeletePropagationOrphan)
	m.cs.WaitCMGone(t, ns, orphanOwner.Name, collectTimeout)
	if _, err := m.cs.Kube.CoreV1().ConfigMaps(recordNS).Get(ctx, recordName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the member's orphan record: %v", err)
	}
	// A stamped owner deleted with no policy: in the foreground, waiting on its blocking
	// dependent, which a foreign finalizer holds.
	owner := m.cs.CreateCM(t, ns, "owner")
	waitStamped(t, m.cs, configMaps, ns, owner.Name, wantStamp([]string{policy.FinalizerForeground}, "Foreground"))
	yes := true
	ref := framework.CMRef(owner)
	ref.BlockOwnerDeletion = &yes
	blocker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "blocker", Namespace: ns, OwnerReferences: []metav1.OwnerReference{ref}, Finalizers: []string{holdFinalizer}}}
	if _, err := m.cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, blocker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deletePlain(t, m.cs, configMaps, ns, owner.Name)
	framework.Eventually(t, collectTimeout, "the blocker deleted, held by its foreign finalizer", func() (bool, error) {
		return getCR(t, m.cs, configMaps, ns, "blocker").GetDeletionTimestamp() != nil, nil
	})

	// The member leaves the fleet.
	if err := cs.Kube.CoreV1().Secrets(fleetNS).Delete(ctx, "leaver", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, collectTimeout, "the admission objects deleted", func() (bool, error) {
		err := admissionPolicyGone(m.cs, level)
		return apierrors.IsNotFound(err), nil
	})
	waitStamped(t, m.cs, configMaps, ns, idle.Name, wantStamp(nil, ""))
	if o := getCR(t, m.cs, configMaps, ns, owner.Name); o.GetDeletionTimestamp() == nil {
		t.Errorf("the owner is no longer being deleted: %s", stampOf(o))
	}
	if b := getCR(t, m.cs, configMaps, ns, "blocker"); len(b.GetFinalizers()) != 1 || b.GetFinalizers()[0] != holdFinalizer {
		t.Errorf("the blocker's foreign finalizer was touched: %q", b.GetFinalizers())
	}
	// The deletion under way finishes: the blocker let go, the collector (still running for
	// the leave) lifts the owner's foregroundDeletion.
	setFinalizers(t, m.cs, configMaps, ns, "blocker", nil)
	m.cs.WaitCMGone(t, ns, "blocker", collectTimeout)
	m.cs.WaitCMGone(t, ns, owner.Name, collectTimeout)
	framework.WaitForMetric(t, casc, `cascade_fleet_member_cleanups_total{result="clean"}`, 1, collectTimeout)
	framework.Eventually(t, collectTimeout, "the member's series gone", func() (bool, error) {
		_, ok := framework.Scrape(t, casc).Value(`cascade_member_up{member="leaver"}`)
		return !ok, nil
	})
	if _, err := m.cs.Kube.CoreV1().ConfigMaps(recordNS).Get(ctx, recordName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the member's orphan record after it left: %v, want it deleted", err)
	}
	list, err := m.cs.Kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if _, ok := cm.Annotations[policy.DefaultPropagationAnnotation]; ok {
			t.Errorf("%s/%s still stamped: %q", cm.Namespace, cm.Name, cm.Finalizers)
		}
	}
	// Nothing left: what would have cleaned it later says so, on the member, with the
	// documented flag (and refuses without it, as on any cluster with no Lease of cascade's).
	path := filepath.Join(t.TempDir(), "member.kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(suite.CascadeBin, "uninstall", "--kubeconfig="+path).CombinedOutput(); err == nil || !strings.Contains(string(out), "no Lease") {
		t.Errorf("uninstall on a member without --fleet-member: %v\n%s\nwant the refusal", err, out)
	}
	out, err := exec.Command(suite.CascadeBin, "uninstall", "--fleet-member", "--kubeconfig="+path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Fleet member: no Lease looked for") || !strings.Contains(string(out), "none") {
		t.Errorf("uninstall --fleet-member: %v\n%s", err, out)
	}
}
