package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestUninstallOutput: -o json and -o yaml print what uninstall did as one document, at the end
// and alone (no table, what is said before the uninstall proper as its notes), with the same
// counts as the text report.
func TestUninstallOutput(t *testing.T) {
	f := newUninstallFixture(t, true)
	f.u.format = "json"
	var out strings.Builder
	if err := f.u.run(context.Background(), &out); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out.String())
	}
	var got uninstallResult
	dec := json.NewDecoder(strings.NewReader(out.String()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out.String())
	}
	want := []admissionResult{
		{Kind: "MutatingAdmissionPolicyBinding", APIVersion: admissionV1, Name: "cascade-default-propagation", Result: "deleted"},
		{Kind: "MutatingAdmissionPolicy", APIVersion: admissionV1, Name: "cascade-default-propagation", Result: "deleted"},
	}
	if got.DryRun || !got.Complete || len(got.Problems) != 0 || len(got.AdmissionObjects) != 2 || got.AdmissionObjects[0] != want[0] || got.AdmissionObjects[1] != want[1] {
		t.Errorf("-o json: %+v", got)
	}
	wantTotal := resourceResult{Stamped: 5, Unstamped: 4, OrphanRemoved: 2, ForegroundDeletionRemoved: 1, BeingDeleted: 1}
	if got.Total != wantTotal || len(got.Resources) != 2 || got.Resources[1] != (resourceResult{Resource: "widgets.example.com", Stamped: 4, Unstamped: 3, OrphanRemoved: 1, ForegroundDeletionRemoved: 1, BeingDeleted: 1}) {
		t.Errorf("-o json counts: total %+v, resources %+v", got.Total, got.Resources)
	}
	if strings.Contains(out.String(), "Total:") {
		t.Errorf("-o json printed the text report too:\n%s", out.String())
	}

	// A second run, dry: nothing left, every list present and empty.
	f.u.format, f.u.dryRun = "yaml", true
	out.Reset()
	if err := f.u.run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	got = uninstallResult{}
	if err := yaml.UnmarshalStrict([]byte(out.String()), &got); err != nil {
		t.Fatalf("-o yaml: %v\n%s", err, out.String())
	}
	if !got.DryRun || !got.Complete || got.AdmissionObjects[0].Result != "notFound" || got.Total.Unstamped != 0 || got.Problems == nil ||
		len(got.Notes) != 1 || !strings.HasPrefix(got.Notes[0], "Dry run: nothing is changed") {
		t.Errorf("-o yaml: %+v", got)
	}
	if !strings.Contains(out.String(), "problems: []\n") {
		t.Errorf("-o yaml: no problem is not []:\n%s", out.String())
	}
}
