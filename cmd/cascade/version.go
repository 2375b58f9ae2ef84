package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// version and commit are stamped at build time by the Makefile:
// -ldflags "-X main.version=$(git describe --tags --always --dirty) -X main.commit=$(git rev-parse HEAD)".
var (
	version = "dev"
	commit  = "unknown"
)

// versionLine is what --version and `cascade version` print: one line, "cascade VERSION
// (commit COMMIT, GOVERSION, OS/ARCH)".
func versionLine() string {
	return fmt.Sprintf("cascade %s (commit %s, %s, %s/%s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// newVersionCommand is `cascade version`, the same line as `cascade --version`.
func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}
