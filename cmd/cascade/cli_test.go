package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// cli is one run of cascade's command line with a collector that only records the options it
// was given: no test here connects anywhere.
type cli struct {
	code           int
	stdout, stderr string
	ran            *Options // the options the collector ran with; nil: it did not run
}

func runCLI(t *testing.T, collectorErr error, args ...string) cli {
	t.Helper()
	var out, errOut strings.Builder
	var c cli
	c.code = execute(args, &out, &errOut, func(_ context.Context, opts *Options) error {
		c.ran = opts
		return collectorErr
	})
	c.stdout, c.stderr = out.String(), errOut.String()
	return c
}

// lastLine is the last line written to stderr: the error, where there is one.
func (c cli) lastLine() string {
	lines := strings.Split(strings.TrimRight(c.stderr, "\n"), "\n")
	return lines[len(lines)-1]
}

// commands are what --help and an unknown command list.
var commands = []string{"completion", "explain", "help", "policy", "run", "status", "uninstall", "version"}

// TestUnknownCommand: a word that names no command exits 2 with "unknown command", the
// commands there are and a suggestion, and never starts the collector, whatever flags follow
// (issue 23.3: `cascade polcy validate -f x.yaml --kubeconfig K` started a live collector).
func TestUnknownCommand(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		unknown  string
		listFrom string // whose commands are listed
		suggest  string
	}{
		{[]string{"polcy", "validate", "-f", "x.yaml", "--kubeconfig", "K"}, `unknown command "polcy" for "cascade"`, "cascade", `did you mean "policy"?`},
		{[]string{"--kubeconfig=K", "explian", "cm/x"}, `unknown command "explian" for "cascade"`, "cascade", `did you mean "explain"?`},
		{[]string{"uninstal", "--dry-run"}, `unknown command "uninstal" for "cascade"`, "cascade", `did you mean "uninstall"?`},
		{[]string{"help", "polcy"}, `unknown command "polcy" for "cascade"`, "cascade", ""},
		{[]string{"policy", "valdate", "-f", "x.yaml"}, `unknown command "valdate" for "cascade policy"`, "cascade policy", `did you mean "validate"?`},
		{[]string{"completion", "tcsh"}, `unknown command "tcsh" for "cascade completion"`, "cascade completion", ""},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := runCLI(t, nil, tt.args...)
			if c.code != exitUsage {
				t.Errorf("exit code %d, want %d; stderr:\n%s", c.code, exitUsage, c.stderr)
			}
			if c.ran != nil {
				t.Fatal("the collector ran")
			}
			if !strings.HasPrefix(c.lastLine(), "cascade: ") || !strings.Contains(c.lastLine(), tt.unknown) {
				t.Errorf("last stderr line %q, want cascade: ...%s", c.lastLine(), tt.unknown)
			}
			if tt.suggest != "" && !strings.Contains(c.lastLine(), tt.suggest) {
				t.Errorf("last stderr line %q lacks %q", c.lastLine(), tt.suggest)
			}
			if !strings.Contains(c.stderr, "Commands of "+tt.listFrom+":\n") {
				t.Errorf("stderr does not list the commands of %s:\n%s", tt.listFrom, c.stderr)
			}
			if tt.listFrom == "cascade" {
				for _, name := range commands {
					if !strings.Contains(c.stderr, "\n  "+name+" ") {
						t.Errorf("stderr does not list %q:\n%s", name, c.stderr)
					}
				}
			}
			if c.stdout != "" {
				t.Errorf("stdout %q, want nothing", c.stdout)
			}
		})
	}
}

