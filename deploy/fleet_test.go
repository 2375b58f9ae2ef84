package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBin is bin/helm, which `make helm` builds from the pinned module tools/helm (cached in
// ~/.cache/cascade-tools: a few minutes the first time on a machine, under a second after).
func helmBin(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("make", "-s", "helm")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			helmErr = errors.New("make helm: " + err.Error() + "\n" + string(out))
			return
		}
		helmPath, helmErr = filepath.Abs(filepath.Join("..", "bin", "helm"))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// runHelm runs helm with its caches and configuration in the test's own directory.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmBin(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", errors.New("helm " + strings.Join(args, " ") + ": " + err.Error() + "\n" + stderr.String())
	}
	return stdout.String(), nil
}

// manifest is one object of a rendered stream.
type manifest struct {
	Kind, Namespace, Name string
	Doc                   []byte
}

// renderChart renders chart/ as release cascade in cascade-system with a values file's text
// (may be empty) and the values set; a failure fails the test.
func renderChart(t *testing.T, values string, set ...string) []manifest {
	t.Helper()
	args := []string{"template", "cascade", "chart", "--namespace", "cascade-system"}
	if values != "" {
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", f)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return manifests(t, out)
}

// manifests splits a YAML stream into its objects; empty documents are skipped.
func manifests(t *testing.T, stream string) []manifest {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var objs []manifest
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct{ Namespace, Name string }
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if meta.Kind != "" {
			objs = append(objs, manifest{Kind: meta.Kind, Namespace: meta.Metadata.Namespace, Name: meta.Metadata.Name, Doc: doc})
		}
	}
}

// object decodes, strictly, the one object of kind and name in objs into into; false when there
// is none.
func object(t *testing.T, objs []manifest, kind, name string, into any) bool {
	t.Helper()
	found := false
	for _, o := range objs {
		if o.Kind != kind || o.Name != name {
			continue
		}
		if found {
			t.Fatalf("two %s %s", kind, name)
		}
		found = true
		if err := yaml.UnmarshalStrict(o.Doc, into); err != nil {
			t.Fatalf("%s %s: %v", kind, name, err)
		}
	}
	return found
}

// mustObject is object, failing the test when there is none.
func mustObject(t *testing.T, objs []manifest, kind, name string, into any) {
	t.Helper()
	if !object(t, objs, kind, name, into) {
		t.Fatalf("no %s %s", kind, name)
	}
}

// readManifests reads the objects of a YAML file of deploy/.
func readManifests(t *testing.T, file string) []manifest {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return manifests(t, string(b))
}

// overlayPatched is the object of kind and name from the manifests in file with the JSON patches
// of overlays/fleet that target exactly that kind and name applied, as kustomize applies them.
func overlayPatched(t *testing.T, file, kind, name string, into any) {
	t.Helper()
	var k struct {
		Patches []struct {
			Target struct{ Kind, Name string } `json:"target"`
			Patch  string                      `json:"patch"`
		} `json:"patches"`
	}
	readYAML(t, "overlays/fleet/kustomization.yaml", &k)
	var doc []byte
	for _, o := range readManifests(t, file) {
		if o.Kind == kind && o.Name == name {
			doc = o.Doc
		}
	}
	if doc == nil {
		t.Fatalf("%s holds no %s %s", file, kind, name)
	}
	doc, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range k.Patches {
		if p.Target.Kind != kind || p.Target.Name != name {
			continue
		}
		ops, err := yaml.YAMLToJSON([]byte(p.Patch))
		if err != nil {
			t.Fatalf("overlays/fleet: the patch of %s %s: %v", kind, name, err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatalf("overlays/fleet: the patch of %s %s: %v", kind, name, err)
		}
		if doc, err = patch.Apply(doc); err != nil {
			t.Fatalf("overlays/fleet: the patch of %s %s does not apply: %v", kind, name, err)
		}
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
}

// The host RBAC of fleet mode, rule by rule, as cmd/cascade's fleet uses it.
var (
	// The host ClusterRole: the reviews that guard the metrics port, nothing else cluster-wide.
	fleetHostRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	// Warning Events (MemberUnavailable) on the members' Secrets; client.Recorder creates and
	// patches Events, never updates them.
	fleetEventsRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}
	// The kubeconfig Secrets provider lists and watches (no get).
	fleetSecretsRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}}, fleetEventsRule}
	// The Cluster API provider lists and watches metadata and gets each CLUSTER-kubeconfig.
	fleetCAPIRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}, fleetEventsRule}
	// Shards: the shard Leases are listed by label and updated; each replica's own Lease (named
	// after its pod and a random suffix) is read, updated and deleted: no resourceNames.
	fleetShardLeasesRule = rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "update", "delete"}}
)

