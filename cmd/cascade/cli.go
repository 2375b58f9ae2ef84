package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

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

// rootUsage is the root command's usage; plugin: run as kubectl's plugin, where the collector
// starts only as `run`.
func rootUsage(plugin bool) string {
	collector := `
  {{.CommandPath}} [collector flags]    the same as {{.CommandPath}} run [collector flags]`
	flags := `The collector's flags: {{.CommandPath}} run --help (every flag: docs/flags.md).`
	if plugin {
		collector = ""
		flags = `The collector: {{.CommandPath}} run --help (every flag: docs/flags.md).`
	}
	return `Usage:
  {{.CommandPath}} [command]` + collector + `

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}

Flags:
  -h, --help      help for {{.CommandPath}}
      --version   print the version and commit, and exit

` + flags + `
Use "{{.CommandPath}} [command] --help" for more about a command.
`
}

// newRootCommand is cascade's command line, called name ("cascade", or "kubectl cascade" as
// kubectl's plugin). The collector's flags are on cascade's root too, so that `cascade
// --flag...` (how deploy/base, the e2e harness and make run start it) runs it, as `cascade run
// --flag...` does; the plugin's root prints the help instead, and its collector is `run`.
func newRootCommand(name string, collector collectorFunc, stdout, stderr io.Writer) *cobra.Command {
	plugin := name != "cascade"
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
	if plugin {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: name}
		root.Long = "cascade, an out-of-tree garbage collector for Kubernetes, as kubectl's plugin: its commands inspect,\n" +
			"check and remove a cascade with your kubeconfig; `" + name + " run` runs the collector."
		root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	} else {
		root.Flags().AddFlagSet(fs)
	}
	root.SetUsageTemplate(rootUsage(plugin))
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
	if plugin {
		run.Short = "Run the collector"
	}
	root.AddCommand(run, newExplainCommand(), newPolicyCommand(), newStatusCommand(), newUninstallCommand(), newVersionCommand())
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
