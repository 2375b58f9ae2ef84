package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestDefaultsAreValid(t *testing.T) {
	if errs := NewOptions().Validate(); len(errs) > 0 {
		t.Fatalf("defaults invalid: %s", oneLine(errs))
	}
}

// TestValidateNamesEveryBadFlag: every problem is reported at once, each naming its flag and
// value, so one run tells the user everything to fix.
func TestValidateNamesEveryBadFlag(t *testing.T) {
	o := NewOptions()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(fs)
	err := fs.Parse([]string{
		"--kubeconfig=/does/not/exist", "--kube-api-qps=-1", "--workers=0",
		"--discovery-period=10ms", "--absent-owner-cache-size=0", "--startup-timeout=0s",
		"--ignored-resources=a/b", "--metrics-bind-address=nope", "--health-probe-bind-address=:99999",
		"--sync-timeout=0s", "--owner-reverify-period=10ms", "--dry-run", "--leader-elect",
		"--default-propagation-period=500ms",
	})
	if err != nil {
		t.Fatal(err)
	}
	line := oneLine(o.Validate())
	for _, want := range []string{
		"invalid --kubeconfig=/does/not/exist: cannot read the file",
		"invalid --kube-api-qps=-1",
		"invalid --workers=0",
		"invalid --discovery-period=10ms",
		"invalid --absent-owner-cache-size=0",
		"invalid --startup-timeout=0s",
		"invalid --ignored-resources=a/b",
		"invalid --metrics-bind-address=nope",
		"invalid --health-probe-bind-address=:99999",
		"invalid --sync-timeout=0s",
		"invalid --owner-reverify-period=10ms",
		"invalid --default-propagation-period=500ms",
		"invalid --dry-run=true: writes nothing, not even a Lease",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("error line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "\n") {
		t.Errorf("error is not one line: %q", line)
	}
}

func TestValidateAddresses(t *testing.T) {
	for addr, ok := range map[string]bool{
		":8080": true, "127.0.0.1:0": true, "[::1]:9000": true, "localhost:1": true, "0": true,
		"8080": false, "host:80": false, ":http": false, "": false,
	} {
		if err := validateBindAddress(addr); (err == nil) != ok {
			t.Errorf("validateBindAddress(%q) = %v, want ok=%t", addr, err, ok)
		}
	}
	o := NewOptions()
	o.MetricsBindAddress, o.HealthProbeBindAddress = ":9000", ":9000"
	if errs := o.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Field, "--health-probe-bind-address") {
		t.Errorf("same address for metrics and health: %v", errs)
	}
}

func TestIgnoredGroupResources(t *testing.T) {
	o := NewOptions()
	o.IgnoredResources = []string{"events", "events.events.k8s.io", "leases.coordination.k8s.io"}
	got := o.IgnoredGroupResources()
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	for gr := range got {
		if gr.Resource == "" {
			t.Errorf("empty resource in %v", got)
		}
	}
}

// TestValidateMode: --mode is collector (the default) or companion; companion refuses --dry-run
// (the collector's shadow, which would suppress the companion's writes too), and says which
// combination to run instead.
func TestValidateMode(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" valid
	}{
		{args: nil},
		{args: []string{"--mode=collector"}},
		{args: []string{"--mode=companion"}},
		{args: []string{"--mode=companion", "--leader-elect"}},
		{args: []string{"--mode=collector", "--dry-run"}},
		{args: []string{"--mode=companion", "--dry-run"}, want: "invalid --mode=companion: --dry-run is the collector's shadow"},
		{args: []string{"--mode=shadow"}, want: `--mode: Unsupported value: "shadow": supported values: "collector", "companion"`},
	} {
		o := NewOptions()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		errs := o.Validate()
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%v: %s", tc.args, oneLine(errs))
		case tc.want != "" && (len(errs) != 1 || !strings.Contains(oneLine(errs)+errs[0].Error(), tc.want)):
			t.Errorf("%v: %q, want one error with %q", tc.args, oneLine(errs), tc.want)
		}
	}
}
