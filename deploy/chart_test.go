package deploy

import (
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cascade-gc/cascade/deploy/chartdoc"
)

// schemaNode is one node of values.schema.json.
type schemaNode map[string]any

// resolve follows a node's local $ref ("#/$defs/NAME").
func (n schemaNode) resolve(t *testing.T, root schemaNode) schemaNode {
	t.Helper()
	ref, ok := n["$ref"].(string)
	if !ok {
		return n
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	defs, _ := root["$defs"].(map[string]any)
	def, found := defs[name].(map[string]any)
	if !ok || !found {
		t.Fatalf("values.schema.json: $ref %q resolves to nothing", ref)
	}
	return schemaNode(def).resolve(t, root)
}

// TestChartValuesInSchema: every value of the chart's values.yaml (each with its comment:
// chartdoc.Parse refuses one without) is checked by values.schema.json, every mapping of the
// chart's own values refuses unknown keys (additionalProperties: false), and the schema names no
// value that values.yaml does not have (but Helm's global).
func TestChartValuesInSchema(t *testing.T) {
	src, err := os.ReadFile("chart/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, values, err := chartdoc.Parse(src)
	if err != nil {
		t.Fatalf("chart/values.yaml: %v", err)
	}
	b, err := os.ReadFile("chart/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var root schemaNode
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}

	// Every mapping of values.yaml that holds keys, by path ("" is the top), with its keys.
	keysOf := map[string][]string{"": nil}
	for _, v := range values {
		parts := strings.Split(v.Key, ".")
		for i := range parts {
			parent := strings.Join(parts[:i], ".")
			if k := parts[i]; !slices.Contains(keysOf[parent], k) {
				keysOf[parent] = append(keysOf[parent], k)
			}
		}
	}
	node := func(path string) schemaNode {
		n := root
		if path == "" {
			return n
		}
		for _, p := range strings.Split(path, ".") {
			props, _ := n.resolve(t, root)["properties"].(map[string]any)
			child, ok := props[p].(map[string]any)
			if !ok {
				return nil
			}
			n = schemaNode(child)
		}
		return n.resolve(t, root)
	}
	for _, v := range values {
		if node(v.Key) == nil {
			t.Errorf("values.yaml's %s is not in values.schema.json", v.Key)
		}
	}
	paths := make([]string, 0, len(keysOf))
	for p := range keysOf {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		n := node(path)
		if n == nil {
			continue // reported above
		}
		name := path
		if name == "" {
			name = "the top"
		}
		if n["additionalProperties"] != false {
			t.Errorf("values.schema.json: %s does not refuse unknown keys (additionalProperties: false)", name)
		}
		props, _ := n["properties"].(map[string]any)
		for k := range props {
			if !slices.Contains(keysOf[path], k) && !(path == "" && k == "global") {
				t.Errorf("values.schema.json: %s has %s, which values.yaml does not", name, k)
			}
		}
	}
}
