// Package report is the schema of docs/benchmarks.json: what BenchmarkCompareGC (e2e/compare)
// measured and concluded, and what e2e/benchreport (its own module, which imports this package)
// renders as docs/benchmarks.md and the charts. The types, the names of subjects and metrics,
// and Read and Write exist only here, so the writer and the reader cannot drift apart. It
// imports nothing but the standard library.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// The subjects of the comparison, in the order of the results' columns.
const (
	// InTree is kube-controller-manager running only its garbage collector.
	InTree = "in-tree"
	// Cascade is cascade.
	Cascade = "cascade"
	// Raw is the benchmark's own client doing the per-object requests itself: what a perfect
	// collector could reach.
	Raw = "raw"
)

// Subjects are the subjects in column order.
var Subjects = []string{InTree, Cascade, Raw}

// The metrics of Row.Metric.
const (
	MetricThroughput = "throughput"
	MetricRequests   = "API requests per object"
	MetricP50        = "p50 latency"
	MetricP99        = "p99 latency"
	MetricSync       = "sync time"
	MetricRSS        = "RSS"
	MetricHeap       = "Go heap"
)

// Report is the whole file.
type Report struct {
	Date            string            `json:"date"`
	Command         string            `json:"command"`
	Quick           bool              `json:"quick"`
	DurationSeconds float64           `json:"duration_seconds"`
	Machine         Machine           `json:"machine"`
	Versions        map[string]string `json:"versions"`
	Config          Config            `json:"config"`
	Rows            []Row             `json:"rows"`
	Targets         []Target          `json:"targets"`
	Measurements    []Measurement     `json:"measurements"`
}

// Machine is where the run was made.
type Machine struct {
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	Kernel      string `json:"kernel"`
	CPUModel    string `json:"cpu_model"`
	CPUs        int    `json:"cpus"`
	MemoryBytes int64  `json:"memory_bytes"`
}

// Config is the shape of one comparison run.
type Config struct {
	Quick   bool     `json:"quick"`
	Runs    int      `json:"runs"`
	Workers int      `json:"workers"`
	Seed    uint64   `json:"seed"`
	Budgets []Budget `json:"budgets"`
	// Trees: Shape[0] roots; every object of level i owns Shape[i+1] objects of level i+1.
	Background []int `json:"background"`
	Foreground []int `json:"foreground"`
	Orphan     []int `json:"orphan"`
	Levels     []int `json:"levels"`
	// The trees at the unthrottled budget, where they differ from the above (QUICK runs: the
	// full sizes). Unthrottled, a QUICK tree is collected in about a second, and a window that
	// short measures the fixed delays (the first owner's deletion reaching the collector, the
	// last deletion reaching the benchmark) and whatever else the machine ran that second more
	// than throughput. Empty: the same as above.
	UnthrottledBackground []int `json:"unthrottled_background,omitempty"`
	UnthrottledForeground []int `json:"unthrottled_foreground,omitempty"`
	UnthrottledOrphan     []int `json:"unthrottled_orphan,omitempty"`
	UnthrottledLevels     []int `json:"unthrottled_levels,omitempty"`
	// Small-cascade latency: LatencyReps owners with LatencyDeps dependents each, deleted one
	// after the other.
	LatencyReps int `json:"latency_repetitions"`
	LatencyDeps int `json:"latency_dependents"`
	// LatencyMinPauseMs is the least pause between repetitions.
	LatencyMinPauseMs int `json:"latency_min_pause_ms"`
	// Warm-up and memory: WarmupObjects ConfigMaps with WarmupDataBytes of data and 4 labels,
	// WarmupOwnedPercent of them owned by another of them.
	WarmupObjects      int `json:"warmup_objects"`
	WarmupDataBytes    int `json:"warmup_data_bytes"`
	WarmupOwnedPercent int `json:"warmup_owned_percent"`
	// MemorySettle is how long after the graph synced memory is first sampled; MemorySamples
	// samples 1 s apart follow, and their median is the figure.
	MemorySettleSeconds int      `json:"memory_settle_seconds"`
	MemorySamples       int      `json:"memory_samples"`
	Scenarios           []string `json:"scenarios"`
}

// Trees returns the tree shapes of the scenarios background, foreground, orphan and levels at
// budget b.
func (c Config) Trees(b Budget) (background, foreground, orphan, levels []int) {
	background, foreground, orphan, levels = c.Background, c.Foreground, c.Orphan, c.Levels
	if b.QPS == 0 {
		pick := func(dst *[]int, s []int) {
			if len(s) > 0 {
				*dst = s
			}
		}
		pick(&background, c.UnthrottledBackground)
		pick(&foreground, c.UnthrottledForeground)
		pick(&orphan, c.UnthrottledOrphan)
		pick(&levels, c.UnthrottledLevels)
	}
	return background, foreground, orphan, levels
}

