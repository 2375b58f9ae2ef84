// Command cpubreakdown says where a CPU profile of cascade went, by part of the work (issue 41):
// it reads `go tool pprof -traces` output on standard input and charges each sample to the
// part named by the frame nearest its leaf that one of the parts' patterns matches (so a
// memmove inside a protobuf decode is decoding); samples no part claims are the Go runtime's
// (scheduler, syscalls, allocation) when a runtime frame is in them, else "other".
//
//	go tool pprof -traces bin/cascade dir/*.pprof | go run ./e2e/cmd/cpubreakdown
//
// make bench-cpu prints it for its profiles when BENCH_PROFILE is set.
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// part is one part of the work and the frames that belong to it.
type part struct {
	name     string
	patterns []*regexp.Regexp
}

func parts(specs ...[]string) []part {
	out := make([]part, len(specs))
	for i, s := range specs {
		out[i].name = s[0]
		for _, p := range s[1:] {
			out[i].patterns = append(out[i].patterns, regexp.MustCompile(p))
		}
	}
	return out
}

// The parts, in the order of the table; the first that matches a frame wins that frame.
var table = parts(
	[]string{"Go garbage collector", `runtime\.gcBgMarkWorker`, `runtime\.gcAssist`, `runtime\.(markroot|scanobject|scanObject|gcDrain|bgsweep|sweepone)`},
	[]string{"logging", `k8s\.io/klog`, `go-logr/logr\.`},
	[]string{"metrics", `prometheus/client_golang`, `client-go/tools/metrics`, `cascade/internal/client\.(latencyHook|resultHook)`, `cascade/gc\.\(\*latencyTracker\)`},
	[]string{"watch: decoding events", `cascade/gc\.decodeEvent`, `cascade/gc\.read[A-Z]`, `cascade/gc\.unwrapEnvelope`, `Unmarshal`, `rest/watch\.\(\*Decoder\)\.Decode`, `serializer/streaming\.`, `serializer/protobuf\.`},
	[]string{"watch: graph updates", `cascade/gc\.\(\*graphStore\)`, `cascade/graph\.`, `cascade/gc\.\(\*Controller\)\.apply`},
	[]string{"DELETE: building and sending (client side)", `cascade/internal/client\.`, `net/http\.`, `http2\.\(\*ClientConn\)\.RoundTrip`, `client-go/rest\.`, `client-go/metadata`, `encoding/json`, `client-go/transport`},
	[]string{"HTTP/2 and TLS: writing", `http2\.\(\*clientStream\)\.(writeRequest|encodeAndWriteHeaders|writeRequestBody)`, `http2\.\(\*ClientConn\)\.write`, `http2/hpack\.\(\*Encoder\)`},
	[]string{"HTTP/2 and TLS: reading (answers, watch frames)", `http2\.\(\*clientConnReadLoop\)`, `http2\.\(\*ClientConn\)\.readLoop`, `crypto/tls\.\(\*Conn\)\.Read`, `cascade/gc\.\(\*frameStream\)\.readFrame`, `cascade/gc\.\(\*bodyStream\)`},
	[]string{"decisions (view, policy, REST mapping)", `cascade/gc\.\(\*Controller\)\.(decide|decidable|view|decisionInput|ownerKind|restMapping)`, `cascade/policy\.`, `restmapper`},
	[]string{"work queues", `cascade/internal/work\.`, `util/workqueue`},
)

var runtimeFrame = regexp.MustCompile(`^(runtime|internal/runtime|syscall|internal/poll)[./]`)

func main() {
	totals := map[string]float64{}
	var all float64
	var value float64
	var frames []string
	flush := func() {
		if len(frames) == 0 {
			return
		}
		all += value
		totals[charge(frames)] += value
		frames = nil
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inSample := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			inSample = true
			continue
		}
		if !inSample || strings.TrimSpace(line) == "" {
			continue
		}
		// A sample's first line is "<value> <leaf frame>"; the lines after it are its frames.
		if isValueLine(line) {
			flush()
			f := strings.Fields(line)
			value, _ = duration(f[0])
			frames = append(frames, strings.Join(f[1:], " "))
			continue
		}
		frames = append(frames, strings.TrimSpace(line))
	}
	flush()
	if all == 0 {
		fmt.Fprintln(os.Stderr, "cpubreakdown: no samples on standard input (pipe `go tool pprof -traces BINARY PROFILES` in)")
		os.Exit(1)
	}
	fmt.Printf("| part of the work | share | CPU in the profiles |\n|---|--:|--:|\n")
	for _, p := range table {
		if t, ok := totals[p.name]; ok {
			fmt.Printf("| %s | %.1f%% | %.2f s |\n", p.name, 100*t/all, t/1000)
		}
	}
	for _, name := range []string{"Go runtime: scheduler, syscalls, allocation", "other"} {
		if t, ok := totals[name]; ok {
			fmt.Printf("| %s | %.1f%% | %.2f s |\n", name, 100*t/all, t/1000)
		}
	}
	fmt.Printf("| all | 100%% | %.2f s |\n", all/1000)
}

// isValueLine tells a sample's first line ("      30ms   frame") from a frame line, which
// has no value.
func isValueLine(line string) bool {
	f := strings.Fields(line)
	if len(f) < 2 {
		return false
	}
	_, ok := duration(f[0])
	return ok
}

// duration reads pprof's "30ms", "1.20s", "500us" in milliseconds.
func duration(s string) (float64, bool) {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"ms", 1}, {"us", 0.001}, {"ns", 1e-6}, {"s", 1000}} {
		if strings.HasSuffix(s, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(s, u.suffix), 64)
			return v * u.ms, err == nil
		}
	}
	return 0, false
}

// charge is the part a sample's frames (leaf first) belong to.
func charge(frames []string) string {
	for _, f := range frames {
		for _, p := range table {
			for _, re := range p.patterns {
				if re.MatchString(f) {
					return p.name
				}
			}
		}
	}
	for _, f := range frames {
		if runtimeFrame.MatchString(f) {
			return "Go runtime: scheduler, syscalls, allocation"
		}
	}
	return "other"
}
