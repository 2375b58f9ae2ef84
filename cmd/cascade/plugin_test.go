package main

import (
	"context"
	"strings"
	"testing"
)

// runPlugin is runCLI for the binary run as kubectl's plugin, kubectl-cascade.
func runPlugin(t *testing.T, args ...string) cli {
	t.Helper()
	var out, errOut strings.Builder
	var c cli
	c.code = executeAs(commandName("/home/u/.krew/bin/kubectl-cascade"), args, &out, &errOut, func(_ context.Context, opts *Options) error {
		c.ran = opts
		return nil
	})
	c.stdout, c.stderr = out.String(), errOut.String()
	return c
}

// TestPlugin (issue 31.6): the binary named kubectl-cascade is `kubectl cascade`: its help and
// errors say so, no command prints the help (it never starts the collector), the collector's
// flags are `run`'s alone, and every command is there.
func TestPlugin(t *testing.T) {
	for argv0, want := range map[string]string{
		"kubectl-cascade": "kubectl cascade", "/usr/local/bin/kubectl-cascade": "kubectl cascade",
		"cascade": "cascade", "/cascade": "cascade", "./bin/cascade-v1.0.0-linux-amd64": "cascade",
	} {
		if got := commandName(argv0); got != want {
			t.Errorf("commandName(%q) = %q, want %q", argv0, got, want)
		}
	}

	c := runPlugin(t)
	if c.code != 0 || c.ran != nil || !strings.Contains(c.stdout, "Usage:\n  kubectl cascade [command]\n") || strings.Contains(c.stdout, "collector flags]") {
		t.Errorf("kubectl cascade: exit %d, collector ran %t, stdout:\n%s", c.code, c.ran != nil, c.stdout)
	}
	for _, name := range commands {
		if !strings.Contains(c.stdout, "\n  "+name+" ") {
			t.Errorf("kubectl cascade does not list %s:\n%s", name, c.stdout)
		}
	}
	if c := runPlugin(t, "--workers=3"); c.code != exitUsage || c.ran != nil || !strings.Contains(c.lastLine(), "unknown flag: --workers (see kubectl cascade --help)") {
		t.Errorf("kubectl cascade --workers=3: exit %d, collector ran %t, %q", c.code, c.ran != nil, c.lastLine())
	}
	if c := runPlugin(t, "run", "--workers=3"); c.code != 0 || c.ran == nil || c.ran.Workers != 3 {
		t.Errorf("kubectl cascade run --workers=3: exit %d, ran %+v", c.code, c.ran)
	}
	if c := runPlugin(t, "stauts"); c.code != exitUsage || !strings.Contains(c.stderr, "Commands of kubectl cascade:\n") || !strings.Contains(c.lastLine(), `unknown command "stauts" for "kubectl cascade" (did you mean "status"?)`) {
		t.Errorf("kubectl cascade stauts: exit %d, stderr:\n%s", c.code, c.stderr)
	}
	if c := runPlugin(t, "status", "--help"); c.code != 0 || !strings.Contains(c.stdout, "kubectl cascade status [-n NAMESPACE]") || !strings.Contains(c.stdout, "--context string") {
		t.Errorf("kubectl cascade status --help: exit %d, stdout:\n%s", c.code, c.stdout)
	}
	if c := runPlugin(t, "version"); c.code != 0 || !strings.HasPrefix(c.stdout, "cascade ") {
		t.Errorf("kubectl cascade version: exit %d, %q", c.code, c.stdout)
	}
}
