package policy

import (
	"strings"
	"testing"
)

// TestCompanionUnenforced: every collect rule, and only those, is named as unenforced in
// companion mode, by its path; defaultPropagation rules and ignored resources are enforced.
func TestCompanionUnenforced(t *testing.T) {
	doc := `apiVersion: cascade.dev/v1alpha1
kind: Policy
ignoredResources: [podtemplates]
rules:
- resource: configmaps
  collect: Never
- resource: replicasets.apps
  defaultPropagation: Orphan
- resource: widgets.example.com
  defaultPropagation: Foreground
  collect: After 10m
`
	_, p, errs := Parse([]byte(doc))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := CompanionUnenforced(p)
	want := []string{"rules[0].collect", "rules[2].collect"}
	if len(got) != len(want) {
		t.Fatalf("unenforced = %v, want %v", got, want)
	}
	for i, e := range got {
		if e.Field != want[i] || !strings.Contains(e.Error(), "companion mode") {
			t.Errorf("unenforced[%d] = %q, want %s, saying companion mode", i, e.Error(), want[i])
		}
	}
	if got := CompanionUnenforced(nil); got != nil {
		t.Errorf("CompanionUnenforced(nil) = %v", got)
	}
}
