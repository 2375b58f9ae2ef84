package harness

import (
	"bytes"
	"os/exec"
	"strings"
)

// CascadeVersion names the cascade a benchmark measures, for its report: `git describe --always`
// of root, with "-dirty" only when tracked files outside docs/ differ from the commit. The
// benchmarks write their reports under docs/ (after every measurement), and those must not make
// the next run look like another build: a resumed comparison would not resume. ok is false
// when root is not a git checkout.
func CascadeVersion(root string) (version string, ok bool) {
	out, err := exec.Command("git", "-C", root, "describe", "--always").Output()
	if err != nil {
		return "", false
	}
	version = strings.TrimSpace(string(out))
	changed, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs").Output()
	if err == nil && len(bytes.TrimSpace(changed)) > 0 {
		version += "-dirty"
	}
	return version, true
}
