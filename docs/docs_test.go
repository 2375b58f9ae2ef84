// Package docs holds no code: its test keeps the commands of the operator docs in the scripts of
// docs/examples, which e2e TestDocsExamples runs against a real control plane.
//
// A fenced block that follows a marker line
//
//	<!-- example: docs/examples/NAME.sh -->
//
// is that file, verbatim: `make generate` (-update) copies the file into the block, and `make
// verify` fails when they differ. Every ```sh, ```bash, ```shell and ```console block of the
// operator docs must be such a block, so that no command in them escapes the test, and every
// file of docs/examples must be included somewhere.
package docs

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "copy docs/examples into the blocks that include them")

// operatorDocs are the pages whose commands must all come from docs/examples (paths from the
// repository's root).
var operatorDocs = []string{
	"README.md",
	"docs/install.md",
	"docs/operations.md",
	"docs/troubleshooting.md",
	"docs/faq.md",
	"docs/migration.md",
	"docs/runbooks.md",
	"docs/cli.md",
	"docs/security.md",
	"docs/uninstall.md",
	"docs/modes.md",
	"docs/fleet.md",
}

// commandFences are the fence languages that hold commands.
var commandFences = []string{"sh", "bash", "shell", "console"}

var markerRE = regexp.MustCompile(`^<!-- example: (docs/examples/[A-Za-z0-9._-]+) -->$`)

// fenceOf is the fence language of an example file.
func fenceOf(path string) string {
	switch filepath.Ext(path) {
	case ".sh":
		return "sh"
	case ".yaml":
		return "yaml"
	}
	return ""
}

// include rewrites doc (named name, for errors) with every marked block replaced by its file's
// text, read by read. It returns the new text, the files it included, and the problems found:
// a marker without a block, a file that cannot be read, a command block without a marker.
func include(name, doc string, read func(string) (string, error)) (string, []string, []string) {
	lines := strings.SplitAfter(doc, "\n")
	var out strings.Builder
	var included, problems []string
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\n")
		if m := markerRE.FindStringSubmatch(line); m != nil {
			out.WriteString(lines[i])
			file := m[1]
			fence := fenceOf(file)
			if i+1 >= len(lines) || strings.TrimRight(lines[i+1], "\n") != "```"+fence {
				problems = append(problems, fmt.Sprintf("%s:%d: the marker of %s must be followed by a ```%s line", name, i+1, file, fence))
				continue
			}
			end := i + 2
			for end < len(lines) && strings.TrimRight(lines[end], "\n") != "```" {
				end++
			}
			if end >= len(lines) {
				problems = append(problems, fmt.Sprintf("%s:%d: the block of %s is not closed", name, i+2, file))
				out.WriteString(strings.Join(lines[i+1:], ""))
				break
			}
			text, err := read(file)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: %v", name, i+1, err))
				text = strings.Join(lines[i+2:end], "")
			}
			if text != "" && !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			out.WriteString(lines[i+1])
			out.WriteString(text)
			out.WriteString(lines[end])
			included = append(included, file)
			i = end
			continue
		}
		if lang, ok := strings.CutPrefix(line, "```"); ok && slices.Contains(commandFences, strings.TrimSpace(lang)) {
			problems = append(problems, fmt.Sprintf("%s:%d: a ```%s block that no <!-- example: docs/examples/... --> marker includes: put its commands in a script of docs/examples, which e2e TestDocsExamples runs", name, i+1, lang))
		}
		out.WriteString(lines[i])
	}
	return out.String(), included, problems
}

// TestDocsExamples: every marked block of the operator docs is its file of docs/examples
// (-update writes them), no command block is outside one, and every example is included.
func TestDocsExamples(t *testing.T) {
	root := ".."
	read := func(file string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, file))
		return string(b), err
	}
	used := map[string]bool{}
	for _, name := range operatorDocs {
		path := filepath.Join(root, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, included, problems := include(name, string(b), read)
		for _, p := range problems {
			t.Error(p)
		}
		for _, f := range included {
			used[f] = true
		}
		if got == string(b) {
			continue
		}
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: a block differs from the docs/examples file its marker names: run make generate", name)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "examples", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rel := filepath.ToSlash(strings.TrimPrefix(f, root+string(filepath.Separator)))
		if !used[rel] {
			t.Errorf("%s is included by none of %v", rel, operatorDocs)
		}
	}
}

// TestIncludeFindsStrayBlocks: the checker itself, on small documents.
func TestIncludeFindsStrayBlocks(t *testing.T) {
	files := map[string]string{"docs/examples/a.sh": "echo a\n", "docs/examples/p.yaml": "kind: Policy\n"}
	read := func(f string) (string, error) {
		if s, ok := files[f]; ok {
			return s, nil
		}
		return "", fmt.Errorf("no file %s", f)
	}
	for _, tc := range []struct {
		name, doc, want string
		included        []string
		problems        int
	}{
		{"stale block rewritten", "x\n<!-- example: docs/examples/a.sh -->\n```sh\necho old\n```\ny\n", "x\n<!-- example: docs/examples/a.sh -->\n```sh\necho a\n```\ny\n", []string{"docs/examples/a.sh"}, 0},
		{"yaml example", "<!-- example: docs/examples/p.yaml -->\n```yaml\n```\n", "<!-- example: docs/examples/p.yaml -->\n```yaml\nkind: Policy\n```\n", []string{"docs/examples/p.yaml"}, 0},
		{"stray sh block", "```sh\nrm -rf /\n```\n", "```sh\nrm -rf /\n```\n", nil, 1},
		{"stray console block", "```console\n$ kubectl get pods\n```\n", "```console\n$ kubectl get pods\n```\n", nil, 1},
		{"yaml without marker is fine", "```yaml\nkind: X\n```\n", "```yaml\nkind: X\n```\n", nil, 0},
		{"wrong fence after marker", "<!-- example: docs/examples/a.sh -->\n```yaml\n```\n", "", nil, 1},
		{"missing file", "<!-- example: docs/examples/b.sh -->\n```sh\nkept\n```\n", "", []string{"docs/examples/b.sh"}, 1},
		{"unclosed block", "<!-- example: docs/examples/a.sh -->\n```sh\necho a\n", "", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, included, problems := include("doc.md", tc.doc, read)
			if len(problems) != tc.problems {
				t.Errorf("problems %q, want %d", problems, tc.problems)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if !slices.Equal(included, tc.included) {
				t.Errorf("included %v, want %v", included, tc.included)
			}
		})
	}
}
