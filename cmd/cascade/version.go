package main

import (
	"fmt"
	"runtime"
	"slices"

	"github.com/spf13/cobra"
)

// version and commit are stamped at build time by the Makefile:
// -ldflags "-X main.version=$(git describe --tags --always --dirty) -X main.commit=$(git rev-parse HEAD)".
var (
	version = "dev"
	commit  = "unknown"
)

// versionInfo is the build `cascade version -o json|yaml` prints (docs/cli.md).
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"` // OS/ARCH
}

func buildInfo() versionInfo {
	return versionInfo{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// versionLine is what --version and `cascade version` print: one line, "cascade VERSION
// (commit COMMIT, GOVERSION, OS/ARCH)".
func versionLine() string {
	v := buildInfo()
	return fmt.Sprintf("cascade %s (commit %s, %s, %s)", v.Version, v.Commit, v.GoVersion, v.Platform)
}

// newVersionCommand is `cascade version`: the same line as `cascade --version`, or the same
// facts as JSON or YAML. It is this binary's build alone, as `kubectl version --client`: the
// running cascade's version is in `cascade status`.
func newVersionCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version [-o text|json|yaml]",
		Short: "Print the version and commit",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(outputFormats, format) {
				return &usageError{err: fmt.Errorf("invalid -o %q: text, json or yaml", format)}
			}
			return printResult(cmd.OutOrStdout(), format, buildInfo(), func() string { return versionLine() + "\n" })
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "text, json or yaml.")
	return cmd
}
