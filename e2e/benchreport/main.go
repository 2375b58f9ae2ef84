// Command benchreport renders the GC comparison that `make bench` measured (BenchmarkCompareGC in
// e2e/compare, written to docs/benchmarks.json) as docs/benchmarks.md and two charts,
// docs/throughput.png and docs/latency.png. It computes nothing new: every number it writes
// comes from the JSON, read with the writer's own types (package
// github.com/cascade-gc/cascade/e2e/compare/report). It lives in its own module so that the
// plotting library never enters cascade's; that module requires cascade's through a replace
// of the working tree.
//
// Usage: benchreport [-in docs/benchmarks.json] [-out docs]
//
// `benchreport dashboard` draws a snapshot of cascade's dashboard instead (dashboard.go): the
// key panels of deploy/monitoring/dashboard.json over one real run, as `make
// dashboard-snapshot` read them back from Prometheus into docs/dashboard-snapshot.json.
//
// Usage: benchreport dashboard [-in docs/dashboard-snapshot.json] [-out docs]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cascade-gc/cascade/e2e/compare/report"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "dashboard" {
		if err := dashboardMain(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "benchreport dashboard: %v\n", err)
			os.Exit(1)
		}
		return
	}
	in := flag.String("in", "docs/benchmarks.json", "the comparison's JSON, as written by BenchmarkCompareGC")
	out := flag.String("out", "docs", "directory for benchmarks.md, throughput.png and latency.png")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintf(os.Stderr, "benchreport: %v\n", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	rep, err := report.Read(in)
	if err != nil {
		return err
	}
	if len(rep.Rows) == 0 {
		return fmt.Errorf("%s holds no results", in)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	charts := []struct {
		file string
		draw func(report.Report, string) (bool, error)
	}{
		{"throughput.png", drawThroughput},
		{"latency.png", drawLatency},
	}
	var drawn []string
	for _, c := range charts {
		path := filepath.Join(out, c.file)
		ok, err := c.draw(rep, path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if ok {
			drawn = append(drawn, c.file)
			fmt.Printf("benchreport: wrote %s\n", path)
		}
	}
	md := filepath.Join(out, "benchmarks.md")
	if err := os.WriteFile(md, []byte(markdown(rep, drawn)), 0o644); err != nil {
		return err
	}
	fmt.Printf("benchreport: wrote %s\n", md)
	return nil
}
