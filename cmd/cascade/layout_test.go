package main

import (
	"os/exec"
	"strings"
	"testing"
)

// mayImport is the layout table of docs/development.md, as rules: for each folder of cascade, the folders of
// cascade its non-test code may import. A folder not listed here fails the test: a new package
// takes its place in the table (and in docs/development.md) first.
var mayImport = map[string][]string{
	"cmd/cascade":                {"*"},
	"graph":                      {},
	"policy":                     {},
	"policy/watch":               {"policy"},
	"gc":                         {"graph", "policy", "internal/client", "internal/work", "internal/leader", "internal/features"},
	"gc/gctest":                  {"graph", "internal/client/clienttest", "internal/work", "internal/work/worktest"},
	"finalizers":                 {"gc", "graph", "finalizers/orphanrecord", "internal/client", "internal/work"},
	"finalizers/orphanrecord":    {"graph", "internal/client"},
	"finalizers/stamp":           {"gc", "graph", "policy", "internal/client", "internal/features", "internal/work"},
	"internal/client":            {"policy", "internal/leader"},
	"internal/client/clienttest": {},
	"internal/work":              {},
	"internal/work/worktest":     {"internal/work"},
	"internal/leader":            {},
	"internal/shard":             {"internal/leader"},
	"internal/fleet":             {"gc", "internal/client", "internal/leader", "internal/shard", "internal/work"},
	"internal/features":          {},
	"deploy":                     {"deploy/monitoring", "policy"},
	"deploy/monitoring":          {},
	"deploy/chartdoc":            {},
	"docs":                       {},
}

// pure packages decide without an API server: no client-go, no goroutines of their own.
var pure = []string{"graph", "policy"}

// TestLayout: every package of cascade (e2e aside) imports only what the layout allows, and
// the pure ones import no client-go at all.
func TestLayout(t *testing.T) {
	const module = "github.com/cascade-gc/cascade/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for line := range strings.Lines(string(out)) {
		path, imports, _ := strings.Cut(strings.TrimSpace(line), ":")
		pkg := strings.TrimPrefix(path, module)
		if strings.HasPrefix(pkg, "e2e") || strings.HasPrefix(pkg, "tools") {
			continue
		}
		seen++
		allowed, ok := mayImport[pkg]
		if !ok {
			t.Errorf("package %s is not in the layout: give it a room in mayImport and the layout table of docs/development.md", pkg)
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			if len(allowed) == 1 && allowed[0] == "*" {
				continue
			}
			okDep := false
			for _, a := range allowed {
				okDep = okDep || a == dep
			}
			if !okDep {
				t.Errorf("%s imports %s, which the layout does not allow (allowed: %v)", pkg, dep, allowed)
			}
		}
	}
	if seen < len(mayImport) {
		t.Errorf("go list named %d packages, the layout %d: a package was removed or moved; update the table", seen, len(mayImport))
	}
	for _, p := range pure {
		deps, err := exec.Command("go", "list", "-deps", module+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, deps)
		}
		for dep := range strings.Lines(string(deps)) {
			if strings.HasPrefix(dep, "k8s.io/client-go") {
				t.Errorf("%s is pure but depends on %s", p, strings.TrimSpace(dep))
			}
		}
	}
}
