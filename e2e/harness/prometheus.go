package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Prometheus is a running Prometheus server (Debian's prometheus package: `make prometheus`)
// scraping processes of the harness, and a client of its HTTP API.
type Prometheus struct {
	*Process
	// URL is http://127.0.0.1:port.
	URL string
	// ScrapeInterval is the configured scrape and rule evaluation interval.
	ScrapeInterval time.Duration
}

// PrometheusOptions configure StartPrometheus.
type PrometheusOptions struct {
	// Bin is the prometheus binary. Default: prometheus on $PATH.
	Bin string
	// ScrapeInterval is how often every target is scraped and rules evaluated. Default 1s.
	ScrapeInterval time.Duration
	// Jobs maps a job name to its targets' metrics URLs (http://host:port/path; one path per
	// job), such as harness.Cascade.MetricsURL.
	Jobs map[string][]string
	// Rules are rule files' contents, loaded as rule_files.
	Rules [][]byte
}

// StartPrometheus runs Prometheus on a free loopback port with its TSDB and configuration in a
// directory of cp's, and waits until it is ready. The process is tracked: cp.Stop ends it. name
// distinguishes several in the log files.
func (cp *ControlPlane) StartPrometheus(ctx context.Context, name string, opts PrometheusOptions) (*Prometheus, error) {
	if opts.Bin == "" {
		opts.Bin = "prometheus"
	}
	if opts.ScrapeInterval == 0 {
		opts.ScrapeInterval = time.Second
	}
	dir := filepath.Join(cp.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	config, err := prometheusConfig(dir, opts)
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := StartProcess(cp.Dir, name, opts.Bin, []string{
		"--config.file=" + configPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=1d",
		"--web.listen-address=" + addr,
		"--log.level=warn",
	}, ProcessOptions{})
	if err != nil {
		return nil, err
	}
	cp.Track(p)
	prom := &Prometheus{Process: p, URL: "http://" + addr, ScrapeInterval: opts.ScrapeInterval}
	if err := prom.waitReady(ctx); err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, err
	}
	return prom, nil
}

// prometheusConfig writes the rule files into dir and returns the configuration (JSON is YAML).
func prometheusConfig(dir string, opts PrometheusOptions) ([]byte, error) {
	type staticConfig struct {
		Targets []string `json:"targets"`
	}
	type scrapeConfig struct {
		JobName       string         `json:"job_name"`
		MetricsPath   string         `json:"metrics_path"`
		StaticConfigs []staticConfig `json:"static_configs"`
	}
	interval := model.Duration(opts.ScrapeInterval).String()
	cfg := struct {
		Global struct {
			ScrapeInterval     string `json:"scrape_interval"`
			ScrapeTimeout      string `json:"scrape_timeout"`
			EvaluationInterval string `json:"evaluation_interval"`
		} `json:"global"`
		RuleFiles     []string       `json:"rule_files,omitempty"`
		ScrapeConfigs []scrapeConfig `json:"scrape_configs"`
	}{}
	cfg.Global.ScrapeInterval, cfg.Global.ScrapeTimeout, cfg.Global.EvaluationInterval = interval, interval, interval
	for i, r := range opts.Rules {
		path := filepath.Join(dir, fmt.Sprintf("rules-%d.yaml", i))
		if err := os.WriteFile(path, r, 0o644); err != nil {
			return nil, err
		}
		cfg.RuleFiles = append(cfg.RuleFiles, path)
	}
	for job, urls := range opts.Jobs {
		sc := scrapeConfig{JobName: job, StaticConfigs: []staticConfig{{}}}
		for _, raw := range urls {
			u, err := url.Parse(raw)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("job %s: target %q is not http://host:port/path", job, raw)
			}
			if sc.MetricsPath != "" && sc.MetricsPath != u.Path {
				return nil, fmt.Errorf("job %s: targets with different paths (%s, %s)", job, sc.MetricsPath, u.Path)
			}
			sc.MetricsPath = u.Path
			sc.StaticConfigs[0].Targets = append(sc.StaticConfigs[0].Targets, u.Host)
		}
		cfg.ScrapeConfigs = append(cfg.ScrapeConfigs, sc)
	}
	return json.MarshalIndent(cfg, "", "  ")
}

