package report

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCommittedReportRoundTrips reads the committed docs/benchmarks.json and writes it again:
// the bytes must be the same, so no field of the file is unknown to the schema or written
// differently.
func TestCommittedReportRoundTrips(t *testing.T) {
	committed := filepath.Join("..", "..", "..", "docs", "benchmarks.json")
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Skipf("no committed report: %v", err)
	}
	rep, err := Read(committed)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) == 0 || len(rep.Measurements) == 0 || len(rep.Config.Budgets) == 0 {
		t.Fatalf("decoded an empty report: %d rows, %d measurements", len(rep.Rows), len(rep.Measurements))
	}
	out := filepath.Join(t.TempDir(), "sub", "benchmarks.json")
	if err := Write(out, rep); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("writing the committed report back changes it (%d bytes, want %d)", len(got), len(want))
	}
}

func TestRowFigure(t *testing.T) {
	var r Row
	for i, s := range Subjects {
		f := &Figure{Median: float64(i + 1)}
		r.SetFigure(s, f)
		if r.Figure(s) != f {
			t.Errorf("Figure(%s) is not what SetFigure set", s)
		}
	}
	if r.InTree.Median != 1 || r.Cascade.Median != 2 || r.Raw.Median != 3 {
		t.Errorf("subjects set the wrong fields: %+v", r)
	}
	if r.Figure("nobody") != nil {
		t.Error("Figure of an unknown subject is not nil")
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567", -1000: "-1,000", -100: "-100"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestTreesAtBudget: the unthrottled budget takes the unthrottled trees where they are set, and
// the trees otherwise; a QPS budget always takes the trees.
func TestTreesAtBudget(t *testing.T) {
	c := Config{
		Background: []int{10, 100}, Foreground: []int{10, 100}, Orphan: []int{1, 500}, Levels: []int{10, 10, 10},
		UnthrottledBackground: []int{10, 1000}, UnthrottledLevels: []int{10, 10, 100},
	}
	bg, fg, orphan, levels := c.Trees(Budget{Name: "40 QPS", QPS: 40, Burst: 30})
	if !slices.Equal(bg, c.Background) || !slices.Equal(fg, c.Foreground) || !slices.Equal(orphan, c.Orphan) || !slices.Equal(levels, c.Levels) {
		t.Errorf("at 40 QPS: %v %v %v %v, want the trees", bg, fg, orphan, levels)
	}
	bg, fg, orphan, levels = c.Trees(Budget{Name: "unthrottled"})
	if !slices.Equal(bg, []int{10, 1000}) || !slices.Equal(levels, []int{10, 10, 100}) {
		t.Errorf("unthrottled: background %v, levels %v, want the unthrottled trees", bg, levels)
	}
	if !slices.Equal(fg, c.Foreground) || !slices.Equal(orphan, c.Orphan) {
		t.Errorf("unthrottled: foreground %v, orphan %v, want the trees (no unthrottled ones set)", fg, orphan)
	}
}
