// Package chartdoc documents a Helm chart's values from its values.yaml: every value with its
// default and the comment above its key. deploy's TestChartReadme writes deploy/chart/README.md
// with it (make generate) and fails when the file is stale or a value has no comment (make
// verify).
//
// The comments follow one convention. A comment above a key documents that key. A mapping whose
// keys carry comments is documented key by key (its own comment, if any, documents the group); a
// mapping whose keys carry none (a Kubernetes object such as resources or a securityContext) is
// one value, as is an empty mapping or a list. In a comment, a line that starts with "- " starts
// an item of a list (indented lines continue it), and lines indented by two spaces or more after
// a line that ends with ":" are an example, kept as they are.
package chartdoc

import (
	"encoding/json"
	"fmt"
	"html"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Value is one documented value of values.yaml.
type Value struct {
	// Key is the value's path from the top, as --set names it: monitoring.serviceMonitor.ca.key.
	Key string
	// Default is the value as compact JSON; empty for a group (a mapping documented key by key).
	Default string
	// Doc is the comment above the key, without its "#" marks, one line per comment line.
	Doc string
	// Group says the value is a mapping documented key by key (the values under it follow).
	Group bool
}

// Parse reads values.yaml: its header (the comment that opens the file, set apart by an empty
// line) and its values in the file's order. The error names every value without a comment.
func Parse(src []byte) (header string, values []Value, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return "", nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", nil, fmt.Errorf("values.yaml is not a mapping")
	}
	var undocumented []string
	var walk func(prefix string, m *yaml.Node) error
	walk = func(prefix string, m *yaml.Node) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			key := prefix + k.Value
			text := comment(k.HeadComment)
			if v.Kind == yaml.MappingNode && documentedByKey(v) {
				if text != "" {
					values = append(values, Value{Key: key, Doc: text, Group: true})
				}
				if err := walk(key+".", v); err != nil {
					return err
				}
				continue
			}
			if text == "" {
				undocumented = append(undocumented, key)
			}
			var def any
			if err := v.Decode(&def); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			b, err := json.Marshal(def)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			values = append(values, Value{Key: key, Default: string(b), Doc: text})
		}
		return nil
	}
	if err := walk("", doc.Content[0]); err != nil {
		return "", nil, err
	}
	if len(undocumented) > 0 {
		return "", nil, fmt.Errorf("values without a comment above their key: %s", strings.Join(undocumented, ", "))
	}
	return comment(doc.HeadComment), values, nil
}

// documentedByKey says whether a mapping is documented key by key: one of its keys carries a
// comment.
func documentedByKey(m *yaml.Node) bool {
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].HeadComment != "" {
			return true
		}
	}
	return false
}

// comment strips the "#" marks (and the one space after them) from a comment's lines.
func comment(c string) string {
	if c == "" {
		return ""
	}
	lines := strings.Split(c, "\n")
	for i, l := range lines {
		l = strings.TrimPrefix(strings.TrimSpace(l), "#")
		lines[i] = strings.TrimPrefix(l, " ")
	}
	return strings.Join(lines, "\n")
}

// block is a run of a comment's lines: prose, an item of a list, or an example.
type block struct {
	kind  blockKind
	lines []string
}

type blockKind int

const (
	prose blockKind = iota
	item
	example
)

// blocks splits a comment into prose, list items and examples (see the package's doc).
func blocks(doc string) []block {
	var bs []block
	afterColon := false
	for _, l := range strings.Split(doc, "\n") {
		indent := len(l) - len(strings.TrimLeft(l, " "))
		var cur *block
		if len(bs) > 0 {
			cur = &bs[len(bs)-1]
		}
		switch {
		case strings.TrimSpace(l) == "":
			bs = append(bs, block{kind: prose})
		case indent >= 2 && cur != nil && cur.kind == example:
			cur.lines = append(cur.lines, l)
		case indent >= 2 && afterColon:
			bs = append(bs, block{kind: example, lines: []string{l}})
		case indent >= 2 && cur != nil && cur.kind == item:
			cur.lines = append(cur.lines, strings.TrimSpace(l))
		case strings.HasPrefix(l, "- "):
			bs = append(bs, block{kind: item, lines: []string{strings.TrimPrefix(l, "- ")}})
		case cur != nil && cur.kind == prose && indent == 0:
			cur.lines = append(cur.lines, l)
		default:
			bs = append(bs, block{kind: prose, lines: []string{strings.TrimSpace(l)}})
		}
		afterColon = indent == 0 && strings.HasSuffix(strings.TrimSpace(l), ":")
	}
	return bs
}

// Cell renders a comment as the text of one Markdown table cell: prose joined into lines, list
// items and example lines each on a line of their own (<br>), examples as code.
func Cell(doc string) string {
	var parts []string
	for _, b := range blocks(doc) {
		if len(b.lines) == 0 {
			continue
		}
		switch b.kind {
		case prose:
			parts = append(parts, inline(strings.Join(b.lines, " ")))
		case item:
			parts = append(parts, "• "+inline(strings.Join(b.lines, " ")))
		case example:
			for _, l := range b.lines {
				trimmed := strings.TrimLeft(l, " ")
				code := strings.Repeat("&nbsp;", len(l)-len(trimmed)) + strings.ReplaceAll(html.EscapeString(trimmed), "|", "&#124;")
				parts = append(parts, "<code>"+code+"</code>")
			}
		}
	}
	return strings.Join(parts, "<br>")
}

// inline escapes what Markdown would read as markup or as the end of a table cell in prose.
var inline = strings.NewReplacer(`\`, `\\`, "|", `\|`, "*", `\*`, "<", "&lt;", ">", "&gt;").Replace

// Table renders the values as a Markdown table of their key, default and comment; a group's row
// has no default.
func Table(values []Value) string {
	var b strings.Builder
	b.WriteString("| value | default | what it does |\n|---|---|---|\n")
	for _, v := range values {
		def := ""
		if !v.Group {
			def = "`" + strings.ReplaceAll(v.Default, "|", `\|`) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Key, def, Cell(v.Doc))
	}
	return b.String()
}

// Paragraphs renders a comment (values.yaml's header) as Markdown paragraphs.
func Paragraphs(doc string) string {
	var parts []string
	for _, b := range blocks(doc) {
		if len(b.lines) == 0 {
			continue
		}
		switch b.kind {
		case example:
			parts = append(parts, "    "+strings.Join(b.lines, "\n    "))
		case item:
			parts = append(parts, "- "+inline(strings.Join(b.lines, " ")))
		default:
			parts = append(parts, inline(strings.Join(b.lines, " ")))
		}
	}
	return strings.Join(parts, "\n\n") + "\n"
}
