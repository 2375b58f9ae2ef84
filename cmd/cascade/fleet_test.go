package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/cascade-gc/cascade/internal/fleet"
)

// TestFleetFlags: one provider at most, collector mode only, bounded member budgets.
func TestFleetFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		bad  string // the flag named in the error, "" for none
	}{
		{[]string{"--fleet-secrets-namespace=fleet"}, ""},
		{[]string{"--fleet-kubeconfig-dir=" + dir}, ""},
		{[]string{"--fleet-secrets-namespace=fleet", "--fleet-kubeconfig-dir=" + dir}, "--fleet-secrets-namespace"},
		{[]string{"--fleet-kubeconfig-dir=" + filepath.Join(dir, "missing")}, "--fleet-kubeconfig-dir"},
		{[]string{"--fleet-secrets-namespace=fleet", "--fleet-secrets-selector=a=(b"}, "--fleet-secrets-selector"},
		{[]string{"--fleet-secrets-namespace=fleet", "--mode=companion"}, "--mode"},
		{[]string{"--fleet-cluster-api-namespace=capi", "--fleet-member-workers=0"}, "--fleet-member-workers"},
		{[]string{"--fleet-secrets-namespace=fleet", "--fleet-member-qps=0"}, "--fleet-member-qps"},
		{[]string{"--fleet-secrets-namespace=fleet", "--fleet-insecure-kubeconfig-exec=aws", "--fleet-insecure-kubeconfig-tls"}, ""},
		{[]string{"--fleet-secrets-namespace=fleet", "--fleet-insecure-kubeconfig-exec=aws,"}, "--fleet-insecure-kubeconfig-exec"},
		{[]string{"--fleet-insecure-kubeconfig-tls"}, "--fleet-insecure-kubeconfig-exec"},
		{[]string{"--fleet-secrets-namespace=fleet", "--fleet-member-request-timeout=10ms"}, "--fleet-member-request-timeout"},
	} {
		o := NewOptions()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		errs := o.Validate()
		got := ""
		for _, e := range errs {
			if strings.HasPrefix(e.Field, "--fleet") || e.Field == "--mode" {
				got = e.Field
			}
		}
		if got != tt.bad {
			t.Errorf("%v: error on %q (%v), want on %q", tt.args, got, errs, tt.bad)
		}
	}
}

// fleetCollectors is a fleet's metric collectors, for the metrics' docs.
func fleetCollectors(t *testing.T) []prometheus.Collector {
	t.Helper()
	f, err := fleet.New(fleet.Options{
		Provider: &fleet.DirProvider{Dir: t.TempDir()},
		Build:    func(context.Context, fleet.Member) (fleet.Unit, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return f.Collectors()
}
