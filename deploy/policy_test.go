package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/policy"
)

func readPolicyConfigMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	b, err := os.ReadFile("base/policy-configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(b, &cm); err != nil {
		t.Fatal(err)
	}
	return &cm
}

// TestPolicyConfigMapIsValid: the shipped policy parses, and so do its commented examples once
// uncommented.
func TestPolicyConfigMapIsValid(t *testing.T) {
	cm := readPolicyConfigMap(t)
	doc := cm.Data[policy.ConfigMapKey]
	if _, _, errs := policy.Parse([]byte(doc)); len(errs) > 0 {
		t.Fatalf("the shipped policy: %v", errs)
	}
	// The examples: the commented lines from the first "# - resource", comment markers and
	// comment-only lines removed, as the rules of a document.
	i := strings.Index(doc, "# - resource")
	if i < 0 {
		t.Fatal("no examples")
	}
	var rules []string
	for _, line := range strings.Split(doc[i:], "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "#")
		line = strings.TrimPrefix(line, " ")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		rules = append(rules, line)
	}
	examples := "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n" + strings.Join(rules, "\n") + "\n"
	c, _, errs := policy.Parse([]byte(examples))
	if len(errs) > 0 {
		t.Fatalf("the examples:\n%s\n%v", examples, errs)
	}
	if c.Rules() != 3 {
		t.Errorf("%d example rules, want 3:\n%s", c.Rules(), examples)
	}
}

// TestPolicyWiring: the Deployment names the ConfigMap, kustomize ships it and its Role, and the
// Role reads exactly that ConfigMap.
func TestPolicyWiring(t *testing.T) {
	cm := readPolicyConfigMap(t)
	var d appsv1.Deployment
	db, err := os.ReadFile("base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(db, &d); err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--policy-configmap=cascade-system/"+cm.Name) {
		t.Errorf("deployment args %q lack --policy-configmap=cascade-system/%s", args, cm.Name)
	}
	kust, err := os.ReadFile("base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"policy-configmap.yaml", "policy-rbac.yaml"} {
		if !regexp.MustCompile(`(?m)^\s+- ` + regexp.QuoteMeta(f) + `$`).Match(kust) {
			t.Errorf("kustomization.yaml does not list %s", f)
		}
	}
	b, err := os.ReadFile("base/policy-rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	role, binding := strings.Split(string(b), "\n---\n")[0], strings.Split(string(b), "\n---\n")[1]
	var r rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(role), &r); err != nil {
		t.Fatal(err)
	}
	var rb rbacv1.RoleBinding
	if err := yaml.UnmarshalStrict([]byte(binding), &rb); err != nil {
		t.Fatal(err)
	}
	if len(r.Rules) == 0 || !slices.Equal(r.Rules[0].ResourceNames, []string{cm.Name}) || !slices.Equal(r.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("role rules %+v, want get, list, watch on %s only", r.Rules, cm.Name)
	}
	if rb.RoleRef.Name != r.Name || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "cascade" {
		t.Errorf("binding %+v", rb)
	}
}
