//go:build e2e

package chaos

import (
	"flag"
	"os"
	"testing"

	"github.com/cascade-gc/cascade/e2e/framework"
)

// TestMain runs the suite with every cascade checking its fast watch decode against the full
// one (framework.WithDecodeCheck): the chaos suite's objects, faults and relists included.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(framework.WithDecodeCheck(m.Run))
}
