package framework

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DecodeCheckEnv names the directory where cascade, when it is set, compares every watch event
// its fast protobuf decode reads with apimachinery's full decode, and writes what differs
// (gc/fastdecode.go, issue 41).
const DecodeCheckEnv = "CASCADE_WATCH_DECODE_CHECK"

// WithDecodeCheck runs run with every cascade the tests start checking its fast watch decode
// against the full one (unless benchmarks run: the check doubles the decoding they measure),
// then fails the run if any cascade found a difference, and prints how many compared frames.
func WithDecodeCheck(run func() int) int {
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		return run()
	}
	dir := os.Getenv(DecodeCheckEnv)
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "cascade-decode-check-"); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			return 1
		}
		defer func() { _ = os.RemoveAll(dir) }()
		_ = os.Setenv(DecodeCheckEnv, dir) // the cascade processes inherit it
	}
	code := run()
	entries, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: watch decode check: %v\n", err)
		return 1
	}
	checked, mismatched := 0, 0
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), "checked-"):
			checked++
		case strings.HasPrefix(e.Name(), "mismatch-"):
			mismatched++
			data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			fmt.Fprintf(os.Stderr, "e2e: watch decode check: cascade process %s decoded frames otherwise than the full decode:\n%s\n", strings.TrimPrefix(e.Name(), "mismatch-"), data)
		}
	}
	fmt.Printf("e2e: watch decode check: %d cascade processes compared their fast watch decode with the full decode on every event; %d found a difference\n", checked, mismatched)
	if mismatched > 0 && code == 0 {
		code = 1
	}
	return code
}
