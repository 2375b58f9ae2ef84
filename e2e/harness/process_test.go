package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The test binary re-executes itself as a "harness process" that starts a child (sleep) and
// then dies in the way the test asks: a panic, SIGKILL, or a normal Stop.
const childEnv = "CASCADE_HARNESS_TEST_MODE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		runHarnessProcess(mode)
		return
	}
	os.Exit(m.Run())
}

func runHarnessProcess(mode string) {
	dir, _ := os.MkdirTemp("", "harness-test-")
	p, err := StartProcess(dir, "sleeper", "/bin/sleep", []string{"300"}, ProcessOptions{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("child", p.Pid())
	switch mode {
	case "panic":
		panic("test panics with a child running")
	case "sigkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the SIGKILL ends the process: nothing after it runs
	case "stop":
		_ = p.Stop(5 * time.Second)
		os.Exit(0)
	}
}

func alive(pid int) bool {
	// A zombie still answers kill(0); read its state instead.
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data))
	return len(fields) > 2 && fields[2] != "Z"
}

// TestChildrenNeverOutliveTheHarness: whether the process that started them panics, is killed
// with SIGKILL, or stops them, no child is left running.
func TestChildrenNeverOutliveTheHarness(t *testing.T) {
	for _, mode := range []string{"panic", "sigkill", "stop"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+mode)
			out, _ := cmd.CombinedOutput()
			var pid int
			for _, line := range strings.Split(string(out), "\n") {
				if v, ok := strings.CutPrefix(line, "child "); ok {
					pid, _ = strconv.Atoi(strings.TrimSpace(v))
				}
			}
			if pid == 0 {
				t.Fatalf("harness process did not start a child:\n%s", out)
			}
			if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return !alive(pid), nil
			}); err != nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("child %d still running after its harness process ended (%s)", pid, mode)
			}
		})
	}
}

func TestTailAndWaitForLine(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProcess(dir, "echo", "/bin/sh", []string{"-c", "for i in 1 2 3 4 5; do echo line $i; done; echo ready; sleep 30"}, ProcessOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop(time.Second) }()
	ctx := t.Context()
	if err := p.WaitForLine(ctx, "ready"); err != nil {
		t.Fatal(err)
	}
	if got := p.Tail(2); got != "line 5\nready" {
		t.Errorf("Tail(2) = %q", got)
	}
}