// TestFleetRBAC: deploy/overlays/fleet and the chart's fleet values grant in the host what fleet
// mode uses and no more: a ClusterRole of the metrics port's reviews only; in the fleet's
// namespace, list and watch on Secrets for the kubeconfig Secrets provider (get too for Cluster
// API's, which reads each CLUSTER-kubeconfig by name) and Events on them; the policy's Events in
// cascade's namespace (the base's cascade-policy); the sharded fleet's Leases. e2e TestChartFleet
// compares every object of the two, and TestFleetExplain runs cascade with the overlay's RBAC.
func TestFleetRBAC(t *testing.T) {
	var overlayHost rbacv1.ClusterRole
	overlayPatched(t, "base/rbac.yaml", "ClusterRole", "cascade", &overlayHost)
	if !reflect.DeepEqual(overlayHost.Rules, fleetHostRules) {
		t.Errorf("overlays/fleet: ClusterRole cascade %+v, want %+v", overlayHost.Rules, fleetHostRules)
	}
	var overlayMembers rbacv1.Role
	mustObject(t, readManifests(t, "overlays/fleet/fleet-namespace.yaml"), "Role", "cascade-fleet-members", &overlayMembers)
	if overlayMembers.Namespace != "cascade-fleet" || !reflect.DeepEqual(overlayMembers.Rules, fleetSecretsRules) {
		t.Errorf("overlays/fleet: Role cascade-fleet-members in %q %+v, want in cascade-fleet %+v", overlayMembers.Namespace, overlayMembers.Rules, fleetSecretsRules)
	}
	var overlayElection rbacv1.Role
	overlayPatched(t, "base/rbac.yaml", "Role", "cascade-leader-election", &overlayElection)
	if !slices.ContainsFunc(overlayElection.Rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, fleetShardLeasesRule) }) {
		t.Errorf("overlays/fleet: Role cascade-leader-election %+v lacks %+v", overlayElection.Rules, fleetShardLeasesRule)
	}
	var policy rbacv1.Role
	mustObject(t, readManifests(t, "base/policy-rbac.yaml"), "Role", "cascade-policy", &policy)
	if !slices.ContainsFunc(policy.Rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, fleetEventsRule) }) {
		t.Errorf("base: Role cascade-policy %+v cannot write the policy's Events", policy.Rules)
	}

	for _, tc := range []struct {
		set, namespace string
		members        []rbacv1.PolicyRule
	}{
		{"fleet.secretsNamespace=cascade-fleet", "cascade-fleet", fleetSecretsRules},
		{"fleet.clusterAPINamespace=capi", "capi", fleetCAPIRules},
	} {
		objs := renderChart(t, "", tc.set)
		var host rbacv1.ClusterRole
		mustObject(t, objs, "ClusterRole", "cascade", &host)
		if !reflect.DeepEqual(host.Rules, fleetHostRules) {
			t.Errorf("chart, %s: ClusterRole cascade %+v, want %+v", tc.set, host.Rules, fleetHostRules)
		}
		var members rbacv1.Role
		mustObject(t, objs, "Role", "cascade-fleet-members", &members)
		if members.Namespace != tc.namespace || !reflect.DeepEqual(members.Rules, tc.members) {
			t.Errorf("chart, %s: Role cascade-fleet-members in %q %+v, want in %s %+v", tc.set, members.Namespace, members.Rules, tc.namespace, tc.members)
		}
		var election rbacv1.Role
		mustObject(t, objs, "Role", "cascade-leader-election", &election)
		if !reflect.DeepEqual(election.Rules, overlayElection.Rules) {
			t.Errorf("chart, %s: Role cascade-leader-election %+v, want the overlay's %+v", tc.set, election.Rules, overlayElection.Rules)
		}
		var chartPolicy rbacv1.Role
		mustObject(t, objs, "Role", "cascade-policy", &chartPolicy)
		if !reflect.DeepEqual(chartPolicy.Rules, policy.Rules) {
			t.Errorf("chart, %s: Role cascade-policy %+v, want the base's %+v", tc.set, chartPolicy.Rules, policy.Rules)
		}
	}
}

// fleetArgs is the cascade container's arguments.
func fleetArgs(t *testing.T, objs []manifest) []string {
	t.Helper()
	var d appsv1.Deployment
	mustObject(t, objs, "Deployment", "cascade", &d)
	return d.Spec.Template.Spec.Containers[0].Args
}

