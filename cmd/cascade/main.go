// Command cascade is an out-of-tree garbage collector for Kubernetes. main only parses,
// validates and wires: flags → Validate → newApp (app.go) → run.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

func main() {
	run := run
	if len(os.Args) > 1 {
		if sub, ok := subcommands[os.Args[1]]; ok {
			run = func(args []string) error { return sub(args[1:], os.Stdout) }
		}
	}
	err := run(os.Args[1:])
	klog.Flush()
	if err != nil {
		// One line that says what to fix; details are in the structured log above it.
		fmt.Fprintf(os.Stderr, "cascade: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}

// run is the collector: parse the flags, validate them all before any client is built, then
// build every part and run them until a signal or a failure.
func run(args []string) error {
	opts := NewOptions()
	fs := flagSet(opts)
	showVersion := fs.Bool("version", false, "Print the version and commit, and exit.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w (see --help)", err)
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, versionLine())
		return err
	}
	if errs := opts.Validate(); len(errs) > 0 {
		return errors.New(oneLine(errs))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	a, err := newApp(ctx, opts)
	if err != nil {
		return err
	}
	return a.run(ctx)
}
