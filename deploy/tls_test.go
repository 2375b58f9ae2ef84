package deploy

import (
	"encoding/json"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// patchedBy applies the JSON patches of the kustomize component in dir that target kind and name
// to the manifest at file, as kustomize would, and returns the result as JSON.
func patchedBy(t *testing.T, dir, kind, name, file string) []byte {
	t.Helper()
	var k struct {
		Kind    string `json:"kind"`
		Patches []struct {
			Target struct{ Kind, Name string } `json:"target"`
			Patch  string                      `json:"patch"`
		} `json:"patches"`
	}
	readYAML(t, path.Join(dir, "kustomization.yaml"), &k)
	if k.Kind != "Component" {
		t.Fatalf("%s is a %s, want a Component", dir, k.Kind)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	n := 0
	for _, p := range k.Patches {
		if p.Target.Kind != kind || p.Target.Name != name {
			continue
		}
		n++
		ops, err := yaml.YAMLToJSON([]byte(p.Patch))
		if err != nil {
			t.Fatalf("%s: the patch of %s %s: %v", dir, kind, name, err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatalf("%s: the patch of %s %s: %v", dir, kind, name, err)
		}
		if doc, err = patch.Apply(doc); err != nil {
			t.Fatalf("%s: the patch of %s %s does not apply to %s: %v", dir, kind, name, file, err)
		}
	}
	if n != 1 {
		t.Fatalf("%s: %d patches of %s %s, want 1", dir, n, kind, name)
	}
	return doc
}

// readYAML decodes a YAML file that may hold fields the target does not know.
func readYAML(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestVerifiedTLSComponent (issue 32.8): deploy/components/monitoring-verified-tls, applied to
// deploy/base's Deployment and deploy/components/monitoring's ServiceMonitor, makes cascade serve
// the certificate of the Secret cascade-metrics-tls (mounted read-only, passed with the flags
// cascade has: docs/flags.md is generated from its flag set) and makes the ServiceMonitor verify
// it against that Secret's ca.crt for the Service's name, without insecureSkipVerify. The e2e
// test TestChartVerifiedTLS checks it against the chart's tls.secretName and server-dry-runs it.
func TestVerifiedTLSComponent(t *testing.T) {
	const (
		dir    = "components/monitoring-verified-tls"
		secret = "cascade-metrics-tls"
	)
	var d appsv1.Deployment
	if err := json.Unmarshal(patchedBy(t, dir, "Deployment", "cascade", "base/deployment.yaml"), &d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	var mountPath string
	for _, v := range pod.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secret {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && m.ReadOnly {
				mountPath = m.MountPath
			}
		}
	}
	if mountPath == "" {
		t.Fatalf("volumes %+v, mounts %+v: want the Secret %s mounted read-only", pod.Volumes, c.VolumeMounts, secret)
	}
	flags, err := os.ReadFile("../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	for flag, file := range map[string]string{"--tls-cert-file": corev1.TLSCertKey, "--tls-private-key-file": corev1.TLSPrivateKeyKey} {
		if !strings.Contains(string(flags), "| `"+flag+"` |") {
			t.Errorf("cascade has no flag %s (docs/flags.md)", flag)
		}
		if want := flag + "=" + path.Join(mountPath, file); !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}

	var sm struct {
		Spec struct {
			Endpoints []struct {
				TLSConfig map[string]any `json:"tlsConfig"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patchedBy(t, dir, "ServiceMonitor", "cascade", "components/monitoring/servicemonitor.yaml"), &sm); err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	readStrict(t, "base/service.yaml", &svc)
	want := map[string]any{
		"ca":         map[string]any{"secret": map[string]any{"name": secret, "key": "ca.crt"}},
		"serverName": svc.Name + ".cascade-system.svc",
	}
	if len(sm.Spec.Endpoints) != 1 || !reflect.DeepEqual(sm.Spec.Endpoints[0].TLSConfig, want) {
		t.Errorf("ServiceMonitor endpoints %+v, want one with tlsConfig %v", sm.Spec.Endpoints, want)
	}
}
