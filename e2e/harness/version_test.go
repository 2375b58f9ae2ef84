package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCascadeVersion(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed to name the measured build:", err)
	}
	root := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", root, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := CascadeVersion(root); ok {
		t.Fatal("a directory that is no git checkout has a version")
	}
	git("init", "-q")
	write("main.go", "package main\n")
	write("docs/benchmarks.json", "{}\n")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	commit := git("describe", "--always")

	check := func(what, want string) {
		t.Helper()
		if got, ok := CascadeVersion(root); !ok || got != want {
			t.Fatalf("%s: version %q (ok %v), want %q", what, got, ok, want)
		}
	}
	check("clean checkout", commit)
	write("docs/benchmarks.json", "{\"measurements\": []}\n")
	write("docs/new.md", "untracked\n")
	check("only the benchmark's report under docs/ changed", commit)
	write("main.go", "package main\n\nfunc main() {}\n")
	check("a source file changed", commit+"-dirty")
}
