//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// fleetMember is one member control plane of TestFleet: a kube-apiserver on the suite's etcd
// under a prefix of its own, and its admin clients.
type fleetMember struct {
	name string
	cp   *harness.ControlPlane
	cs   framework.Clients
}

func startFleetMember(t *testing.T, prefix, name string) *fleetMember {
	t.Helper()
	cp, err := harness.Start(context.Background(), harness.Options{BinDir: suite.CP.BinDir, SharedEtcd: suite.CP.EtcdURL, EtcdPrefix: "/" + prefix + "-" + name})
	if err != nil {
		t.Fatalf("member %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	return &fleetMember{name: name, cp: cp, cs: framework.ClientsFor(t, cp.RestConfig())}
}

// kubeconfig is a kubeconfig of a ServiceAccount of the member with cluster-admin (sa names it).
func (m *fleetMember) kubeconfig(t *testing.T, sa string) []byte {
	t.Helper()
	m.cs.CreateNamespace(t, "fleet-identity-"+sa)
	path, err := m.cp.ClusterAdminKubeconfig(context.Background(), m.cs.Kube, "fleet-identity-"+sa, sa, "fleet-"+sa, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putMemberSecret creates or replaces the host Secret that makes a member of the fleet
// (multicluster-runtime's convention: the label, the key kubeconfig).
func putMemberSecret(t *testing.T, cs framework.Clients, ns, name string, kubeconfig []byte) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sigs.k8s.io/multicluster-runtime-kubeconfig": "true"}},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	_, err := cs.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cs.Kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// collects checks that cascade collects in m now: an owner and a dependent made under prefix,
// the owner deleted in the background, the dependent gone.
func (m *fleetMember) collects(t *testing.T, ns, prefix string) {
	t.Helper()
	owner := m.cs.CreateCM(t, ns, prefix+"-owner")
	m.cs.CreateCM(t, ns, prefix+"-dep", framework.CMRef(owner))
	m.cs.DeleteCM(t, ns, owner.Name, metav1.DeletePropagationBackground)
	m.cs.WaitCMGone(t, ns, prefix+"-dep", collectTimeout)
}

// everyDeletion deletes owners in m in the background, in the foreground and with the orphan
// policy, and checks what becomes of their dependents under m's policy: b's own (ConfigMaps
// never collected: cmNever) or the host's (Secrets never collected).
func (m *fleetMember) everyDeletion(t *testing.T, ns string, cmNever bool) {
	ctx := context.Background()
	p := "every-" + m.name
	keptWithoutRefs := func(what string, get func() (metav1.Object, error)) {
		framework.Eventually(t, collectTimeout, m.name+": "+what+" kept without its reference", func() (bool, error) {
			o, err := get()
			if err != nil {
				return false, err
			}
			return len(o.GetOwnerReferences()) == 0, nil
		})
	}
	cm := func(name string) func() (metav1.Object, error) {
		return func() (metav1.Object, error) {
			return m.cs.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		}
	}
	bg := m.cs.CreateCM(t, ns, p+"-bg-owner")
	m.cs.CreateCM(t, ns, p+"-bg-dep", framework.CMRef(bg))
	yes := true
	fg := m.cs.CreateCM(t, ns, p+"-fg-owner")
	fgRef := framework.CMRef(fg)
	fgRef.BlockOwnerDeletion = &yes
	m.cs.CreateCM(t, ns, p+"-fg-dep", fgRef)
	orphan := m.cs.CreateCM(t, ns, p+"-orphan-owner")
	m.cs.CreateCM(t, ns, p+"-orphan-dep", framework.CMRef(orphan))
	secretOwner := m.cs.CreateCM(t, ns, p+"-secret-owner")
	if _, err := m.cs.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: p + "-secret-dep", OwnerReferences: []metav1.OwnerReference{framework.CMRef(secretOwner)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	m.cs.DeleteCM(t, ns, bg.Name, metav1.DeletePropagationBackground)
	m.cs.DeleteCM(t, ns, fg.Name, metav1.DeletePropagationForeground)
	m.cs.DeleteCM(t, ns, orphan.Name, metav1.DeletePropagationOrphan)
	m.cs.DeleteCM(t, ns, secretOwner.Name, metav1.DeletePropagationBackground)

	m.cs.WaitCMGone(t, ns, fg.Name, collectTimeout)
	m.cs.WaitCMGone(t, ns, orphan.Name, collectTimeout)
	keptWithoutRefs("the orphan owner's dependent", cm(p+"-orphan-dep"))
	if cmNever {
		keptWithoutRefs("the background owner's dependent (collect: Never)", cm(p+"-bg-dep"))
		keptWithoutRefs("the foreground owner's dependent (collect: Never)", cm(p+"-fg-dep"))
	} else {
		m.cs.WaitCMGone(t, ns, p+"-bg-dep", collectTimeout)
		m.cs.WaitCMGone(t, ns, p+"-fg-dep", collectTimeout)
	}
	secret := func() (metav1.Object, error) {
		return m.cs.Kube.CoreV1().Secrets(ns).Get(ctx, p+"-secret-dep", metav1.GetOptions{})
	}
	if cmNever { // b's own policy has no rule for Secrets: collected
		framework.Eventually(t, collectTimeout, m.name+": the Secret dependent collected", func() (bool, error) {
			_, err := secret()
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	} else {
		keptWithoutRefs("the Secret dependent (the host's collect: Never)", secret)
	}
}

// keeps checks that cascade does not collect in m (not a member): a dependent of an owner
// deleted in the background is still there after wait.
func (m *fleetMember) keeps(t *testing.T, ns, prefix string, wait time.Duration) {
	t.Helper()
	owner := m.cs.CreateCM(t, ns, prefix+"-owner")
	m.cs.CreateCM(t, ns, prefix+"-dep", framework.CMRef(owner))
	m.cs.DeleteCM(t, ns, owner.Name, metav1.DeletePropagationBackground)
	time.Sleep(wait)
	m.cs.MustExistCM(t, ns, prefix+"-dep")
}

// TestFleet (issue 33.1, 33.2, 33.3, 33.7): one cascade in fleet mode on the suite's control
// plane as the host collects in member kube-apiservers that share the suite's etcd, each under
// its own prefix, listed by kubeconfig Secrets in a host namespace (multicluster-runtime's
// convention):
//   - four members: background, foreground and orphan deletion in each, all at once, and each
//     one's policy (b's own: ConfigMaps never collected; the others the host's: Secrets never
//     collected);
//   - identical names in two members are two objects: an owner deleted in one takes its
//     dependent there, never the other's;
//   - a member added later is collected within seconds, though it serves a broken aggregated
//     API; a member's kubeconfig rotated to
//     another ServiceAccount, the old one deleted (its tokens revoked), keeps being collected;
//   - a member's kube-apiserver killed: the others keep collecting, /readyz stays ready and
//     names it, cascade_member_up says 0; restarted, it is collected again by itself;
//   - a member removed (its Secret deleted) is no longer collected, and its series go; added
//     and removed five times more, it leaves cascade's goroutines and connections at their
//     baseline.
func TestFleet(t *testing.T) {
	cs := suite.Clients(t)
	ctx := context.Background()
	fleetNS := cs.NewNamespace(t)
	prefix := fleetNS
	a, b, c, d := startFleetMember(t, prefix, "a"), startFleetMember(t, prefix, "b"), startFleetMember(t, prefix, "c"), startFleetMember(t, prefix, "d")
	const ns = "shop"
	for _, m := range []*fleetMember{a, b, c, d} {
		m.cs.CreateNamespace(t, ns)
	}
	// The host's policy (the one of every member without a policy of its own): Secrets are
	// never collected.
	if _, err := cs.Kube.CoreV1().ConfigMaps(fleetNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "host-policy"},
		Data:       map[string]string{"policy.yaml": "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: secrets\n  collect: Never\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// b's own policy: ConfigMaps are never collected there (and Secrets are, by default).
	b.cs.CreateNamespace(t, "cascade-system")
	if _, err := b.cs.Kube.CoreV1().ConfigMaps("cascade-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cascade-policy"},
		Data:       map[string]string{"policy.yaml": "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: configmaps\n  collect: Never\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	putMemberSecret(t, cs, fleetNS, "a", a.kubeconfig(t, "one"))
	putMemberSecret(t, cs, fleetNS, "b", b.kubeconfig(t, "one"))
	putMemberSecret(t, cs, fleetNS, "d", d.kubeconfig(t, "one"))

	casc := suite.StartCascade(t, "--fleet-secrets-namespace="+fleetNS, "--orphan-record-configmap=", "--policy-configmap="+fleetNS+"/host-policy")
	framework.WaitForMetric(t, casc, `cascade_fleet_members{state="up"}`, 3, collectTimeout)

	// Identical objects in a and b; the owner deleted in a only.
	for _, m := range []*fleetMember{a, b} {
		owner := m.cs.CreateCM(t, ns, "same-owner")
		m.cs.CreateCM(t, ns, "same-dep", framework.CMRef(owner))
	}
	a.cs.DeleteCM(t, ns, "same-owner", metav1.DeletePropagationBackground)
	a.cs.WaitCMGone(t, ns, "same-dep", collectTimeout)
	b.cs.MustExistCM(t, ns, "same-owner")
	b.cs.MustExistCM(t, ns, "same-dep")

	// Foreground and orphan in a.
	fgOwner := a.cs.CreateCM(t, ns, "fg-owner")
	yes := true
	fgRef := framework.CMRef(fgOwner)
	fgRef.BlockOwnerDeletion = &yes
	a.cs.CreateCM(t, ns, "fg-dep", fgRef)
	a.cs.DeleteCM(t, ns, "fg-owner", metav1.DeletePropagationForeground)
	a.cs.WaitCMGone(t, ns, "fg-dep", collectTimeout)
	a.cs.WaitCMGone(t, ns, "fg-owner", collectTimeout)
	orphanOwner := a.cs.CreateCM(t, ns, "orphan-owner")
	a.cs.CreateCM(t, ns, "orphan-dep", framework.CMRef(orphanOwner))
	a.cs.DeleteCM(t, ns, "orphan-owner", metav1.DeletePropagationOrphan)
	a.cs.WaitCMGone(t, ns, "orphan-owner", collectTimeout)
	if refs := a.cs.MustExistCM(t, ns, "orphan-dep").OwnerReferences; len(refs) != 0 {
		t.Errorf("orphan-dep after its owner's orphan deletion: references %v", refs)
	}

	// b's policy: collect Never there, while a (the host's policy, which has no rule for
	// ConfigMaps) collects.
	bOwner := b.cs.CreateCM(t, ns, "never-owner")
	b.cs.CreateCM(t, ns, "never-dep", framework.CMRef(bOwner))
	b.cs.DeleteCM(t, ns, "never-owner", metav1.DeletePropagationBackground)
	framework.Eventually(t, collectTimeout, "b's never-dep loses its reference (collect: Never), kept", func() (bool, error) {
		return len(b.cs.MustExistCM(t, ns, "never-dep").OwnerReferences) == 0, nil
	})
	a.collects(t, ns, "policy")

	// c joins, serving a broken aggregated API (an APIService whose service does not exist):
	// its discovery fails for that group, and c is collected all the same.
	broken := brokenAPIService("broken.fleet.e2e.cascade.dev", "v1")
	if _, err := c.cs.Dyn.Resource(apiServiceGVR).Create(ctx, broken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	putMemberSecret(t, cs, fleetNS, "c", c.kubeconfig(t, "one"))
	c.collects(t, ns, "joined")
	framework.Eventually(t, collectTimeout, "c up despite its broken aggregated API", func() (bool, error) {
		v, ok := framework.Scrape(t, casc).Value(`cascade_member_up{member="c"}`)
		return ok && v == 1, nil
	})

	// Every member at once: background, foreground and orphan deletion, and its policy's rule.
	t.Run("every member at once", func(t *testing.T) {
		for _, m := range []*fleetMember{a, b, c, d} {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				m.everyDeletion(t, ns, m == b)
			})
		}
	})

	// a's kubeconfig rotated to another ServiceAccount; the first one deleted (its tokens
	// revoked with it).
	putMemberSecret(t, cs, fleetNS, "a", a.kubeconfig(t, "two"))
	time.Sleep(3 * time.Second) // the provider's change reached the fleet
	if err := a.cs.Kube.CoreV1().ServiceAccounts("fleet-identity-one").Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.collects(t, ns, "rotated")

	// b's kube-apiserver killed: a and c keep collecting; /readyz stays ready and names b.
	if err := b.cp.RestartAPIServerAfter(ctx, syscall.SIGKILL, func() {
		a.collects(t, ns, "b-down")
		c.collects(t, ns, "b-down")
		framework.Eventually(t, collectTimeout, "cascade_member_up{member=b} 0", func() (bool, error) {
			v, ok := framework.Scrape(t, casc).Value(`cascade_member_up{member="b"}`)
			return ok && v == 0, nil
		})
		code, body := readyz(t, casc.HealthURL)
		if code != 200 || !strings.Contains(body, "members: 3 synced, 1 not (") || strings.Contains(body, "b (") || strings.Contains(body, "refused") {
			t.Errorf("/readyz while b is down: %d\n%s\nwant 200, the counts, and no member named (the health port answers anyone)", code, body)
		}
	}); err != nil {
		t.Fatal(err)
	}
	framework.WaitForMetric(t, casc, `cascade_member_up{member="b"}`, 1, 2*collectTimeout)
	bOwner2 := b.cs.CreateCM(t, ns, "back-owner")
	b.cs.CreateCM(t, ns, "back-dep", framework.CMRef(bOwner2))
	b.cs.DeleteCM(t, ns, "back-owner", metav1.DeletePropagationBackground)
	framework.Eventually(t, collectTimeout, "b collected again after its restart (collect: Never: the reference goes)", func() (bool, error) {
		return len(b.cs.MustExistCM(t, ns, "back-dep").OwnerReferences) == 0, nil
	})

	// c leaves the fleet.
	if err := cs.Kube.CoreV1().Secrets(fleetNS).Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, collectTimeout, "c's series gone", func() (bool, error) {
		_, ok := framework.Scrape(t, casc).Value(`cascade_member_up{member="c"}`)
		return !ok, nil
	})
	c.keeps(t, ns, "left", 5*time.Second)
	if n, _ := framework.Scrape(t, casc).Value(`cascade_fleet_members{state="up"}`); n != 3 {
		t.Errorf("cascade_fleet_members{state=up} = %v after c left, want 3", n)
	}

	// A member added and removed again and again leaves nothing behind: cascade's goroutines
	// and open connections come back to what they were.
	goroutines := func() float64 { v, _ := framework.Scrape(t, casc).Value("go_goroutines"); return v }
	connections := func() float64 { v, _ := framework.Scrape(t, casc).Value("cascade_fleet_connections"); return v }
	// One connection per member (a, b and d): its clients share one HTTP/2 connection.
	framework.Eventually(t, collectTimeout, "one connection per member", func() (bool, error) {
		return connections() == 3, nil
	})
	baseG, baseC := goroutines(), connections()
	const cycles = 5
	kc := c.kubeconfig(t, "cycles")
	var withC float64
	for i := range cycles {
		putMemberSecret(t, cs, fleetNS, "c", kc)
		framework.Eventually(t, collectTimeout, fmt.Sprintf("cycle %d: c up", i), func() (bool, error) {
			v, ok := framework.Scrape(t, casc).Value(`cascade_member_up{member="c"}`)
			return ok && v == 1, nil
		})
		if i == 0 {
			withC = goroutines()
		}
		if err := cs.Kube.CoreV1().Secrets(fleetNS).Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, collectTimeout, fmt.Sprintf("cycle %d: c gone", i), func() (bool, error) {
			_, ok := framework.Scrape(t, casc).Value(`cascade_member_up{member="c"}`)
			return !ok, nil
		})
	}
	var g, conns float64
	framework.Eventually(t, collectTimeout, "goroutines and connections back to their baseline", func() (bool, error) {
		g, conns = goroutines(), connections()
		return g <= baseG*1.02 && conns <= baseC, nil
	})
	t.Logf("one idle member with the built-in APIs: %v goroutines; after %d add/remove cycles of it: %v goroutines (baseline %v), %v connections to members (baseline %v)", withC-baseG, cycles, g, baseG, conns, baseC)
}

// TestFleetClusterAPI (issue 33.1): Cluster API's convention as a provider: a Secret of type
// cluster.x-k8s.io/secret named CLUSTER-kubeconfig, labelled cluster.x-k8s.io/cluster-name,
// with the kubeconfig under value, makes the member CLUSTER; a Secret that breaks the convention
// (another type, a name that is not CLUSTER-kubeconfig) makes none; the member's Secret deleted,
// it leaves.
func TestFleetClusterAPI(t *testing.T) {
	cs := suite.Clients(t)
	ctx := context.Background()
	fleetNS := cs.NewNamespace(t)
	m := startFleetMember(t, fleetNS, "capi")
	m.cs.CreateNamespace(t, "shop")
	kc := m.kubeconfig(t, "capi")
	put := func(name string, typ corev1.SecretType, cluster string) {
		t.Helper()
		if _, err := cs.Kube.CoreV1().Secrets(fleetNS).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": cluster}},
			Type:       typ, Data: map[string][]byte{"value": kc},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("workload-kubeconfig", "cluster.x-k8s.io/secret", "workload")
	put("other-kubeconfig", corev1.SecretTypeOpaque, "other")    // not Cluster API's type
	put("renamed", "cluster.x-k8s.io/secret", "renamed-cluster") // not CLUSTER-kubeconfig
	casc := suite.StartCascade(t, "--fleet-cluster-api-namespace="+fleetNS, "--orphan-record-configmap=")
	framework.WaitForMetric(t, casc, `cascade_member_up{member="workload"}`, 1, collectTimeout)
	m.collects(t, "shop", "capi")
	if members := framework.Scrape(t, casc).Samples("cascade_member_up"); len(members) != 1 {
		t.Errorf("cascade_member_up: %v: want the one member workload, none for the Secrets off the convention", members)
	}
	if err := cs.Kube.CoreV1().Secrets(fleetNS).Delete(ctx, "workload-kubeconfig", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, collectTimeout, "workload gone from the fleet", func() (bool, error) {
		_, ok := framework.Scrape(t, casc).Value(`cascade_member_up{member="workload"}`)
		return !ok, nil
	})
	m.keeps(t, "shop", "capi-left", 5*time.Second)
}

// TestFleetOverlay (issue 33.6): deploy/overlays/fleet passes a server dry run; its host
// ClusterRole reads no resource at all (cascade collects nothing in the host), Secrets are
// listed and watched (never got) in the fleet namespace alone, where cascade also writes its
// Events, and the Deployment names that namespace as its provider. deploy's TestFleetRBAC checks
// each rule against what fleet mode uses.
func TestFleetOverlay(t *testing.T) {
	chartNamespaceExists(t)
	dir := filepath.Join(deployDir(t), "overlays", "fleet")
	// The fleet namespace exists (applied, as an install would have): the dry run's Role in it
	// needs it.
	if _, err := adminKubectl("apply", "-f", filepath.Join(dir, "fleet-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	out := serverDryRun(t, "deploy/overlays/fleet", "-k", dir)
	for _, obj := range []string{"deployment.apps/cascade ", "role.rbac.authorization.k8s.io/cascade-fleet-members ", "rolebinding.rbac.authorization.k8s.io/cascade-fleet-members "} {
		if !strings.Contains(out, obj) {
			t.Errorf("the server dry run does not name %s:\n%s", obj, out)
		}
	}
	objs := objects(t, kustomize(t, dir))
	role := into[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "cascade"))
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if v != "create" && v != "patch" && v != "update" {
				t.Errorf("the host ClusterRole grants %s on %v: cascade reads nothing cluster-wide in the host", v, r.Resources)
			}
		}
		if slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "secrets") {
			t.Errorf("the host ClusterRole names %v", r.Resources)
		}
	}
	members := into[rbacv1.Role](t, find(t, objs, "Role", "cascade-fleet-members"))
	if want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}; members.Namespace != "cascade-fleet" || !reflect.DeepEqual(members.Rules, want) {
		t.Errorf("Role cascade-fleet-members: %+v, want in cascade-fleet only %+v", members, want)
	}
	dep := into[appsv1.Deployment](t, find(t, objs, "Deployment", "cascade"))
	if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--fleet-secrets-namespace=cascade-fleet") || !slices.Contains(args, "--fleet-shards=2") {
		t.Errorf("the Deployment's arguments %v lack --fleet-secrets-namespace=cascade-fleet or --fleet-shards=2 (its two replicas share the members)", args)
	}
	// The shards' and replicas' Leases, named as they come, in the Lease namespace only.
	election := into[rbacv1.Role](t, find(t, objs, "Role", "cascade-leader-election"))
	sharded := false
	for _, r := range election.Rules {
		if slices.Contains(r.Resources, "leases") && len(r.ResourceNames) == 0 && slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "delete") {
			sharded = true
		}
	}
	if !sharded || election.Namespace != "cascade-system" {
		t.Errorf("Role cascade-leader-election %+v: want list, update and delete of the shards' Leases in cascade-system", election)
	}
}

// TestChartFleet (issue 33.6): the chart's fleet values render what deploy/overlays/fleet
// creates (fleet.secretsNamespace: the same objects, rules, bindings and Deployment arguments),
// and it passes a server dry run; no uninstall hook (cascade writes nothing in the host, and
// its host role may not stop the Deployment), the helm test kept. The Cluster API provider and
// the member values render their flags, with the Secrets' Role in that namespace and a host
// ClusterRole that reads nothing; the schema refuses two providers, fleet mode in another mode
// than collector, member values or a selector without their provider, and bad values.
func TestChartFleet(t *testing.T) {
	chartNamespaceExists(t)
	dir := filepath.Join(deployDir(t), "overlays", "fleet")
	if _, err := adminKubectl("apply", "-f", filepath.Join(dir, "fleet-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	rendered := helmTemplate(t, "fleet.secretsNamespace=cascade-fleet")
	objs := objects(t, rendered)
	matchesKustomize(t, objs, "overlays/fleet")
	kinds := strings.Join(kindNames(objs), " ")
	if strings.Contains(kinds, "Job/"+chartNamespace+"/cascade-uninstall") {
		t.Errorf("fleet mode renders the uninstall hook: %s", kinds)
	}
	if !strings.Contains(kinds, "Pod/"+chartNamespace+"/cascade-test") {
		t.Errorf("fleet mode renders no helm test: %s", kinds)
	}
	serverDryRunStream(t, "the chart in fleet mode", rendered)
	if out, err := helm(t, "lint", "--strict", filepath.Join(deployDir(t), "chart"), "--set", "fleet.secretsNamespace=cascade-fleet", "--set", "monitoring.dashboard.enabled=true"); err != nil {
		t.Errorf("helm lint in fleet mode: %v", err)
	} else {
		t.Log(strings.TrimSpace(out))
	}

	capi := objects(t, helmTemplateValues(t, `
fleet:
  clusterAPINamespace: capi
  memberPolicyConfigMap: ""
  memberQPS: 2.5
  memberBurst: 5
  memberWorkers: 4
`))
	args := into[appsv1.Deployment](t, find(t, capi, "Deployment", "cascade")).Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--fleet-cluster-api-namespace=capi", "--fleet-member-policy-configmap=", "--fleet-member-qps=2.5", "--fleet-member-burst=5", "--fleet-member-workers=4"} {
		if !slices.Contains(args, want) {
			t.Errorf("the Cluster API values' arguments %v lack %s", args, want)
		}
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--fleet-secrets-") }) {
		t.Errorf("the Cluster API values' arguments %v name the Secrets provider", args)
	}
	// Cluster API: the kubeconfig Secrets are also got, each by name.
	capiRole := into[rbacv1.Role](t, find(t, capi, "Role", "cascade-fleet-members"))
	if want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}; capiRole.Namespace != "capi" || !reflect.DeepEqual(capiRole.Rules, want) {
		t.Errorf("Role cascade-fleet-members %+v: want in capi %+v", capiRole, want)
	}
	for _, r := range into[rbacv1.ClusterRole](t, find(t, capi, "ClusterRole", "cascade")).Rules {
		if slices.ContainsFunc(r.Verbs, func(v string) bool { return v == "get" || v == "list" || v == "watch" || v == "delete" || v == "*" }) {
			t.Errorf("the host ClusterRole in fleet mode grants %v on %v", r.Verbs, r.Resources)
		}
	}
	// Off: no fleet flag, no fleet Role, the collector's ClusterRole.
	off := objects(t, helmTemplate(t))
	if a := into[appsv1.Deployment](t, find(t, off, "Deployment", "cascade")).Spec.Template.Spec.Containers[0].Args; slices.ContainsFunc(a, func(a string) bool { return strings.HasPrefix(a, "--fleet-") }) {
		t.Errorf("fleet off: arguments %v", a)
	}
	if slices.ContainsFunc(off, func(o *unstructured.Unstructured) bool { return o.GetName() == "cascade-fleet-members" }) {
		t.Errorf("fleet off renders cascade-fleet-members: %v", kindNames(off))
	}

	chart := filepath.Join(deployDir(t), "chart")
	for _, tc := range []struct {
		set  []string
		path string // in the error
	}{
		{[]string{"fleet.secretsNamespace=a", "fleet.clusterAPINamespace=b"}, "'not' failed"},
		{[]string{"fleet.secretsNamespace=a", "mode=companion"}, "/mode"},
		{[]string{"fleet.clusterAPINamespace=a", "mode=dry-run"}, "/mode"},
		{[]string{"fleet.memberWorkers=4"}, "/fleet/"},
		{[]string{"fleet.secretsSelector=team=a"}, "/fleet/secretsNamespace"},
		{[]string{"fleet.clusterAPINamespace=a", "fleet.secretsSelector=team=a"}, "/fleet/secretsNamespace"},
		{[]string{"fleet.secretsNamespace=Not_A_Namespace"}, "/fleet/secretsNamespace"},
		{[]string{"fleet.secretsNamespace=a", "fleet.memberWorkers=101"}, "/fleet/memberWorkers"},
		{[]string{"fleet.secretsNamespace=a", "fleet.memberBurst=0"}, "/fleet/memberBurst"},
		{[]string{"fleet.secretsNamespace=a", "fleet.memberQPS=0"}, "/fleet/memberQPS"},
		{[]string{"fleet.secretsNamespace=a", "fleet.memberPolicyConfigMap=no-namespace"}, "/fleet/memberPolicyConfigMap"},
		{[]string{"fleet.kubeconfigDir=/x"}, "/fleet"},
	} {
		schemaRefuses(t, chart, tc.set, tc.path)
	}
}

// TestFleetExplain (issue 33.6): a fleet cascade with exactly deploy/overlays/fleet's RBAC in
// the host (its ClusterRole, its Role on the fleet namespace's Secrets and its binding of the
// API server's authentication reader, for a ServiceAccount of the test's own), serving
// securely, collects in its members, none of its requests refused, and explains a member's
// objects only to a user who may get that member:
//   - a tenant bound as docs/examples/fleet-member-explainer.yaml shows gets its member's
//     explanation (the aggregated API's path, at cascade's port, as a port-forward reaches it)
//     and 403 for another member and for one that does not exist; 400 without a member;
//   - an operator with the overlay's cascade-debug-reader (get on every member) explains any
//     member's object through /debug/graph, with `cascade explain --member --url` too, and gets
//     404 for a member that does not run;
//   - a user without a role gets 403.
//
// Two members are one kube-apiserver listed twice (two Secrets): two members to cascade.
func TestFleetExplain(t *testing.T) {
	cs := suite.Clients(t)
	ctx := context.Background()
	ns := cs.NewNamespace(t) // the test's ServiceAccounts
	fleetNS := cs.NewNamespace(t)
	m := startFleetMember(t, fleetNS, "tenant")
	m.cs.CreateNamespace(t, "shop")
	owner := m.cs.CreateCM(t, "shop", "owner")
	dep := m.cs.CreateCM(t, "shop", "dep", framework.CMRef(owner))
	kc := m.kubeconfig(t, "one")
	putMemberSecret(t, cs, fleetNS, "tenant-a", kc)
	putMemberSecret(t, cs, fleetNS, "tenant-b", kc)

	// The test's identities: cascade and three users, ServiceAccounts of ns with tokens.
	account := func(name string) (rbacv1.Subject, string) {
		t.Helper()
		if _, err := cs.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tok, err := cs.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}, tok.Status.Token
	}
	cascadeSA, cascadeToken := account("cascade")
	tenantSA, tenantToken := account("tenant")
	operatorSA, operatorToken := account("operator")
	_, nobodyToken := account("nobody")
	// clusterRole creates a ClusterRole of rules under a name of the test's, bound to subject.
	clusterRole := func(name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
		t.Helper()
		name = "e2e-" + ns + "-" + name
		crs, crbs := cs.Kube.RbacV1().ClusterRoles(), cs.Kube.RbacV1().ClusterRoleBindings()
		t.Cleanup(func() {
			_ = crbs.Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = crs.Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		if _, err := crs.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := crbs.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// cascade: the overlay's host RBAC, and nothing else.
	overlay := objects(t, kustomize(t, filepath.Join(deployDir(t), "overlays", "fleet")))
	clusterRole("cascade", into[rbacv1.ClusterRole](t, find(t, overlay, "ClusterRole", "cascade")).Rules, cascadeSA)
	secrets := into[rbacv1.Role](t, find(t, overlay, "Role", "cascade-fleet-members"))
	if _, err := cs.Kube.RbacV1().Roles(fleetNS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cascade-fleet-members"}, Rules: secrets.Rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Kube.RbacV1().RoleBindings(fleetNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cascade-fleet-members"}, Subjects: []rbacv1.Subject{cascadeSA},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cascade-fleet-members"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	authReader := into[rbacv1.RoleBinding](t, find(t, overlay, "RoleBinding", "cascade-authentication-reader"))
	readerBinding := "e2e-" + ns + "-cascade-authentication-reader"
	t.Cleanup(func() {
		_ = cs.Kube.RbacV1().RoleBindings(authReader.Namespace).Delete(context.Background(), readerBinding, metav1.DeleteOptions{})
	})
	if _, err := cs.Kube.RbacV1().RoleBindings(authReader.Namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: readerBinding},
		Subjects: []rbacv1.Subject{cascadeSA}, RoleRef: authReader.RoleRef}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The tenant: the docs' example, for member tenant-a, bound to the tenant's ServiceAccount.
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(root, "docs", "examples", "fleet-member-explainer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	exampleObjs := objects(t, string(example))
	exampleRole := into[rbacv1.ClusterRole](t, find(t, exampleObjs, "ClusterRole", "cascade-explain-tenant-a"))
	if b := into[rbacv1.ClusterRoleBinding](t, find(t, exampleObjs, "ClusterRoleBinding", "cascade-explain-tenant-a-alice")); b.RoleRef.Name != exampleRole.Name {
		t.Fatalf("the example's binding refers to %+v, not its ClusterRole", b.RoleRef)
	}
	clusterRole("tenant", exampleRole.Rules, tenantSA)
	// The operator: the overlay's cascade-debug-reader.
	clusterRole("operator", into[rbacv1.ClusterRole](t, find(t, overlay, "ClusterRole", "cascade-debug-reader")).Rules, operatorSA)

	// The API server's RBAC authorizer sees new bindings through its informer: wait until it
	// answers as cascade will ask, so that no denial is cached before they are in force.
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	for _, a := range []struct {
		who   rbacv1.Subject
		attrs authorizationv1.SubjectAccessReviewSpec
	}{
		{cascadeSA, authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "watch", Resource: "secrets", Namespace: fleetNS}}},
		{cascadeSA, authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}}},
		{tenantSA, authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Group: "debug.cascade.dev", Resource: "members", Name: "tenant-a"}}},
		{operatorSA, authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Group: "debug.cascade.dev", Resource: "members", Name: "tenant-b"}}},
		{operatorSA, authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/debug/graph"}}},
	} {
		spec := a.attrs
		spec.User, spec.Groups = "system:serviceaccount:"+ns+":"+a.who.Name, groups
		framework.Eventually(t, 30*time.Second, fmt.Sprintf("%s allowed %+v", spec.User, a.attrs), func() (bool, error) {
			sar, err := cs.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed, err
		})
	}

	cascadeKC := filepath.Join(t.TempDir(), "cascade.kubeconfig")
	if err := suite.CP.WriteKubeconfig(cascadeKC, "system:serviceaccount:"+ns+":cascade", cascadeToken); err != nil {
		t.Fatal(err)
	}
	casc := suite.StartSecureCascade(t, "--kubeconfig="+cascadeKC, "--fleet-secrets-namespace="+fleetNS, "--orphan-record-configmap=")
	framework.WaitForMetric(t, casc, `cascade_fleet_members{state="up"}`, 2, collectTimeout)
	m.collects(t, "shop", "host-rbac")

	base := strings.TrimSuffix(casc.MetricsURL, "/metrics")
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // cascade's self-signed certificate
	const explanation = "/apis/debug.cascade.dev/v1alpha1/namespaces/shop/explanations/dep?resource=configmaps"
	graph := "/debug/graph?resource=configmaps&namespace=shop&name=dep"
	framework.Eventually(t, collectTimeout, "the tenant's explanation of tenant-a's dep", func() (bool, error) {
		code, body := scrapeAs(t, client, base, explanation+"&member=tenant-a", tenantToken)
		return code == http.StatusOK && strings.Contains(body, string(dep.UID)) && strings.Contains(body, string(owner.UID)), nil
	})
	for _, tc := range []struct {
		who, token, path string
		code             int
		body             string
	}{
		{"tenant", tenantToken, explanation + "&member=tenant-b", 403, `cannot get members.debug.cascade.dev \"tenant-b\"`},
		{"tenant", tenantToken, explanation + "&member=nope", 403, `cannot get members.debug.cascade.dev \"nope\"`},
		{"tenant", tenantToken, explanation, 400, "name the member"},
		{"tenant", tenantToken, graph + "&member=tenant-a", 403, `cannot get path "/debug/graph"`},
		{"nobody", nobodyToken, explanation + "&member=tenant-a", 403, "cannot get explanations.debug.cascade.dev"},
		{"operator", operatorToken, graph + "&member=tenant-b", 200, string(dep.UID)},
		{"operator", operatorToken, explanation + "&member=tenant-a", 200, string(dep.UID)},
		{"operator", operatorToken, graph + "&member=nope", 404, `no running member "nope"`},
	} {
		code, body := scrapeAs(t, client, base, tc.path, tc.token)
		t.Logf("%-8s GET %s → %d %.100q", tc.who, tc.path, code, body)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s: GET %s = %d %q, want %d containing %q", tc.who, tc.path, code, body, tc.code, tc.body)
		}
		if code != http.StatusOK && strings.Contains(body, string(dep.UID)) {
			t.Errorf("%s: GET %s answered %d but revealed the object: %q", tc.who, tc.path, code, body)
		}
	}

	// The CLI: --member with --url, as the operator (its kubeconfig resolves cm).
	operatorKC := filepath.Join(t.TempDir(), "operator.kubeconfig")
	if err := suite.CP.WriteKubeconfig(operatorKC, "system:serviceaccount:"+ns+":operator", operatorToken); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(suite.CascadeBin, "explain", "cm/dep", "-n", "shop", "--member", "tenant-b", "--url", base,
		"--insecure-skip-tls-verify", "--kubeconfig", operatorKC).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ConfigMap shop/dep ("+string(dep.UID)+")") {
		t.Errorf("cascade explain --member tenant-b --url: %v\n%s", err, out)
	}

	// None of cascade's own requests (to the host with the overlay's RBAC, to the members) was refused.
	for _, s := range framework.Scrape(t, casc).Samples("cascade_api_requests_total") {
		if code := s.Labels["code"]; code == "401" || code == "403" {
			t.Errorf("a request of cascade's was refused with the fleet overlay's RBAC: %+v\n%s", s, casc.Tail(20))
		}
	}
}
