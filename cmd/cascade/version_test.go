package main

import (
	"encoding/json"
	"regexp"
	"runtime"
	"testing"

	"sigs.k8s.io/yaml"
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

// TestVersionOutput: `cascade version -o json|yaml` prints the build as one document.
func TestVersionOutput(t *testing.T) {
	oldVersion, oldCommit := version, commit
	t.Cleanup(func() { version, commit = oldVersion, oldCommit })
	version, commit = "v1.2.3", "abcdef0"
	want := versionInfo{Version: "v1.2.3", Commit: "abcdef0", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	c := runCLI(t, nil, "version", "-o", "json")
	var got versionInfo
	if err := json.Unmarshal([]byte(c.stdout), &got); c.code != 0 || err != nil || got != want {
		t.Errorf("version -o json: exit %d, %q (%v), want %+v", c.code, c.stdout, err, want)
	}
	c = runCLI(t, nil, "version", "-o", "yaml")
	got = versionInfo{}
	if err := yaml.UnmarshalStrict([]byte(c.stdout), &got); c.code != 0 || err != nil || got != want {
		t.Errorf("version -o yaml: exit %d, %q (%v), want %+v", c.code, c.stdout, err, want)
	}
	if c := runCLI(t, nil, "version", "-o", "wide"); c.code != exitUsage {
		t.Errorf("version -o wide: exit %d, want %d", c.code, exitUsage)
	}
}
