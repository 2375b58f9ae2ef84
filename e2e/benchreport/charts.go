package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/cascade-gc/cascade/e2e/compare/report"
)

// One colour per subject, in the order of report.Subjects.
var subjectColors = []color.Color{
	color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}, // in-tree
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // cascade
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // raw
}

// drawThroughput draws objects/s per scenario, one panel per budget.
func drawThroughput(rep report.Report, path string) (bool, error) {
	return drawPanels(rep, path, "throughput", "objects/s (higher is better)",
		func(r report.Row) (string, bool) { return shortTitle(r), r.Metric == report.MetricThroughput })
}

// drawLatency draws p50 and p99 of the small cascade, one panel per budget.
func drawLatency(rep report.Report, path string) (bool, error) {
	return drawPanels(rep, path, "small-cascade latency", "ms, owner deleted → last dependent gone (lower is better)",
		func(r report.Row) (string, bool) {
			return r.Metric, r.Metric == report.MetricP50 || r.Metric == report.MetricP99
		})
}

// drawPanels draws, for each budget, a bar chart of the rows that pick selects: one group of
// bars per row (labelled by pick), one bar per subject, the median's value written above it and
// the runs' range as an error bar when there was more than one run.
func drawPanels(rep report.Report, path, title, yLabel string, pick func(report.Row) (string, bool)) (bool, error) {
	var plots []*plot.Plot
	for _, bud := range rep.Config.Budgets {
		var rows []report.Row
		var names []string
		for _, r := range rep.Rows {
			if name, ok := pick(r); ok && r.Budget == bud.Name {
				rows = append(rows, r)
				names = append(names, name)
			}
		}
		if len(rows) == 0 {
			continue
		}
		p, err := barPanel(fmt.Sprintf("%s @ %s", title, bud.Name), yLabel, rows, names)
		if err != nil {
			return false, err
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return false, nil
	}
	w, h := vg.Length(len(plots))*6*vg.Inch, 4.5*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return false, err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return false, err
	}
	return true, f.Close()
}

func barPanel(title, yLabel string, rows []report.Row, names []string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = font.Length(13)
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	width := vg.Points(18)
	var top float64
	for si, s := range report.Subjects {
		vals := make(plotter.Values, len(rows))
		var labels plotter.XYLabels
		var errs errorBars
		for i, r := range rows {
			f := r.Figure(s)
			if f == nil {
				continue
			}
			vals[i] = f.Median
			top = max(top, f.Max)
			labels.XYs = append(labels.XYs, plotter.XY{X: float64(i), Y: f.Max})
			labels.Labels = append(labels.Labels, short(f.Median))
			if f.Runs > 1 {
				errs = append(errs, errorBar{x: float64(i), y: f.Median, lo: f.Median - f.Min, hi: f.Max - f.Median})
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.Color = subjectColors[si]
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(si-1) * width
		p.Add(bars)
		p.Legend.Add(s, bars)
		if len(errs) > 0 {
			p.Add(rangeBars{bars: errs, offset: bars.Offset})
		}
		if len(labels.Labels) > 0 {
			lb, err := plotter.NewLabels(labels)
			if err != nil {
				return nil, err
			}
			for i := range lb.TextStyle {
				lb.TextStyle[i].Font.Size = font.Length(8)
				lb.TextStyle[i].XAlign = draw.XCenter
			}
			lb.Offset = vg.Point{X: bars.Offset, Y: vg.Points(3)}
			p.Add(lb)
		}
	}
	p.Y.Max = niceCeil(top * 1.35) // room for the labels and the legend
	p.Y.Tick.Marker = plainTicks{}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(rows))-0.4
	return p, nil
}

// errorBar is the runs' range around a median.
type errorBar struct{ x, y, lo, hi float64 }
type errorBars []errorBar

// rangeBars draws error bars shifted by offset, like the bars they belong to (gonum's
// YErrorBars has no offset).
type rangeBars struct {
	bars   errorBars
	offset vg.Length
}

func (r rangeBars) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	style := draw.LineStyle{Color: color.Black, Width: vg.Points(1)}
	cap := vg.Points(4)
	for _, e := range r.bars {
		x := trX(e.x) + r.offset
		lo, hi := trY(e.y-e.lo), trY(e.y+e.hi)
		c.StrokeLine2(style, x, lo, x, hi)
		c.StrokeLine2(style, x-cap, lo, x+cap, lo)
		c.StrokeLine2(style, x-cap, hi, x+cap, hi)
	}
}

// niceCeil rounds v up to a round multiple of a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*pow >= v {
			return m * pow
		}
	}
	return 10 * pow
}

// plainTicks are gonum's default ticks labelled without trailing zeros.
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// shortTitle is a scenario's title without its sizes, for the x axis.
func shortTitle(r report.Row) string {
	switch r.Scenario {
	case "levels":
		return "3 levels"
	default:
		return r.Scenario
	}
}

func short(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
