package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func readStrict(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// firstMatch returns the first submatch of re in the file at path.
func firstMatch(t *testing.T, path, re string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(re).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no line matching %s", path, re)
	}
	return string(m[1])
}

// TestBaseMatchesImage: the Deployment runs the image `make image` builds, at the version the
// chart defaults to (the next release's, never a moving tag), as a non-root user that
// runAsNonRoot can verify from the image alone (the Dockerfile's numeric USER: the pod names no
// UID, which OpenShift's restricted-v2 SCC would refuse), hardened as the image allows (read-only
// root, nothing to escalate to), with probes on the port cascade serves them on, and without a
// priority class that GKE refuses outside kube-system (issue 31.2). The e2e test TestImage runs
// the image the same way.
func TestBaseMatchesImage(t *testing.T) {
	var d appsv1.Deployment
	readStrict(t, "base/deployment.yaml", &d)
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	image := firstMatch(t, "../Makefile", `(?m)^IMAGE \?= (\S+)$`)
	appVersion := firstMatch(t, "chart/Chart.yaml", `(?m)^appVersion: "?([^"\s]+)"?$`)
	chartVersion := firstMatch(t, "chart/Chart.yaml", `(?m)^version: (\S+)$`)
	if !releaseVersion.MatchString(appVersion) || appVersion != "v"+chartVersion {
		t.Errorf("the chart's appVersion %q and version %q: want vX.Y.Z and X.Y.Z, the next release (make release)", appVersion, chartVersion)
	}
	if c.Image != image+":"+appVersion {
		t.Errorf("image %q, want %q (the Makefile's IMAGE at the chart's appVersion)", c.Image, image+":"+appVersion)
	}
	// runAsNonRoot without runAsUser needs a numeric USER in the image (the kubelet cannot map
	// a name without the image's /etc/passwd), and not root's.
	if user := firstMatch(t, "../Dockerfile", `(?m)^USER (\S+)$`); !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(user) {
		t.Errorf("the Dockerfile's USER %q: want a numeric non-root uid:gid, which runAsNonRoot verifies", user)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", sc)
	} else if sc.RunAsUser != nil || sc.RunAsGroup != nil {
		t.Errorf("pod securityContext runAsUser %v, runAsGroup %v: want none (the image's USER; OpenShift assigns its own)", sc.RunAsUser, sc.RunAsGroup)
	}
	if sc := c.SecurityContext; sc != nil && (sc.RunAsUser != nil || sc.RunAsGroup != nil) {
		t.Errorf("container securityContext runAsUser %v, runAsGroup %v: want none", sc.RunAsUser, sc.RunAsGroup)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem, no privilege escalation, drop ALL", sc)
	}

	healthPort := -1
	for _, p := range c.Ports {
		if p.Name == "health" {
			healthPort = int(p.ContainerPort)
		}
	}
	if !slices.Contains(c.Args, "--health-probe-bind-address=:"+itoa(healthPort)) {
		t.Errorf("args %q do not serve the probes on the health port %d", c.Args, healthPort)
	}
	for name, probe := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		want := "/healthz"
		if name == "readiness" {
			want = "/readyz"
		}
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "health" {
			t.Errorf("%s probe %+v, want GET %s on port health", name, probe, want)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}
	if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 ||
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelHostname {
		t.Errorf("affinity %+v: want preferred pod anti-affinity by hostname", pod.Affinity)
	}
	if pod.PriorityClassName != "" {
		t.Errorf("priorityClassName %q, want none (as the Helm chart's default): GKE refuses the critical classes outside kube-system without a ResourceQuota", pod.PriorityClassName)
	}
	if !slices.Contains(c.Args, "--leader-elect=true") || d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("want two or more replicas with --leader-elect=true")
	}

	var pdb policyv1.PodDisruptionBudget
	readStrict(t, "base/poddisruptionbudget.yaml", &pdb)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile("base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"deployment.yaml", "poddisruptionbudget.yaml"} {
		if !slices.Contains(k.Resources, f) {
			t.Errorf("kustomization.yaml does not list %s", f)
		}
	}
}

// releaseVersion is the Makefile's RELEASE_VERSION_RE: a semantic version with a v and no build
// metadata, which an image tag cannot hold.
var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func itoa[T int | int64](i T) string { return strconv.FormatInt(int64(i), 10) }

