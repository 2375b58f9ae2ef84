package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestFlagsDoc: docs/flags.md is what the collector's flag set says (make generate rewrites
// it; make verify and this test fail when it is stale).
func TestFlagsDoc(t *testing.T) {
	fs := flagSet(NewOptions())
	own := pflag.NewFlagSet("own", pflag.ContinueOnError)
	NewOptions().AddFlags(own)
	var b strings.Builder
	b.WriteString("# cascade's flags\n\nGenerated from the flag set by `make generate`; do not edit (`make verify` fails when this\n" +
		"file is stale). `cascade run --help` prints the same. Defaults that depend on where cascade runs\n" +
		"(the namespace of the Lease and the orphan record: the pod's namespace in a cluster) are shown\n" +
		"as outside a cluster.\n")
	section := func(title string, want func(f *pflag.Flag) bool) {
		fmt.Fprintf(&b, "\n## %s\n\n| flag | type | default | meaning |\n|---|---|---|---|\n", title)
		n := 0
		fs.VisitAll(func(f *pflag.Flag) {
			if !want(f) {
				return
			}
			n++
			def := f.DefValue
			if def == "" || def == "[]" {
				def = " "
			} else {
				def = "`" + def + "`"
			}
			fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, f.Value.Type(), def, strings.ReplaceAll(f.Usage, "|", `\|`))
		})
		if n == 0 {
			t.Errorf("no flag in section %q", title)
		}
	}
	section("Collector", func(f *pflag.Flag) bool { return own.Lookup(f.Name) != nil })
	section("Logging (klog)", func(f *pflag.Flag) bool { return own.Lookup(f.Name) == nil })
	generated(t, "docs/flags.md", b.String())
}
