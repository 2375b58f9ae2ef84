package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// TestKubeFlagsAreKubectls: the kubeconfig flags of cascade's commands are kubectl's, as
// cli-runtime's ConfigFlags defines them (names, shorthands, types), less --cache-dir (no disk
// cache of discovery here); -n/--namespace only where a command has a namespace. The set is
// bound with clientcmd rather than with ConfigFlags itself: see kubeFlags.
func TestKubeFlagsAreKubectls(t *testing.T) {
	want := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(false).AddFlags(want)
	for _, withNamespace := range []bool{true, false} {
		var kf kubeFlags
		got := pflag.NewFlagSet("cascade", pflag.ContinueOnError)
		kf.add(got, withNamespace)
		want.VisitAll(func(w *pflag.Flag) {
			if w.Name == "cache-dir" || (w.Name == "namespace" && !withNamespace) {
				if got.Lookup(w.Name) != nil {
					t.Errorf("withNamespace=%t: --%s is registered", withNamespace, w.Name)
				}
				return
			}
			g := got.Lookup(w.Name)
			switch {
			case g == nil:
				t.Errorf("withNamespace=%t: kubectl's --%s is missing", withNamespace, w.Name)
			case g.Shorthand != w.Shorthand || g.Value.Type() != w.Value.Type():
				t.Errorf("withNamespace=%t: --%s: shorthand %q type %s, kubectl's %q %s", withNamespace, w.Name, g.Shorthand, g.Value.Type(), w.Shorthand, w.Value.Type())
			}
		})
		got.VisitAll(func(g *pflag.Flag) {
			if want.Lookup(g.Name) == nil {
				t.Errorf("withNamespace=%t: --%s is not kubectl's", withNamespace, g.Name)
			}
		})
	}
}

// TestKubeFlagsConfig: the flags reach the client configuration as kubectl's do: $KUBECONFIG
// unless --kubeconfig, --context, --server, --token, impersonation (--as, --as-group,
// --as-uid, --as-user-extra), -n over the context's namespace.
func TestKubeFlagsConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server, ns string) string {
		p := filepath.Join(dir, name)
		body := "apiVersion: v1\nkind: Config\nclusters:\n- {name: c, cluster: {server: \"" + server + "\"}}\n" +
			"users:\n- {name: u, user: {token: t-" + name + "}}\ncontexts:\n- {name: a, context: {cluster: c, user: u, namespace: " + ns + "}}\n" +
			"- {name: b, context: {cluster: c, user: u, namespace: b-ns}}\ncurrent-context: a\n"
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("KUBECONFIG", write("env", "https://env.example:6443", "env-ns"))
	explicit := write("explicit", "https://explicit.example:6443", "explicit-ns")
	for _, tt := range []struct {
		args                  []string
		host, token, ns, user string
		groups                []string
		extra                 map[string][]string
	}{
		{args: nil, host: "https://env.example:6443", token: "t-env", ns: "env-ns"},
		{args: []string{"--kubeconfig", explicit}, host: "https://explicit.example:6443", token: "t-explicit", ns: "explicit-ns"},
		{args: []string{"--context", "b"}, host: "https://env.example:6443", token: "t-env", ns: "b-ns"},
		{args: []string{"-n", "x", "--server", "https://other:6443", "--token", "flag-token"}, host: "https://other:6443", token: "flag-token", ns: "x"},
		{args: []string{"--as", "alice", "--as-group", "g1", "--as-group", "g2", "--as-user-extra", "scopes=a", "--as-user-extra", "scopes=b"},
			host: "https://env.example:6443", token: "t-env", ns: "env-ns", user: "alice", groups: []string{"g1", "g2"}, extra: map[string][]string{"scopes": {"a", "b"}}},
	} {
		var kf kubeFlags
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		kf.add(fs, true)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := kf.restConfig()
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		ns, err := kf.contextNamespace()
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if cfg.Host != tt.host || cfg.BearerToken != tt.token || ns != tt.ns || cfg.Impersonate.UserName != tt.user ||
			!slices.Equal(cfg.Impersonate.Groups, tt.groups) || !maps.EqualFunc(cfg.Impersonate.Extra, tt.extra, slices.Equal[[]string]) {
			t.Errorf("%v: host %s token %s namespace %s impersonate %+v; want %s %s %s %s %v %v", tt.args, cfg.Host, cfg.BearerToken, ns, cfg.Impersonate, tt.host, tt.token, tt.ns, tt.user, tt.groups, tt.extra)
		}
		if given := kf.given(); given != (len(tt.args) > 0) {
			t.Errorf("%v: given() = %t", tt.args, given)
		}
	}
}
