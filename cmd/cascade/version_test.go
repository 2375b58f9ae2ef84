package main

import (
	"bytes"
	"regexp"
	"runtime"
	"testing"
)

// TestVersionFlag: --version prints one line naming the stamped version and commit and returns
// before anything else runs, even with flags that would not validate.
func TestVersionFlag(t *testing.T) {
	oldVersion, oldCommit, oldStdout := version, commit, stdout
	t.Cleanup(func() { version, commit, stdout = oldVersion, oldCommit, oldStdout })
	version, commit = "v1.2.3-4-gabcdef0-dirty", "abcdef0123456789abcdef0123456789abcdef01"
	var out bytes.Buffer
	stdout = &out
	if err := run([]string{"--version", "--workers=0"}); err != nil {
		t.Fatalf("run(--version) = %v, want nil (exit 0)", err)
	}
	re := regexp.MustCompile(`^cascade (\S+) \(commit ([0-9a-f]+|unknown), (go\S+), (\S+)/(\S+)\)\n$`)
	m := re.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("--version printed %q, want one line matching %s", out.String(), re)
	}
	if m[1] != version || m[2] != commit || m[3] != runtime.Version() || m[4] != runtime.GOOS || m[5] != runtime.GOARCH {
		t.Errorf("--version printed %q: fields %q", out.String(), m[1:])
	}
}
