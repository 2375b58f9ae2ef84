package main

import (
	"regexp"
	"runtime"
	"testing"
)

// TestVersionFlag: --version and `cascade version` print one line naming the stamped version
// and commit and return before anything else runs, even with flags that would not validate.
func TestVersionFlag(t *testing.T) {
	oldVersion, oldCommit := version, commit
	t.Cleanup(func() { version, commit = oldVersion, oldCommit })
	version, commit = "v1.2.3-4-gabcdef0-dirty", "abcdef0123456789abcdef0123456789abcdef01"
	re := regexp.MustCompile(`^cascade (\S+) \(commit ([0-9a-f]+|unknown), (go\S+), (\S+)/(\S+)\)\n$`)
	for _, args := range [][]string{{"--version", "--workers=0"}, {"version"}} {
		c := runCLI(t, nil, args...)
		if c.code != 0 || c.ran != nil {
			t.Fatalf("%v: exit code %d, collector ran: %t; want 0 and not run", args, c.code, c.ran != nil)
		}
		m := re.FindStringSubmatch(c.stdout)
		if m == nil {
			t.Fatalf("%v printed %q, want one line matching %s", args, c.stdout, re)
		}
		if m[1] != version || m[2] != commit || m[3] != runtime.Version() || m[4] != runtime.GOOS || m[5] != runtime.GOARCH {
			t.Errorf("%v printed %q: fields %q", args, c.stdout, m[1:])
		}
	}
}