// TestBaseSecuresTheMetricsPort: the Deployment serves the metrics port with cascade's secure
// default (never --metrics-secure=false), the Service publishes it, the NetworkPolicy admits
// that port alone (from anywhere) on cascade's pods, cascade's ClusterRole may ask for the
// TokenReviews and SubjectAccessReviews that guard it, and the two reader ClusterRoles grant
// get on exactly their paths.
func TestBaseSecuresTheMetricsPort(t *testing.T) {
	var d appsv1.Deployment
	readStrict(t, "base/deployment.yaml", &d)
	c := d.Spec.Template.Spec.Containers[0]
	metricsPort := -1
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			metricsPort = int(p.ContainerPort)
		}
	}
	if !slices.Contains(c.Args, "--metrics-bind-address=:"+itoa(metricsPort)) {
		t.Errorf("args %q do not serve metrics on the metrics port %d", c.Args, metricsPort)
	}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--metrics-secure") {
			t.Errorf("arg %q: the base keeps the secure default", a)
		}
	}

	var svc corev1.Service
	readStrict(t, "base/service.yaml", &svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service ports %+v, want one targeting the metrics port", svc.Spec.Ports)
	}

	var np networkingv1.NetworkPolicy
	readStrict(t, "base/networkpolicy.yaml", &np)
	if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "cascade" || len(np.Spec.PodSelector.MatchExpressions) > 0 {
		t.Errorf("NetworkPolicy selects %+v, want cascade's pods", np.Spec.PodSelector)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("NetworkPolicy policyTypes %v, want [Ingress]", np.Spec.PolicyTypes)
	}
	if in := np.Spec.Ingress; len(in) != 1 || len(in[0].From) != 0 || len(in[0].Ports) != 1 ||
		in[0].Ports[0].Port == nil || in[0].Ports[0].Port.String() != "metrics" || in[0].Ports[0].EndPort != nil {
		t.Errorf("NetworkPolicy ingress %+v, want the metrics port only, from anywhere", np.Spec.Ingress)
	}

	roles := map[string][]rbacv1.PolicyRule{}
	for _, file := range []string{"base/rbac.yaml", "base/endpoint-readers.yaml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var r rbacv1.ClusterRole
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if r.Kind == "ClusterRole" {
				roles[r.Name] = r.Rules
			}
		}
	}
	may := func(rules []rbacv1.PolicyRule, group, resource string) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, "create") {
				return true
			}
		}
		return false
	}
	if !may(roles["cascade"], "authentication.k8s.io", "tokenreviews") || !may(roles["cascade"], "authorization.k8s.io", "subjectaccessreviews") {
		t.Errorf("ClusterRole cascade %+v cannot create tokenreviews and subjectaccessreviews", roles["cascade"])
	}
	for name, want := range map[string][]rbacv1.PolicyRule{
		"cascade-metrics-reader": {{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		"cascade-debug-reader": {
			{APIGroups: []string{"debug.cascade.dev"}, Resources: []string{"explanations"}, Verbs: []string{"get"}},
			{NonResourceURLs: []string{"/debug/graph", "/debug/pprof", "/debug/pprof/*"}, Verbs: []string{"get"}},
		},
	} {
		got := roles[name]
		same := len(got) == len(want)
		for i := 0; same && i < len(got); i++ {
			same = slices.Equal(got[i].APIGroups, want[i].APIGroups) && slices.Equal(got[i].Resources, want[i].Resources) &&
				slices.Equal(got[i].NonResourceURLs, want[i].NonResourceURLs) && slices.Equal(got[i].Verbs, want[i].Verbs) &&
				len(got[i].ResourceNames) == 0
		}
		if !same {
			t.Errorf("ClusterRole %s rules %+v, want %+v", name, got, want)
		}
	}

	var k struct {
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile("base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"endpoint-readers.yaml", "networkpolicy.yaml", "service.yaml"} {
		if !slices.Contains(k.Resources, f) {
			t.Errorf("kustomization.yaml does not list %s", f)
		}
	}
}

// TestAggregatedAPIIsOptIn: deploy/base registers no APIService (an aggregated API without a
// backend leaves every deleted namespace of the cluster Terminating while cascade is down);
// the component deploy/components/aggregated-api holds cascade's, pointing at the Service's
// port in cascade's namespace (the self-signed certificate: insecureSkipTLSVerify, and no
// caBundle beside it, which the API server would refuse); the base lets cascade's
// ServiceAccount read the front-proxy and client CAs through kube-apiserver's own Role, bound
// where that Role is: kube-system.
func TestAggregatedAPIIsOptIn(t *testing.T) {
	var svc corev1.Service
	readStrict(t, "base/service.yaml", &svc)
	var (
		api struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Group, Version string
				Service        struct {
					Namespace, Name string
					Port            int32
				}
				InsecureSkipTLSVerify bool   `json:"insecureSkipTLSVerify"`
				CABundle              []byte `json:"caBundle"`
			} `json:"spec"`
		}
		rb rbacv1.RoleBinding
	)
	b, err := os.ReadFile("components/aggregated-api/aggregated-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &api); err != nil {
		t.Fatal(err)
	}
	readStrict(t, "base/authentication-reader.yaml", &rb)
	s := api.Spec
	if api.Kind != "APIService" || api.Metadata.Name != s.Version+"."+s.Group || s.Group != "debug.cascade.dev" || s.Version != "v1alpha1" {
		t.Errorf("APIService %s serves %s/%s, want v1alpha1.debug.cascade.dev", api.Metadata.Name, s.Group, s.Version)
	}
	if s.Service.Namespace != "cascade-system" || s.Service.Name != svc.Name || len(svc.Spec.Ports) != 1 || s.Service.Port != svc.Spec.Ports[0].Port {
		t.Errorf("APIService points at %+v, want the Service %s's port %+v in cascade-system", s.Service, svc.Name, svc.Spec.Ports)
	}
	if !s.InsecureSkipTLSVerify || len(s.CABundle) > 0 {
		t.Errorf("APIService insecureSkipTLSVerify %t, caBundle %d bytes: want the self-signed default (skip, no bundle)", s.InsecureSkipTLSVerify, len(s.CABundle))
	}
	if rb.Namespace != "kube-system" || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != "extension-apiserver-authentication-reader" ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Kind != rbacv1.ServiceAccountKind || rb.Subjects[0].Name != "cascade" || rb.Subjects[0].Namespace != "cascade-system" {
		t.Errorf("RoleBinding %s/%s %+v %+v, want extension-apiserver-authentication-reader in kube-system for cascade-system/cascade", rb.Namespace, rb.Name, rb.RoleRef, rb.Subjects)
	}
	var base, component struct {
		Kind      string   `json:"kind"`
		Resources []string `json:"resources"`
	}
	readKustomization := func(path string, into any) {
		k, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(k, into); err != nil {
			t.Fatal(err)
		}
	}
	readKustomization("base/kustomization.yaml", &base)
	readKustomization("components/aggregated-api/kustomization.yaml", &component)
	if !slices.Contains(base.Resources, "authentication-reader.yaml") {
		t.Error("base/kustomization.yaml does not list authentication-reader.yaml")
	}
	if component.Kind != "Component" || !slices.Equal(component.Resources, []string{"aggregated-api.yaml"}) {
		t.Errorf("components/aggregated-api is a %s of %v, want a Component of aggregated-api.yaml", component.Kind, component.Resources)
	}
	// No file the base lists holds an APIService.
	for _, f := range base.Resources {
		b, err := os.ReadFile(filepath.Join("base", f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "kind: APIService") {
			t.Errorf("base/%s registers an APIService: the default install must not make namespace deletion depend on cascade", f)
		}
	}
}

// TestBaseSetsGoMemLimit: the Go runtime's soft limit follows the container's memory limit
// (docs/operations.md), through the downward API, and that limit is set: with none, the
// downward API gives the node's allocatable memory and the soft limit protects nothing.
func TestBaseSetsGoMemLimit(t *testing.T) {
	var d appsv1.Deployment
	readStrict(t, "base/deployment.yaml", &d)
	c := d.Spec.Template.Spec.Containers[0]
	found := false
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		found = true
		if e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" ||
			(e.ValueFrom.ResourceFieldRef.ContainerName != "" && e.ValueFrom.ResourceFieldRef.ContainerName != c.Name) {
			t.Errorf("GOMEMLIMIT %+v, want the container's limits.memory from the downward API", e)
		}
	}
	if !found {
		t.Errorf("container %s sets no GOMEMLIMIT", c.Name)
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Errorf("container %s has no memory limit for GOMEMLIMIT to follow", c.Name)
	}
}
