package main

import (
	"strings"
	"testing"
)

// TestLoggingFlags: the logging flags are component-base's, as Kubernetes components have them
// (issue 25.4): a format, -v and --vmodule reach the collector's options; a format that does not
// exist is refused before anything starts, naming the flag; klog's legacy flags are gone.
func TestLoggingFlags(t *testing.T) {
	c := runCLI(t, nil, "run", "--logging-format=text", "-v=3", "--vmodule=gc*=5")
	if c.code != 0 || c.ran == nil {
		t.Fatalf("exit %d, ran %v; stderr: %s", c.code, c.ran != nil, c.stderr)
	}
	if got := c.ran.Logs; got.Format != "text" || got.Verbosity != 3 || len(got.VModule) != 1 || got.VModule[0].FilePattern != "gc*" || got.VModule[0].Verbosity != 5 {
		t.Errorf("logging options %+v; want text, -v=3, --vmodule=gc*=5", got)
	}
	c = runCLI(t, nil, "--logging-format=json", "--v=2")
	if c.code != 0 || c.ran == nil || c.ran.Logs.Format != "json" || c.ran.Logs.Verbosity != 2 {
		t.Fatalf("--logging-format=json --v=2: exit %d, ran %v; stderr: %s", c.code, c.ran != nil, c.stderr)
	}
	// --vmodule is klog's text-format feature: with json it is refused, naming the flag.
	c = runCLI(t, nil, "--logging-format=json", "--vmodule=gc*=5")
	if c.code != exitFailure || c.ran != nil || !strings.Contains(c.lastLine(), "--vmodule") {
		t.Errorf("--logging-format=json --vmodule: exit %d, ran %v, error %q; want exit 1 naming --vmodule", c.code, c.ran != nil, c.lastLine())
	}

	c = runCLI(t, nil, "run", "--logging-format=xml")
	if c.code != exitFailure || c.ran != nil {
		t.Fatalf("--logging-format=xml: exit %d (want %d), collector ran %v", c.code, exitFailure, c.ran != nil)
	}
	if !strings.Contains(c.lastLine(), "invalid --logging-format=xml") {
		t.Errorf("error line %q does not name --logging-format", c.lastLine())
	}

	for _, legacy := range []string{"--logtostderr=false", "--log-dir=/tmp", "--alsologtostderr", "--log_file=/tmp/x", "--stderrthreshold=0"} {
		c := runCLI(t, nil, "run", legacy)
		if c.code != exitUsage || c.ran != nil {
			t.Errorf("%s: exit %d (want %d, an unknown flag), collector ran %v", legacy, c.code, exitUsage, c.ran != nil)
		}
	}
}
