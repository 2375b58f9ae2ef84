package main

// The shape of docs/benchmarks.json, as e2e/compare_report_test.go writes it (keep in step).
// Only what the report shows is decoded.

type report struct {
	Date            string            `json:"date"`
	Command         string            `json:"command"`
	Quick           bool              `json:"quick"`
	DurationSeconds float64           `json:"duration_seconds"`
	Machine         machine           `json:"machine"`
	Versions        map[string]string `json:"versions"`
	Config          config            `json:"config"`
	Rows            []row             `json:"rows"`
	Targets         []target          `json:"targets"`
}

type machine struct {
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	Kernel      string `json:"kernel"`
	CPUModel    string `json:"cpu_model"`
	CPUs        int    `json:"cpus"`
	MemoryBytes int64  `json:"memory_bytes"`
}

type budget struct {
	Name  string  `json:"name"`
	QPS   float64 `json:"qps"`
	Burst int     `json:"burst"`
}

type config struct {
	Quick               bool     `json:"quick"`
	Runs                int      `json:"runs"`
	Workers             int      `json:"workers"`
	Seed                uint64   `json:"seed"`
	Budgets             []budget `json:"budgets"`
	LatencyReps         int      `json:"latency_repetitions"`
	LatencyDeps         int      `json:"latency_dependents"`
	LatencyMinPauseMs   int      `json:"latency_min_pause_ms"`
	WarmupObjects       int      `json:"warmup_objects"`
	WarmupDataBytes     int      `json:"warmup_data_bytes"`
	WarmupOwnedPercent  int      `json:"warmup_owned_percent"`
	MemorySettleSeconds int      `json:"memory_settle_seconds"`
	MemorySamples       int      `json:"memory_samples"`
	Scenarios           []string `json:"scenarios"`
}

type figure struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Runs   int     `json:"runs"`
}

type row struct {
	Scenario        string   `json:"scenario"`
	Title           string   `json:"title"`
	Budget          string   `json:"budget"`
	Metric          string   `json:"metric"`
	Unit            string   `json:"unit"`
	Better          string   `json:"better"`
	InTree          *figure  `json:"in_tree"`
	Cascade         *figure  `json:"cascade"`
	Raw             *figure  `json:"raw"`
	CascadeToInTree *float64 `json:"cascade_to_in_tree"`
	CascadeToRaw    *float64 `json:"cascade_to_raw"`
	Failures        []string `json:"failures"`
}

type target struct {
	Target    string  `json:"target"`
	Where     string  `json:"where"`
	Value     float64 `json:"value"`
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
	Met       bool    `json:"met"`
	Missing   string  `json:"missing"`
}

// subjects are the columns, in order: name shown, and how to read a row's figure.
var subjects = []struct {
	name string
	of   func(row) *figure
}{
	{"in-tree", func(r row) *figure { return r.InTree }},
	{"cascade", func(r row) *figure { return r.Cascade }},
	{"raw", func(r row) *figure { return r.Raw }},
}
