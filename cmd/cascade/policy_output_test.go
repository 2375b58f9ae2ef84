package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestPolicyValidateOutput: -o json and -o yaml print the findings as one document of a stable
// shape (docs/cli.md): every field present, empty lists as [], the exit status as with text.
func TestPolicyValidateOutput(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	good := writeFile(t, "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: configmaps\n  collect: Never\n- resource: widgets.example.com\n  defaultPropagation: Orphan\n")
	var out strings.Builder
	if err := runPolicy([]string{"validate", "-f", good, "-o", "json", "--mode=companion"}, &out); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out.String()), &v); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out.String())
	}
	for _, k := range []string{"file", "valid", "rules", "ignoredResources", "mode", "cluster", "errors", "warnings", "defaultPropagations"} {
		if _, ok := v[k]; !ok {
			t.Errorf("-o json lacks %q:\n%s", k, out.String())
		}
	}
	var got policyValidation
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Valid || got.Rules != 2 || got.Mode != "companion" || got.Cluster != "" || len(got.Errors) != 0 || len(got.Warnings) != 1 ||
		got.Warnings[0].Field != "rules[0].collect" || got.Warnings[0].Type != "FieldValueInvalid" ||
		len(got.DefaultPropagations) != 1 || got.DefaultPropagations[0] != (defaultPropagationNote{Rule: "rules[1]", Resource: "widgets.example.com", Propagation: "Orphan", Finalizer: "orphan"}) {
		t.Errorf("-o json: %+v", got)
	}
	if !strings.Contains(out.String(), `"errors": [],`) {
		t.Errorf("-o json: no error is not []:\n%s", out.String())
	}

	bad := writeFile(t, "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: jobs.batch\n  defaultPropagation: Background\n  colect: Never\n")
	out.Reset()
	err := runPolicy([]string{"validate", "-f", bad, "-o", "yaml"}, &out)
	if err == nil || !strings.Contains(err.Error(), "2 errors") {
		t.Errorf("-o yaml of an invalid policy: %v, want exit 1 with 2 errors", err)
	}
	got = policyValidation{}
	if err := yaml.UnmarshalStrict([]byte(out.String()), &got); err != nil {
		t.Fatalf("-o yaml: %v\n%s", err, out.String())
	}
	if got.Valid || len(got.Errors) != 2 || got.Errors[0].Field != "rules[0].colect" || got.Errors[0].Type != "FieldValueForbidden" ||
		!strings.HasPrefix(got.Errors[0].Message, "rules[0].colect: Forbidden: unknown field") || got.Rules != 0 || len(got.DefaultPropagations) != 0 {
		t.Errorf("-o yaml: %+v", got)
	}
	if err := runPolicy([]string{"validate", "-f", good, "-o", "wide"}, &out); err == nil || !strings.Contains(err.Error(), `invalid -o "wide"`) {
		t.Errorf("-o wide: %v", err)
	}
}

// TestPolicyValidateCluster (issue 31.6): policy validate reads the cluster the command line or
// $KUBECONFIG names, honouring --context, and warns about rules for resources it does not serve;
// --offline and a missing $KUBECONFIG read none; a cluster named that cannot be read fails.
func TestPolicyValidateCluster(t *testing.T) {
	const token = "user-token"
	api := newFakeAPIServer(t, token)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	body := "apiVersion: v1\nkind: Config\nclusters:\n" +
		"- {name: up, cluster: {server: \"" + api.URL + "\", insecure-skip-tls-verify: true}}\n" +
		"- {name: down, cluster: {server: \"https://127.0.0.1:1\"}}\n" +
		"users: [{name: u, user: {token: " + token + "}}]\n" +
		"contexts:\n- {name: up, context: {cluster: up, user: u}}\n- {name: down, context: {cluster: down, user: u}}\ncurrent-context: down\n"
	if err := os.WriteFile(kubeconfig, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := writeFile(t, "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: configmaps\n  collect: Never\n- resource: widgets.example.com\n  defaultPropagation: Orphan\n")
	const unserved = "the cluster does not serve widgets.example.com"
	for _, tt := range []struct {
		name, env string
		args      []string
		wantErr   string
		want      string
		notWant   string
	}{
		{name: "$KUBECONFIG and --context", env: kubeconfig, args: []string{"--context", "up"}, want: unserved},
		{name: "--kubeconfig and --context", args: []string{"--kubeconfig", kubeconfig, "--context", "up"}, want: unserved},
		{name: "$KUBECONFIG's current context, down", env: kubeconfig, wantErr: "cannot list the resources https://127.0.0.1:1 serves"},
		{name: "--offline", env: kubeconfig, args: []string{"--offline"}, want: "note: resources not checked against a cluster", notWant: "warning:"},
		{name: "no kubeconfig named", want: "note: resources not checked against a cluster", notWant: "warning:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			var out strings.Builder
			err := runPolicy(append([]string{"validate", "-f", doc}, tt.args...), &out)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.want) || (tt.notWant != "" && strings.Contains(out.String(), tt.notWant)) {
				t.Errorf("output lacks %q or has %q:\n%s", tt.want, tt.notWant, out.String())
			}
		})
	}
}
