//go:build e2e

package compare

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"

	"github.com/cascade-gc/cascade/e2e/compare/report"
)

// The full comparison takes hours, more than a session may have: it is resumable. The report is
// written after every measurement; a later run with the same sizes reads it back and measures
// only what is missing (a figure is one scenario, budget, subject and run; a failed one is
// measured again), so several runs fill one report.

// resume reads the report at r.out and keeps its measurements when mode allows: "" when it was
// made by the same cascade commit with the same sizes, "1" whatever the commit, "0" never.
func (r *comparison) resume(mode string) error {
	if mode == "0" {
		return nil
	}
	if mode != "" && mode != "1" {
		return fmt.Errorf("BENCH_RESUME=%q: want 1 (resume whatever the commit), 0 (start afresh) or nothing", mode)
	}
	prev, err := report.Read(r.out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		fmt.Printf("compare: not resuming: %v\n", err)
		return nil
	}
	if why := incompatible(prev.Config, r.cfg); why != "" {
		fmt.Printf("compare: not resuming %s: %s\n", r.out, why)
		return nil
	}
	commit := versions(r.root)["cascade"]
	if mode == "" && prev.Versions["cascade"] != commit {
		fmt.Printf("compare: not resuming %s: made by cascade %s, this is %s (BENCH_RESUME=1 resumes anyway)\n", r.out, prev.Versions["cascade"], commit)
		return nil
	}
	r.prev = prev
	r.measurements = slices.Clone(prev.Measurements)
	done := 0
	for _, m := range prev.Measurements {
		if m.Error == "" {
			done++
		}
	}
	fmt.Printf("compare: resuming %s (cascade %s, %s): %d measurement(s) kept\n", r.out, prev.Versions["cascade"], prev.Date, done)
	return nil
}

// incompatible says why measurements made with prev cannot be mixed with cur's ("" when they
// can): the sizes, the seed and the concurrency must match, and a budget of the same name must
// have the same burst. Scenarios, budgets and runs may differ: that is how a report is filled.
func incompatible(prev, cur report.Config) string {
	a, b := prev, cur
	a.Scenarios, b.Scenarios, a.Budgets, b.Budgets, a.Runs, b.Runs = nil, nil, nil, nil, 0, 0
	if !reflect.DeepEqual(a, b) {
		return "its sizes, seed or workers differ"
	}
	for _, pb := range prev.Budgets {
		for _, cb := range cur.Budgets {
			if pb.Name == cb.Name && pb != cb {
				return fmt.Sprintf("budget %q was %+v, now %+v", pb.Name, pb, cb)
			}
		}
	}
	return ""
}

// have reports whether the figure was measured already, without failing.
func (r *comparison) have(scenario, budget, subject string, run int) bool {
	for _, m := range r.measurements {
		if m.Scenario == scenario && m.Budget == budget && m.Subject == subject && m.Run == run && m.Error == "" {
			fmt.Printf("compare: %s %s run %d (%s): measured already\n", scenario, budget, run, subject)
			return true
		}
	}
	return false
}

func sameFigure(a, b report.Measurement) bool {
	return a.Scenario == b.Scenario && a.Budget == b.Budget && a.Subject == b.Subject && a.Run == b.Run
}

// reportConfig is the configuration the report describes: this run's, widened by what the
// resumed report covered (its scenarios, budgets and runs).
func (r *comparison) reportConfig() report.Config {
	cfg := r.cfg
	if r.prev.Date == "" {
		return cfg
	}
	cfg.Runs = max(cfg.Runs, r.prev.Config.Runs)
	cfg.Scenarios = nil
	for _, s := range allScenarios {
		if slices.Contains(r.cfg.Scenarios, s) || slices.Contains(r.prev.Config.Scenarios, s) {
			cfg.Scenarios = append(cfg.Scenarios, s)
		}
	}
	cfg.Budgets = slices.Clone(r.cfg.Budgets)
	for _, pb := range r.prev.Config.Budgets {
		if !slices.ContainsFunc(cfg.Budgets, func(b report.Budget) bool { return b.Name == pb.Name }) {
			cfg.Budgets = append(cfg.Budgets, pb)
		}
	}
	return cfg
}

// flush writes the report as it stands.
func (r *comparison) flush() {
	if r.out == "" {
		return
	}
	if err := report.Write(r.out, r.results(r.root)); err != nil {
		fmt.Printf("compare: writing %s: %v\n", r.out, err)
	}
}