func (p *Prometheus) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("prometheus exited before becoming ready: %v\n%s", err, p.Tail(30))
		}
		if resp, err := client.Get(p.URL + "/-/ready"); err == nil { //nolint:noctx
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("prometheus not ready: %w\n%s", ctx.Err(), p.Tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var apiClient = &http.Client{Timeout: 30 * time.Second}

// APIError is an error answer of Prometheus' HTTP API, such as a query that does not parse
// (Type "bad_data").
type APIError struct {
	Type, Message string
}

func (e *APIError) Error() string { return e.Type + ": " + e.Message }

// get calls the API at path with the query parameters and decodes its data into out.
func (p *Prometheus) get(ctx context.Context, path string, params url.Values, out any) (warnings []string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path+"?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Warnings  []string        `json:"warnings"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %s: %w (%.200s)", path, resp.Status, err, body)
	}
	if r.Status != "success" {
		return r.Warnings, &APIError{Type: r.ErrorType, Message: r.Error}
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			return r.Warnings, fmt.Errorf("%s: %w", path, err)
		}
	}
	return r.Warnings, nil
}

// Query evaluates expr at time at (/api/v1/query) and returns its result: a model.Vector,
// model.Matrix, *model.Scalar or *model.String. A warning is returned as an error.
func (p *Prometheus) Query(ctx context.Context, expr string, at time.Time) (model.Value, error) {
	var data struct {
		Type   model.ValueType `json:"resultType"`
		Result json.RawMessage `json:"result"`
	}
	warnings, err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {formatTime(at)}}, &data)
	if err != nil {
		return nil, err
	}
	if len(warnings) > 0 {
		return nil, fmt.Errorf("warnings: %s", strings.Join(warnings, "; "))
	}
	var v model.Value
	switch data.Type {
	case model.ValVector:
		v = &model.Vector{}
	case model.ValMatrix:
		v = &model.Matrix{}
	case model.ValScalar:
		v = &model.Scalar{}
	case model.ValString:
		v = &model.String{}
	default:
		return nil, fmt.Errorf("query %q: unknown result type %q", expr, data.Type)
	}
	if err := json.Unmarshal(data.Result, v); err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	switch r := v.(type) {
	case *model.Vector:
		return *r, nil
	case *model.Matrix:
		return *r, nil
	}
	return v, nil
}

// QueryRange evaluates expr from start to end every step (/api/v1/query_range).
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) (model.Matrix, error) {
	var data struct {
		Type   model.ValueType `json:"resultType"`
		Result model.Matrix    `json:"result"`
	}
	params := url.Values{"query": {expr}, "start": {formatTime(start)}, "end": {formatTime(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	warnings, err := p.get(ctx, "/api/v1/query_range", params, &data)
	if err != nil {
		return nil, err
	}
	if len(warnings) > 0 {
		return nil, fmt.Errorf("warnings: %s", strings.Join(warnings, "; "))
	}
	if data.Type != model.ValMatrix {
		return nil, fmt.Errorf("query_range %q: result type %q", expr, data.Type)
	}
	return data.Result, nil
}

// AlertingRule is the state of one alerting rule (/api/v1/rules).
type AlertingRule struct {
	Name           string    `json:"name"`
	Query          string    `json:"query"`
	Health         string    `json:"health"` // ok, err, unknown (not evaluated yet)
	LastError      string    `json:"lastError"`
	State          string    `json:"state"` // inactive, pending, firing
	LastEvaluation time.Time `json:"lastEvaluation"`
}

// AlertingRules returns the state of every loaded alerting rule.
func (p *Prometheus) AlertingRules(ctx context.Context) ([]AlertingRule, error) {
	var data struct {
		Groups []struct {
			Rules []AlertingRule `json:"rules"`
		} `json:"groups"`
	}
	if _, err := p.get(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return nil, err
	}
	var out []AlertingRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// Version is Prometheus' version (/api/v1/status/buildinfo).
func (p *Prometheus) Version(ctx context.Context) (string, error) {
	var data struct {
		Version string `json:"version"`
	}
	if _, err := p.get(ctx, "/api/v1/status/buildinfo", url.Values{}, &data); err != nil {
		return "", err
	}
	if data.Version == "" {
		return "", errors.New("buildinfo has no version")
	}
	return data.Version, nil
}

func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}