// Budget is a client-side request budget given to each GC and to the raw client.
type Budget struct {
	Name  string  `json:"name"`
	QPS   float32 `json:"qps"` // 0: unthrottled
	Burst int     `json:"burst"`
}

// Figure is one metric of one subject summarised over the runs.
type Figure struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Runs   int     `json:"runs"`
}

// Row is one line of the results table: one metric of one scenario at one budget.
type Row struct {
	Scenario string `json:"scenario"`
	Title    string `json:"title"`
	Budget   string `json:"budget"`
	Metric   string `json:"metric"`
	Unit     string `json:"unit"`
	// Better is "higher" or "lower".
	Better  string  `json:"better"`
	InTree  *Figure `json:"in_tree,omitempty"`
	Cascade *Figure `json:"cascade,omitempty"`
	Raw     *Figure `json:"raw,omitempty"`
	// Ratios of the medians.
	CascadeToInTree *float64 `json:"cascade_to_in_tree,omitempty"`
	CascadeToRaw    *float64 `json:"cascade_to_raw,omitempty"`
	// Failures lists the measurements of this scenario that did not finish.
	Failures []string `json:"failures,omitempty"`
}

// Figure is the row's figure of subject (nil if it was not measured).
func (r *Row) Figure(subject string) *Figure {
	switch subject {
	case InTree:
		return r.InTree
	case Cascade:
		return r.Cascade
	case Raw:
		return r.Raw
	}
	return nil
}

// SetFigure sets the row's figure of subject.
func (r *Row) SetFigure(subject string, f *Figure) {
	switch subject {
	case InTree:
		r.InTree = f
	case Cascade:
		r.Cascade = f
	case Raw:
		r.Raw = f
	default:
		panic("report: unknown subject " + strconv.Quote(subject))
	}
}

// Target is one of the targets evaluated on the medians.
type Target struct {
	Target string  `json:"target"`
	Where  string  `json:"where"`
	Value  float64 `json:"value"`
	// Op is ">=" or "<=": met when Value Op Threshold.
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
	Met       bool    `json:"met"`
	// Missing is set when a figure the target needs was not measured (the target is not met).
	Missing string `json:"missing,omitempty"`
}

// Measurement is one figure-producing run of one subject in one scenario at one budget.
type Measurement struct {
	Scenario string `json:"scenario"`
	Budget   string `json:"budget"`
	Subject  string `json:"subject"`
	Run      int    `json:"run"`
	// Objects is how many objects the subject had to process (collect, or orphan).
	Objects           int     `json:"objects,omitempty"`
	Seconds           float64 `json:"seconds,omitempty"`
	ObjectsPerSecond  float64 `json:"objects_per_second,omitempty"`
	Requests          float64 `json:"requests,omitempty"`
	RequestsPerObject float64 `json:"requests_per_object,omitempty"`
	RequestDetail     string  `json:"request_detail,omitempty"`
	P50Ms             float64 `json:"p50_ms,omitempty"`
	P99Ms             float64 `json:"p99_ms,omitempty"`
	SyncSeconds       float64 `json:"sync_seconds,omitempty"`
	RSSBytes          float64 `json:"rss_bytes,omitempty"`
	HeapBytes         float64 `json:"heap_bytes,omitempty"`
	// CPU is what each process spent per object in the measured window (tree scenarios).
	CPU   *CPUPerObject `json:"cpu_ms_per_object,omitempty"`
	Error string        `json:"error,omitempty"`
}

// CPUPerObject is user+system CPU time in milliseconds per processed object, per process,
// over one measured window; MachineBusy is the share of the machine's CPU busy in it (0-1).
type CPUPerObject struct {
	APIServer   float64 `json:"apiserver"`
	Etcd        float64 `json:"etcd"`
	GC          float64 `json:"gc"`
	Bench       float64 `json:"bench"`
	MachineBusy float64 `json:"machine_busy"`
}

// ControlPlane is what kube-apiserver, etcd and the collector spent together per object.
func (c CPUPerObject) ControlPlane() float64 { return c.APIServer + c.Etcd + c.GC }

// Write writes rep to path as indented JSON, creating the directory.
func Write(path string, rep Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// Read reads a report written by Write.
func Read(path string) (Report, error) {
	var rep Report
	data, err := os.ReadFile(path)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return rep, fmt.Errorf("%s: %w", path, err)
	}
	return rep, nil
}

// Thousands writes n with thousands separators, as titles and the rendered report do:
// 100000 is "100,000".
func Thousands(n int) string {
	s := strconv.Itoa(n)
	start := 0
	if n < 0 {
		start = 1
	}
	for i := len(s) - 3; i > start; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
