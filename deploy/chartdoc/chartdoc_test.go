package chartdoc

import (
	"reflect"
	"strings"
	"testing"
)

const values = `# The header.
# Second line.

# What it does:
# - a: the first, which
#   goes on
# - b: the second
mode: a

image:
  # Where from. For example:
  #   repository: r.example.com/x
  #     # indented | piped
  repository: ghcr.io/x
  # *Not* bold.
  tag: ""

# Requests and limits.
resources:
  requests:
    cpu: 100m

# The group.
monitoring:
  # On or off.
  enabled: false
  # Who reads.
  readers: []
`

// TestParse: values in the file's order, groups documented key by key, Kubernetes-object
// mappings as one value with their default as JSON, the header apart.
func TestParse(t *testing.T) {
	header, got, err := Parse([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	if header != "The header.\nSecond line." {
		t.Errorf("header %q", header)
	}
	want := []Value{
		{Key: "mode", Default: `"a"`, Doc: "What it does:\n- a: the first, which\n  goes on\n- b: the second"},
		{Key: "image.repository", Default: `"ghcr.io/x"`, Doc: "Where from. For example:\n  repository: r.example.com/x\n    # indented | piped"},
		{Key: "image.tag", Default: `""`, Doc: "*Not* bold."},
		{Key: "resources", Default: `{"requests":{"cpu":"100m"}}`, Doc: "Requests and limits."},
		{Key: "monitoring", Doc: "The group.", Group: true},
		{Key: "monitoring.enabled", Default: "false", Doc: "On or off."},
		{Key: "monitoring.readers", Default: "[]", Doc: "Who reads."},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
}

// TestParseUndocumented: a value without a comment is an error that names it.
func TestParseUndocumented(t *testing.T) {
	_, _, err := Parse([]byte("# Documented.\na: 1\nb:\n  # Documented.\n  c: 2\n  d: 3\ne: {}\n"))
	if err == nil || !strings.Contains(err.Error(), "b.d, e") {
		t.Errorf("err %v, want it to name b.d and e", err)
	}
}

// TestCell: list items and example lines on lines of their own, examples as code with their
// indentation, Markdown's markup and the cell separator escaped.
func TestCell(t *testing.T) {
	_, vs, err := Parse([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{
		"What it does:<br>• a: the first, which goes on<br>• b: the second",
		"Where from. For example:<br><code>&nbsp;&nbsp;repository: r.example.com/x</code><br><code>&nbsp;&nbsp;&nbsp;&nbsp;# indented &#124; piped</code>",
		`\*Not\* bold.`,
	} {
		if got := Cell(vs[i].Doc); got != want {
			t.Errorf("Cell(%s):\n got %s\nwant %s", vs[i].Key, got, want)
		}
	}
	table := Table(vs)
	for _, want := range []string{
		"| value | default | what it does |\n|---|---|---|\n",
		"| `resources` | `{\"requests\":{\"cpu\":\"100m\"}}` | Requests and limits. |\n",
		"| `monitoring` |  | The group. |\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("Table lacks %q:\n%s", want, table)
		}
	}
}
