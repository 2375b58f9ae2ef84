// Command cascade is an out-of-tree garbage collector for Kubernetes. main only parses,
// validates and wires: the command line (cobra, this file) → flags → Validate → newApp (app.go)
// → run. The collector starts as `cascade run`, or as `cascade` with flags and nothing else;
// anything the command line does not name exactly is a usage error that starts nothing.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

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
	code := execute(os.Args[1:], os.Stdout, os.Stderr, runCollector)
	klog.Flush()
	os.Exit(code)
}

// collectorFunc runs the collector with validated options until ctx ends or it fails.
type collectorFunc func(ctx context.Context, opts *Options) error

// runCollector builds every part of the collector and runs them until a signal or a failure.
func runCollector(ctx context.Context, opts *Options) error {
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
	root := newRootCommand(collector, stdout, stderr)
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

// commandList is what an unknown command prints before the error: the commands of cmd, one a
// line with its summary.
func commandList(cmd *cobra.Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Commands of %s:\n", cmd.CommandPath())
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() && c.Name() != "help" {
			continue
		}
		fmt.Fprintf(&b, "  %-11s %s\n", c.Name(), c.Short)
	}
	fmt.Fprintf(&b, "See %s --help.\n", cmd.CommandPath())
	return b.String()
}

// noArgs accepts no positional argument: one is an unknown command (a misspelt one, or a stray
// word), listed with the commands cmd has.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	at := cmd
	if !cmd.HasSubCommands() && cmd.HasParent() {
		at = cmd.Parent()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return &usageError{err: errors.New(msg), cmd: at}
}

// exactArgs accepts exactly n positional arguments, named by what for the error.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		if len(args) > n {
			return &usageError{err: fmt.Errorf("unknown command %q for %q: it takes %s", args[n], cmd.CommandPath(), what)}
		}
		return &usageError{err: fmt.Errorf("%s takes %s (see %s --help)", cmd.CommandPath(), what, cmd.CommandPath())}
	}
}

// flagError makes every flag that does not parse a usage error. When a word came before it that
// names no command (cascade polcy validate -f x: -f is not the collector's flag), that word is
// the error.
func flagError(cmd *cobra.Command, err error) error {
	if stray := cmd.Flags().Args(); len(stray) > 0 && cmd.Args != nil {
		if uerr := cmd.Args(cmd, stray); uerr != nil {
			return uerr
		}
	}
	return &usageError{err: fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())}
}

const rootUsage = `Usage:
  cascade [command]
  cascade [collector flags]    the same as cascade run [collector flags]

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}

Flags:
  -h, --help      help for cascade
      --version   print the version and commit, and exit

The collector's flags: cascade run --help (every flag: docs/flags.md).
Use "cascade [command] --help" for more about a command.
`

// newRootCommand is cascade's command line. The collector's flags are on the root too, so that
// `cascade --flag...` (how deploy/base, the e2e harness and make run start it) runs it, as
// `cascade run --flag...` does.
func newRootCommand(collector collectorFunc, stdout, stderr io.Writer) *cobra.Command {
	opts := NewOptions()
	fs := flagSet(opts)
	runE := func(cmd *cobra.Command, _ []string) error {
		if errs := opts.Validate(); len(errs) > 0 {
			return errors.New(oneLine(errs))
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return collector(ctx, opts)
	}
	root := &cobra.Command{
		Use:   "cascade",
		Short: "An out-of-tree garbage collector for Kubernetes",
		Long: "cascade is an out-of-tree garbage collector for Kubernetes: `cascade run` (or cascade with\n" +
			"collector flags and no command) runs the collector; the other commands inspect, check and remove it.",
		Args:          noArgs,
		RunE:          runE,
		Version:       versionLine(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	subUsage := root.UsageTemplate() // cobra's, for every command but the root
	root.SetOut(stdout)              // before the completion command, which keeps the writer it sees
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().AddFlagSet(fs)
	root.SetUsageTemplate(rootUsage)
	root.SetFlagErrorFunc(flagError)

	run := &cobra.Command{
		Use:   "run [flags]",
		Short: "Run the collector (the default when no command is given)",
		Long: "Run the collector until SIGTERM or SIGINT. Flags are validated before any client is built;\n" +
			"a bad value or an unreachable API server ends it with one line on stderr and exit code 1.",
		Args: noArgs,
		RunE: runE,
	}
	run.Flags().AddFlagSet(fs)
	root.AddCommand(run, newExplainCommand(), newPolicyCommand(), newUninstallCommand(), newVersionCommand())
	root.SetHelpCommand(newHelpCommand(root))
	root.InitDefaultCompletionCmd() // cascade completion bash|zsh|fish|powershell
	for _, c := range append([]*cobra.Command{root}, allCommands(root)...) {
		c.SetFlagErrorFunc(flagError)
		c.SuggestionsMinimumDistance = 2
		if c != root {
			c.SetUsageTemplate(subUsage)
		}
		if !c.Runnable() && c.HasSubCommands() {
			c.RunE = func(c *cobra.Command, _ []string) error {
				return &usageError{err: fmt.Errorf("%s takes a command", c.CommandPath()), cmd: c}
			}
		}
		if c.Args == nil || c.Name() == "completion" || (c.HasParent() && c.Parent().Name() == "completion") {
			c.Args = noArgs // cobra's completion commands' own NoArgs is not a usage error
		}
	}
	return root
}

// allCommands is every command under c, depth first.
func allCommands(c *cobra.Command) []*cobra.Command {
	var all []*cobra.Command
	for _, s := range c.Commands() {
		all = append(all, s)
		all = append(all, allCommands(s)...)
	}
	return all
}

// newHelpCommand is `cascade help [command]`: cobra's, except that a command cascade does not
// have is a usage error (exit 2), not a help page.
func newHelpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			if err != nil || c == nil || len(rest) > 0 {
				unknown := strings.Join(args, " ")
				if len(rest) > 0 {
					unknown = rest[0]
				}
				at := root
				if c != nil {
					at = c
				}
				return &usageError{err: fmt.Errorf("unknown command %q for %q", unknown, at.CommandPath()), cmd: at}
			}
			return c.Help()
		},
		ValidArgsFunction: func(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var names []cobra.Completion
			for _, c := range root.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	}
}