// TestChartFleetInsecureKubeconfig: fleet.insecureKubeconfigExec and insecureKubeconfigTLS
// render --fleet-insecure-kubeconfig-exec (one argument, the commands joined by commas) and
// --fleet-insecure-kubeconfig-tls only when set; the overlay and the chart's defaults render
// neither; the schema refuses them without a provider and a command holding a comma.
func TestChartFleetInsecureKubeconfig(t *testing.T) {
	insecure := func(a string) bool { return strings.HasPrefix(a, "--fleet-insecure-") }
	var d appsv1.Deployment
	overlayPatched(t, "base/deployment.yaml", "Deployment", "cascade", &d)
	if a := d.Spec.Template.Spec.Containers[0].Args; slices.ContainsFunc(a, insecure) {
		t.Errorf("overlays/fleet: arguments %v allow insecure kubeconfigs", a)
	}
	if a := fleetArgs(t, renderChart(t, "", "fleet.secretsNamespace=cascade-fleet")); slices.ContainsFunc(a, insecure) {
		t.Errorf("chart, fleet defaults: arguments %v allow insecure kubeconfigs", a)
	}
	args := fleetArgs(t, renderChart(t, `
fleet:
  secretsNamespace: cascade-fleet
  insecureKubeconfigExec: [aws, gke-gcloud-auth-plugin]
  insecureKubeconfigTLS: true
`))
	if got := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return !insecure(a) }); !slices.Equal(got, []string{"--fleet-insecure-kubeconfig-exec=aws,gke-gcloud-auth-plugin", "--fleet-insecure-kubeconfig-tls=true"}) {
		t.Errorf("chart: insecure arguments %v", got)
	}
	for _, tc := range []struct {
		set  []string
		path string // in the error
	}{
		{[]string{"fleet.insecureKubeconfigExec={aws}"}, "/fleet"},
		{[]string{"fleet.insecureKubeconfigTLS=true"}, "/fleet"},
		{[]string{"fleet.secretsNamespace=a", `fleet.insecureKubeconfigExec={a\,b}`}, "/fleet/insecureKubeconfigExec/0"},
		{[]string{"fleet.secretsNamespace=a", "fleet.insecureKubeconfigTLS=yes"}, "/fleet/insecureKubeconfigTLS"},
	} {
		chartRefuses(t, tc.set, tc.path)
	}
}

// chartRefuses checks that the chart's schema refuses the values set, naming path.
func chartRefuses(t *testing.T, set []string, path string) {
	t.Helper()
	args := []string{"template", "cascade", "chart"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	_, err := runHelm(t, args...)
	if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), path) {
		t.Errorf("helm template --set %v: %v, want the schema's refusal at %s", set, err, path)
	}
}

