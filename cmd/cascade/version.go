package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// version and commit are stamped at build time by the Makefile:
// -ldflags "-X main.version=$(git describe --tags --always --dirty) -X main.commit=$(git rev-parse HEAD)".
var (
	version = "dev"
	commit  = "unknown"
)

// versionLine is what --version prints: one line, "cascade VERSION (commit COMMIT, GOVERSION,
// OS/ARCH)".
func versionLine() string {
	return fmt.Sprintf("cascade %s (commit %s, %s, %s/%s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// stdout receives --version's line (a test replaces it).
var stdout io.Writer = os.Stdout
