//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCommandLineStartsNothing (issue 23.3): with a kubeconfig that reaches the suite's
// control plane, a misspelt command, a stray argument or an unknown help topic exits 2 at once
// with "unknown command", where cascade used to start a live collector; the binary's --help
// lists the commands.
func TestCommandLineStartsNothing(t *testing.T) {
	kubeconfig := "--kubeconfig=" + suite.CP.KubeconfigPath
	for _, args := range [][]string{
		{"polcy", "validate", "-f", "x.yaml", kubeconfig},
		{"run", "extra", kubeconfig},
		{kubeconfig, "stray"},
		{"help", "polcy"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			// A collector that started would run until killed: the deadline ends it, and the exit
			// code says so.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, suite.CascadeBin, args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			_ = cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "cascade: unknown command ") {
				t.Errorf("last stderr line %q, want cascade: unknown command ...", last)
			}
			if !strings.Contains(stderr.String(), "\n  uninstall ") || !strings.Contains(stderr.String(), "\n  run ") {
				t.Errorf("stderr does not list the commands:\n%s", stderr.String())
			}
		})
	}
	out, err := exec.Command(suite.CascadeBin, "--help").Output()
	if err != nil {
		t.Fatalf("cascade --help: %v", err)
	}
	for _, name := range []string{"run", "explain", "policy", "uninstall", "version", "completion"} {
		if !strings.Contains(string(out), "\n  "+name+" ") {
			t.Errorf("cascade --help does not list %s:\n%s", name, out)
		}
	}
}
