package main

import (
	"encoding/json"
	"io"

	"sigs.k8s.io/yaml"
)

// outputFormats are what -o takes on the commands that print a result (policy validate,
// status, uninstall, version): text, the default, for people; json and yaml, the same document
// for scripts, its shape documented in docs/cli.md.
var outputFormats = []string{"text", "json", "yaml"}

// printResult prints v in format: text() for text, else v as indented JSON or as YAML.
func printResult(out io.Writer, format string, v any, text func() string) error {
	var (
		b   []byte
		err error
	)
	switch format {
	case "json":
		if b, err = json.MarshalIndent(v, "", "  "); err != nil {
			return err
		}
		b = append(b, '\n')
	case "yaml":
		if b, err = yaml.Marshal(v); err != nil {
			return err
		}
	default:
		b = []byte(text())
	}
	_, err = out.Write(b)
	return err
}
