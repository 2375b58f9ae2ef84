// Command cascade is an out-of-tree garbage collector for Kubernetes. main only parses,
// validates and wires: the command line (cobra, this file) → flags → Validate → newApp (app.go)
// → run. The collector starts as `cascade run`, or as `cascade` with flags and nothing else;
// anything the command line does not name exactly is a usage error that starts nothing. The
// same binary named kubectl-cascade is kubectl's plugin: `kubectl cascade COMMAND`, where the
// collector starts only as `run` and no command prints the help.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// Exit codes: 0 done, 1 a failure (a flag value that does not validate, an API server that
// cannot be reached, ...), 2 a command line that names no command cascade has (an unknown
// command, a stray argument, an unknown flag, a value that does not parse).
const (
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	code := executeAs(commandName(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr, runCollector)
	klog.Flush()
	os.Exit(code)
}

// pluginName is the name kubectl runs cascade by as a plugin (`kubectl cascade ...`): the
// release archives and the krew manifest install this same binary as kubectl-cascade.
const pluginName = "kubectl-cascade"

// commandName is what the command line calls itself, from the name the binary was run by
// (argv[0]): "kubectl cascade" for kubectl-cascade, else "cascade".
func commandName(argv0 string) string {
	if filepath.Base(argv0) == pluginName {
		return "kubectl cascade"
	}
	return "cascade"
}

// collectorFunc runs the collector with validated options until ctx ends or it fails.
type collectorFunc func(ctx context.Context, opts *Options) error

// runCollector builds every part of the collector and runs them until a signal or a failure.
func runCollector(ctx context.Context, opts *Options) error {
	if err := applyLogging(opts.Logs); err != nil {
		return err
	}
	a, err := newApp(ctx, opts)
	if err != nil {
		return err
	}
	return a.run(ctx)
}

// usageError is a command line cascade cannot act on: exit 2, and nothing was started.
type usageError struct {
	err error
	// cmd is the command whose commands are listed with an unknown command (nil: none listed).
	cmd *cobra.Command
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// execute runs the command line args and returns the exit code. Usage errors and failures end
// with one line on stderr, "cascade: ...", the last line written; an unknown command also lists
// the commands there are. collector is what `cascade run` runs (tests pass their own).
func execute(args []string, stdout, stderr io.Writer, collector collectorFunc) int {
	return executeAs("cascade", args, stdout, stderr, collector)
}

// executeAs is execute for the command line called name: "cascade", or "kubectl cascade" when
// kubectl runs the binary as its plugin (commandName).
func executeAs(name string, args []string, stdout, stderr io.Writer, collector collectorFunc) int {
	root := newRootCommand(name, collector, stdout, stderr)
	root.SetArgs(args)
	_, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if ue, ok := errors.AsType[*usageError](err); ok {
		if ue.cmd != nil {
			_, _ = io.WriteString(stderr, commandList(ue.cmd))
		}
		_, _ = fmt.Fprintf(stderr, "cascade: %s\n", oneLineString(err.Error()))
		return exitUsage
	}
	// One line that says what to fix; details are in the structured log above it.
	_, _ = fmt.Fprintf(stderr, "cascade: %s\n", oneLineString(err.Error()))
	return exitFailure
}

func oneLineString(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