// TestFleetEgressNetworkPolicy: overlays/fleet ships egress-networkpolicy.yaml as an example
// (documentation addresses, not among its resources until an operator enables it), which admits
// cascade's pods to the host's API server and the members' by address and port, and to the
// cluster's DNS pods on port 53, and nowhere else; the chart renders the same policy from
// fleet.egressNetworkPolicy (off by default, and only in fleet mode), and its schema refuses it
// without the host's API server or without a provider.
func TestFleetEgressNetworkPolicy(t *testing.T) {
	const file = "overlays/fleet/egress-networkpolicy.yaml"
	var example networkingv1.NetworkPolicy
	readStrict(t, file, &example)
	var k struct {
		Resources []string `json:"resources"`
	}
	readYAML(t, "overlays/fleet/kustomization.yaml", &k)
	if slices.Contains(k.Resources, "egress-networkpolicy.yaml") {
		t.Errorf("overlays/fleet applies %s, whose addresses are examples", file)
	}
	if b, err := os.ReadFile("overlays/fleet/kustomization.yaml"); err != nil || !strings.Contains(string(b), "# - egress-networkpolicy.yaml") {
		t.Errorf("overlays/fleet/kustomization.yaml does not show how to enable %s (%v)", file, err)
	}
	if example.Name != "cascade-egress" || example.Namespace != "cascade-system" {
		t.Errorf("%s: %s/%s, want cascade-system/cascade-egress", file, example.Namespace, example.Name)
	}
	if example.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "cascade" || len(example.Spec.PodSelector.MatchLabels) != 1 || len(example.Spec.PodSelector.MatchExpressions) > 0 {
		t.Errorf("%s selects %+v, want cascade's pods", file, example.Spec.PodSelector)
	}
	if !slices.Equal(example.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) || len(example.Spec.Ingress) > 0 {
		t.Errorf("%s: policyTypes %v, want [Egress] alone (the base's policy keeps the ingress)", file, example.Spec.PolicyTypes)
	}
	// Every rule names its peers and ports: API servers by address, DNS by selector on port 53.
	var addresses, dns int
	for i, r := range example.Spec.Egress {
		if len(r.To) == 0 || len(r.Ports) == 0 {
			t.Errorf("%s: egress rule %d admits every peer or every port: %+v", file, i, r)
		}
		for _, p := range r.To {
			switch {
			case p.IPBlock != nil && p.IPBlock.CIDR != "" && p.PodSelector == nil && p.NamespaceSelector == nil:
				addresses++
			case p.IPBlock == nil && p.PodSelector != nil && p.NamespaceSelector != nil &&
				p.PodSelector.MatchLabels["k8s-app"] == "kube-dns" && p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "kube-system":
				dns++
				for _, port := range r.Ports {
					if port.Port == nil || port.Port.IntValue() != 53 {
						t.Errorf("%s: the DNS rule admits port %v", file, port.Port)
					}
				}
			default:
				t.Errorf("%s: egress rule %d admits %+v, neither an address nor the cluster's DNS", file, i, p)
			}
		}
	}
	if addresses < 2 || dns != 1 {
		t.Errorf("%s: %d address peers and %d DNS peers, want the host's and the members' API servers and the DNS pods", file, addresses, dns)
	}

	// The chart: off by default, the example's policy from its addresses.
	var np networkingv1.NetworkPolicy
	if object(t, renderChart(t, "", "fleet.secretsNamespace=cascade-fleet"), "NetworkPolicy", "cascade-egress", &np) {
		t.Error("the chart renders cascade-egress by default")
	}
	objs := renderChart(t, `
fleet:
  secretsNamespace: cascade-fleet
  egressNetworkPolicy:
    enabled: true
    hostAPIServer:
      cidrs: [192.0.2.10/32]
    members:
      cidrs: [198.51.100.0/24]
`)
	mustObject(t, objs, "NetworkPolicy", "cascade-egress", &np)
	if !reflect.DeepEqual(np.Spec, example.Spec) {
		t.Errorf("the chart's cascade-egress\n  %+v\n%s's\n  %+v", np.Spec, file, example.Spec)
	}
	// Without DNS and with a rule of the operator's own.
	objs = renderChart(t, `
fleet:
  clusterAPINamespace: capi
  egressNetworkPolicy:
    enabled: true
    hostAPIServer:
      cidrs: [192.0.2.10/32]
      ports: [443]
    dns: false
    extraEgress:
      - to:
          - namespaceSelector:
              matchLabels:
                kubernetes.io/metadata.name: tenants
        ports:
          - port: 6443
            protocol: TCP
`)
	mustObject(t, objs, "NetworkPolicy", "cascade-egress", &np)
	if e := np.Spec.Egress; len(e) != 2 || len(e[0].To) != 1 || e[0].To[0].IPBlock == nil || e[0].To[0].IPBlock.CIDR != "192.0.2.10/32" ||
		len(e[0].Ports) != 1 || e[0].Ports[0].Port == nil || e[0].Ports[0].Port.IntValue() != 443 ||
		len(e[1].To) != 1 || e[1].To[0].NamespaceSelector == nil || e[1].To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "tenants" {
		t.Errorf("the chart's cascade-egress without DNS, members by extraEgress: %+v", e)
	}
	for _, tc := range []struct {
		set  []string
		path string
	}{
		{[]string{"fleet.secretsNamespace=a", "fleet.egressNetworkPolicy.enabled=true"}, "/fleet/egressNetworkPolicy/hostAPIServer/cidrs"},
		{[]string{"fleet.egressNetworkPolicy.enabled=true", "fleet.egressNetworkPolicy.hostAPIServer.cidrs={192.0.2.10/32}"}, "/fleet"},
		{[]string{"fleet.secretsNamespace=a", "fleet.egressNetworkPolicy.hostAPIServer.cidrs={192.0.2.10}"}, "/fleet/egressNetworkPolicy/hostAPIServer/cidrs/0"},
		{[]string{"fleet.secretsNamespace=a", "fleet.egressNetworkPolicy.members.ports={0}"}, "/fleet/egressNetworkPolicy/members/ports/0"},
		{[]string{"fleet.secretsNamespace=a", "fleet.egressNetworkPolicy.members.ports=null"}, "/fleet/egressNetworkPolicy/members"},
	} {
		chartRefuses(t, tc.set, tc.path)
	}
}
