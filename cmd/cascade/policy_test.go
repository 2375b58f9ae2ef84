package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// runPolicy runs `cascade policy ARGS...` (with no collector: none may start); its error is
// what cascade wrote on stderr when it did not exit 0.
func runPolicy(args []string, out io.Writer) error {
	var stderr strings.Builder
	if code := execute(append([]string{"policy"}, args...), out, &stderr, nil); code != 0 {
		return fmt.Errorf("exit %d: %s", code, stderr.String())
	}
	return nil
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyValidate: `cascade policy validate -f FILE` prints every finding and fails on
// errors; it reads a policy document or the ConfigMap that holds one.
func TestPolicyValidate(t *testing.T) {
	const good = "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: configmaps\n  collect: Never\n- resource: widgets.example.com\n  defaultPropagation: Orphan\n"
	tests := []struct {
		name    string
		body    string
		args    []string // more flags
		wantErr string
		want    []string
		notWant []string
	}{
		{
			name: "valid document",
			body: good,
			want: []string{
				"note: rules[1]: defaultPropagation Orphan for widgets.example.com applies to deletes that name no propagation policy: objects get the orphan finalizer",
				"note: resources not checked against a cluster",
				"valid: 2 rules, 0 ignored resources",
			},
			notWant: []string{"companion"},
		},
		{
			// A warning: the exit status stays 0.
			name: "valid document in companion mode",
			body: good,
			args: []string{"--mode=companion"},
			want: []string{
				`warning: rules[0].collect: Invalid value: "Never": not enforced in companion mode: kube-controller-manager's garbage collector collects the dependents of configmaps as built in (the rule needs --mode=collector)`,
				"valid: 2 rules, 0 ignored resources",
			},
			notWant: []string{"warning: rules[1]"},
		},
		{
			// Issue 32.2: a defaultPropagation rule for a resource cascade never watches (the
			// built-in events, or --ignored-resources) is an error; a collect rule for it is not
			// this check's (it never applies, and stamps nothing).
			name:    "defaultPropagation for events, ignored by default",
			body:    "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: events\n  defaultPropagation: Foreground\n",
			wantErr: "1 errors",
			want:    []string{`error: rules[0].resource: Invalid value: "events": cascade does not watch it (--ignored-resources)`},
		},
		{
			name:    "defaultPropagation for a resource in --ignored-resources",
			body:    good,
			args:    []string{"--ignored-resources=events,widgets.example.com"},
			wantErr: "1 errors",
			want:    []string{`error: rules[1].resource: Invalid value: "widgets.example.com": cascade does not watch it (--ignored-resources)`},
		},
		{
			name: "--ignored-resources without the rule's resource",
			body: "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: events\n  defaultPropagation: Foreground\n",
			args: []string{"--ignored-resources=podtemplates"},
			want: []string{"valid: 1 rules, 0 ignored resources"},
		},
		{
			name:    "an unknown mode",
			body:    good,
			args:    []string{"--mode=shadow"},
			wantErr: `--mode is collector or companion, not "shadow"`,
		},
		{
			name:    "every error",
			body:    "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: jobs.batch\n  defaultPropagation: Background\n  colect: Never\n",
			wantErr: "2 errors",
			want: []string{
				"error: rules[0].colect: Forbidden: unknown field",
				"error: rules[0].defaultPropagation: Invalid value: \"Background\": kube-apiserver orphans the dependents of jobs.batch",
			},
		},
		{
			name: "a ConfigMap manifest",
			body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cascade-policy\ndata:\n  policy.yaml: |\n" + indent(good, "    "),
			want: []string{"(ConfigMap cascade-policy, data.policy.yaml): valid: 2 rules"},
		},
		{
			name:    "a ConfigMap without the key",
			body:    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cascade-policy\ndata:\n  other: x\n",
			wantErr: "ConfigMap cascade-policy has no data.policy.yaml",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := runPolicy(append([]string{"validate", "-f", writeFile(t, tt.body)}, tt.args...), &out)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error = %v, want %q", err, tt.wantErr)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestPolicyCommands(t *testing.T) {
	var out strings.Builder
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{nil, "validate or render"},
		{[]string{"render", "-f", "/does/not/exist"}, "cannot read the policy"},
		{[]string{"render"}, "render takes -f FILE"},
		{[]string{"apply"}, `unknown command "apply" for "cascade policy"`},
		{[]string{"validate"}, "takes -f FILE"},
		{[]string{"validate", "-f", "/does/not/exist"}, "cannot read the policy"},
	} {
		err := runPolicy(tt.args, &out)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("policy %v: %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}

func TestPolicyConfigMapFlag(t *testing.T) {
	for _, tt := range []struct {
		value string
		ok    bool
	}{
		{"cascade-system/cascade-policy", true},
		{"cascade-policy", false},
		{"ns/", false},
	} {
		o := NewOptions()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse([]string{"--policy-configmap=" + tt.value}); err != nil {
			t.Fatal(err)
		}
		line := oneLine(o.Validate())
		if tt.ok != (line == "") || (!tt.ok && !strings.Contains(line, "invalid --policy-configmap="+tt.value)) {
			t.Errorf("--policy-configmap=%s: %q", tt.value, line)
		}
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

// TestPolicyRender: `cascade policy render -f FILE` prints the admission objects of a valid
// policy as YAML, says so when there are none, and refuses an invalid policy.
func TestPolicyRender(t *testing.T) {
	var out strings.Builder
	doc := "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules:\n- resource: widgets.example.com\n  defaultPropagation: Orphan\n"
	if err := runPolicy([]string{"render", "-f", writeFile(t, doc)}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kind: MutatingAdmissionPolicy\n", "kind: MutatingAdmissionPolicyBinding\n", "name: cascade-default-propagation",
		"app.kubernetes.io/managed-by: cascade", "- widgets", "- example.com", "failurePolicy: Ignore", "policyName: cascade-default-propagation",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("render output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runPolicy([]string{"render", "-f", writeFile(t, "apiVersion: cascade.dev/v1alpha1\nkind: Policy\n")}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no admission objects") {
		t.Errorf("render of a policy without defaults: %q", out.String())
	}
	err := runPolicy([]string{"render", "-f", writeFile(t, "apiVersion: cascade.dev/v1alpha1\nkind: Policy\nrules: [{resource: Widgets}]\n")}, &out)
	if err == nil || !strings.Contains(err.Error(), "errors (see cascade policy validate)") {
		t.Errorf("render of an invalid policy: %v", err)
	}
}