// TestStrayArgument: a positional argument the collector or a command does not take is an
// unknown command (exit 2), the collector not started.
func TestStrayArgument(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		unknown string
	}{
		{[]string{"run", "extra"}, `unknown command "extra" for "cascade run"`},
		{[]string{"--workers=3", "extra"}, `unknown command "extra" for "cascade"`},
		{[]string{"run", "--workers=3", "extra", "--dry-run"}, `unknown command "extra" for "cascade run"`},
		{[]string{"--", "run"}, `unknown command "run" for "cascade"`},
		{[]string{"version", "now"}, `unknown command "now" for "cascade version"`},
		{[]string{"explain", "cm/a", "cm/b"}, `unknown command "cm/b" for "cascade explain"`},
		{[]string{"policy", "validate", "-f", "x.yaml", "more"}, `unknown command "more" for "cascade policy validate"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := runCLI(t, nil, tt.args...)
			if c.code != exitUsage || c.ran != nil {
				t.Errorf("exit code %d, collector ran: %t; want %d and not run; stderr:\n%s", c.code, c.ran != nil, exitUsage, c.stderr)
			}
			if !strings.Contains(c.lastLine(), tt.unknown) {
				t.Errorf("last stderr line %q lacks %q", c.lastLine(), tt.unknown)
			}
		})
	}
}

// TestFlagErrors: a flag that does not parse is a usage error (exit 2, one line that names it);
// a value that parses but does not validate is a failure (exit 1, as before cobra); neither
// starts the collector.
func TestFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--no-such-flag"}, exitUsage, "cascade: unknown flag: --no-such-flag (see cascade --help)"},
		{[]string{"run", "--no-such-flag"}, exitUsage, "cascade: unknown flag: --no-such-flag (see cascade run --help)"},
		{[]string{"--workers=abc"}, exitUsage, `invalid argument "abc" for "--workers" flag`},
		{[]string{"explain", "--workers=3", "cm/x"}, exitUsage, "unknown flag: --workers"},
		{[]string{"--workers=0"}, exitFailure, "cascade: invalid --workers=0: must be between 1 and 1000"},
		{[]string{"run", "--workers=0", "--discovery-period=1ms"}, exitFailure, "invalid --discovery-period=1ms"},
		{[]string{"explain", "nonsense"}, exitUsage, "explain takes one RESOURCE[.GROUP]/NAME"},
		{[]string{"explain"}, exitUsage, "cascade explain takes one RESOURCE[.GROUP]/NAME"},
		{[]string{"explain", "cm/x", "-o", "xml"}, exitUsage, `invalid -o "xml"`},
		{[]string{"policy"}, exitUsage, "policy takes a command: validate or render"},
		{[]string{"policy", "validate"}, exitUsage, "cascade policy validate takes -f FILE"},
		{[]string{"completion"}, exitUsage, "cascade completion takes a command"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := runCLI(t, nil, tt.args...)
			if c.code != tt.code || c.ran != nil {
				t.Errorf("exit code %d, collector ran: %t; want %d and not run; stderr:\n%s", c.code, c.ran != nil, tt.code, c.stderr)
			}
			if !strings.Contains(c.lastLine(), tt.want) {
				t.Errorf("last stderr line %q lacks %q", c.lastLine(), tt.want)
			}
		})
	}
}

// TestHelpListsCommands: --help, -h and `cascade help` list every command and start nothing.
func TestHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"--kubeconfig=K", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			c := runCLI(t, nil, args...)
			if c.code != 0 || c.ran != nil {
				t.Fatalf("exit code %d, collector ran: %t; stderr:\n%s", c.code, c.ran != nil, c.stderr)
			}
			for _, name := range commands {
				if !strings.Contains(c.stdout, "\n  "+name+" ") {
					t.Errorf("help does not list %q:\n%s", name, c.stdout)
				}
			}
			if !strings.Contains(c.stdout, "cascade run --help") {
				t.Errorf("help does not say where the collector's flags are:\n%s", c.stdout)
			}
		})
	}
	c := runCLI(t, nil, "help", "policy")
	if c.code != 0 || !strings.Contains(c.stdout, "validate") || !strings.Contains(c.stdout, "render") {
		t.Errorf("help policy: exit %d, stdout:\n%s", c.code, c.stdout)
	}
}

// TestRunHelpShowsFlags: `cascade run --help` shows every collector flag with its type, not a
// phrase of its usage as the value name (pflag takes `backquoted` text in a usage for it).
func TestRunHelpShowsFlags(t *testing.T) {
	c := runCLI(t, nil, "run", "--help")
	if c.code != 0 || c.ran != nil {
		t.Fatalf("exit code %d, collector ran: %t", c.code, c.ran != nil)
	}
	for _, want := range []string{"--policy-configmap string ", "--workers int ", "--dry-run ", "-v, --v Level "} {
		if !strings.Contains(c.stdout, want) {
			t.Errorf("run --help lacks %q:\n%s", want, c.stdout)
		}
	}
	flagSet(NewOptions()).VisitAll(func(f *pflag.Flag) {
		if name, _ := pflag.UnquoteUsage(f); strings.Contains(f.Usage, "`") || strings.Contains(name, " ") {
			t.Errorf("--%s shows %q as its value name: no backquotes in its usage", f.Name, name)
		}
	})
}

// TestCollectorStarts: with no command and no positional argument, and as `cascade run`, the
// collector runs with the flags given; its failure is one line and exit 1.
func TestCollectorStarts(t *testing.T) {
	for _, args := range [][]string{nil, {"--workers=3"}, {"run", "--workers=3"}, {"--workers", "3", "--dry-run=false"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			c := runCLI(t, nil, args...)
			if c.code != 0 || c.ran == nil {
				t.Fatalf("exit code %d, collector ran: %t; stderr:\n%s", c.code, c.ran != nil, c.stderr)
			}
			if want := 3; len(args) > 0 && c.ran.Workers != want {
				t.Errorf("collector ran with --workers=%d, want %d", c.ran.Workers, want)
			}
			if len(args) == 0 && c.ran.Workers != NewOptions().Workers {
				t.Errorf("collector ran with --workers=%d, want the default", c.ran.Workers)
			}
		})
	}
	c := runCLI(t, errors.New("cannot reach the API server at https://x:1\nsecond line"), "run")
	if c.code != exitFailure || c.ran == nil {
		t.Fatalf("a failing collector: exit code %d, ran: %t", c.code, c.ran != nil)
	}
	if c.stderr != "cascade: cannot reach the API server at https://x:1 second line\n" {
		t.Errorf("stderr %q, want one line", c.stderr)
	}
}

// TestCompletion: `cascade completion bash|zsh|fish` prints a script for cascade.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "__start_cascade", "zsh": "#compdef cascade", "fish": "complete -c cascade",
	} {
		c := runCLI(t, nil, "completion", shell)
		if c.code != 0 || c.ran != nil || !strings.Contains(c.stdout, want) {
			t.Errorf("completion %s: exit %d, ran %t, script lacks %q", shell, c.code, c.ran != nil, want)
		}
	}
	// What the scripts ask: the commands, then a subcommand's.
	c := runCLI(t, nil, "__complete", "")
	for _, name := range []string{"run", "explain", "policy", "version"} {
		if !strings.Contains(c.stdout, name+"\t") {
			t.Errorf("completion of cascade lacks %q:\n%s", name, c.stdout)
		}
	}
	c = runCLI(t, nil, "__complete", "policy", "")
	if !strings.Contains(c.stdout, "validate\t") || !strings.Contains(c.stdout, "render\t") || c.ran != nil {
		t.Errorf("completion of cascade policy:\n%s", c.stdout)
	}
}
