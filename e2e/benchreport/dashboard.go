package main

import (
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/cascade-gc/cascade/deploy/monitoring"
)

// dashboardCharts are the key panels drawn, each into its own PNG, with the y axis' label.
var dashboardCharts = []struct{ title, file, yLabel string }{
	{monitoring.PanelGraphSize, "dashboard-graph-size.png", "nodes"},
	{monitoring.PanelLatency, "dashboard-latency.png", "seconds"},
	{monitoring.PanelThroughput, "dashboard-throughput.png", "per second"},
	{monitoring.PanelQueueDepth, "dashboard-queue-depth.png", "items waiting"},
	{monitoring.PanelAPI, "dashboard-api-requests.png", "requests per second"},
}

// seriesColors is Grafana's classic palette, one colour per series of a panel.
var seriesColors = []color.Color{
	color.RGBA{R: 0x73, G: 0xbf, B: 0x69, A: 0xff},
	color.RGBA{R: 0xf2, G: 0xcc, B: 0x0c, A: 0xff},
	color.RGBA{R: 0x8a, G: 0xb8, B: 0xff, A: 0xff},
	color.RGBA{R: 0xff, G: 0x98, B: 0x30, A: 0xff},
	color.RGBA{R: 0xf2, G: 0x49, B: 0x5c, A: 0xff},
	color.RGBA{R: 0x57, G: 0x94, B: 0xf2, A: 0xff},
	color.RGBA{R: 0xb8, G: 0x77, B: 0xd9, A: 0xff},
	color.RGBA{R: 0x70, G: 0xdb, B: 0xed, A: 0xff},
}

func dashboardMain(args []string) error {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	in := fs.String("in", "docs/dashboard-snapshot.json", "the snapshot, as written by TestMonitoringOnPrometheus (make dashboard-snapshot)")
	out := fs.String("out", "docs", "directory for the dashboard-*.png charts")
	if err := fs.Parse(args); err != nil {
		return err
	}
	snap, err := monitoring.ReadSnapshot(*in)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, c := range dashboardCharts {
		panel, ok := snap.Panel(c.title)
		if !ok {
			return fmt.Errorf("%s has no panel %q", *in, c.title)
		}
		path := filepath.Join(*out, c.file)
		if err := drawDashboardPanel(snap, panel, c.yLabel, path); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Printf("benchreport: wrote %s\n", path)
	}
	return nil
}

// drawDashboardPanel draws one panel as Grafana's time series panel would: one line per series
// (broken where the query had no value, as a quantile between cascades), the time since the
// run started on the x axis, and a dashed mark where the scenario deleted owners.
func drawDashboardPanel(snap monitoring.Snapshot, panel monitoring.SnapshotPanel, yLabel, path string) error {
	p := plot.New()
	p.Title.Text = panel.Title
	p.Title.TextStyle.Font.Size = font.Length(13)
	p.X.Label.Text = fmt.Sprintf("seconds since the run started (Prometheus %s, scraping every %s; rate() over %s; dashed: owners deleted)",
		snap.Prometheus, snap.ScrapeInterval, snap.RateInterval)
	p.X.Label.TextStyle.Font.Size = font.Length(9)
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.X.Min = 0
	p.X.Max = snap.End.Sub(snap.Start).Seconds()
	// The legend goes beside the chart, where no line can hide it.
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = font.Length(9)
	grid := plotter.NewGrid()
	p.Add(grid)

	var top float64
	for i, s := range panel.Series {
		style := draw.LineStyle{Color: seriesColors[i%len(seriesColors)], Width: vg.Points(1.6)}
		if strings.HasPrefix(s.Legend, "p99") {
			style.Dashes = []vg.Length{vg.Points(5), vg.Points(2)}
		}
		var legendThing plot.Thumbnailer
		for _, seg := range segments(s, snap) {
			for _, pt := range seg {
				top = max(top, pt.Y)
			}
			if len(seg) == 1 { // one value between two gaps: a dot, as Grafana draws it
				sc, err := plotter.NewScatter(seg)
				if err != nil {
					return err
				}
				sc.GlyphStyle = draw.GlyphStyle{Color: style.Color, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
				p.Add(sc)
				continue
			}
			l, err := plotter.NewLine(seg)
			if err != nil {
				return err
			}
			l.LineStyle = style
			p.Add(l)
			legendThing = l
		}
		if legendThing == nil {
			l := &plotter.Line{LineStyle: style}
			legendThing = l
		}
		legend.Add(s.Legend, legendThing)
	}
	p.Y.Max = niceCeil(max(top, 1e-9) * 1.1)
	p.Y.Tick.Marker = plainTicks{}
	var marks eventMarks
	for _, e := range snap.Events {
		if strings.Contains(e.Text, "deleted") {
			name, _, _ := strings.Cut(e.Text, ":")
			marks = append(marks, eventMark{x: e.Time.Sub(snap.Start).Seconds(), label: name})
		}
	}
	p.Add(marks)

	const width, legendWidth = 10 * vg.Inch, 2 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, 3.6*vg.Inch), vgimg.UseDPI(100))
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
	legend.Draw(draw.Crop(dc, width-legendWidth+vg.Points(8), 0, 0, -vg.Points(24)))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// segments splits a series into runs of consecutive values that are numbers, with x the
// seconds since the run started.
func segments(s monitoring.SnapshotSeries, snap monitoring.Snapshot) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, v := range s.Values {
		y := float64(v.Value)
		if math.IsNaN(y) || math.IsInf(y, 0) {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: v.Timestamp.Time().Sub(snap.Start).Seconds(), Y: y})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// eventMark is a vertical dashed line at x, labelled at its top.
type eventMark struct {
	x     float64
	label string
}

type eventMarks []eventMark

func (m eventMarks) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	style := draw.LineStyle{Color: color.Gray{Y: 0x70}, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(3), vg.Points(3)}}
	text := draw.TextStyle{Color: color.Gray{Y: 0x50}, Font: font.From(plot.DefaultFont, 8), XAlign: draw.XLeft, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	for _, e := range m {
		x := trX(e.x)
		c.StrokeLine2(style, x, c.Min.Y, x, c.Max.Y)
		c.FillText(text, vg.Point{X: x + vg.Points(2), Y: c.Max.Y - vg.Points(2)}, e.label)
	}
}
