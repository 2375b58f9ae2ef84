//go:build e2e

package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requestCounts maps "VERB resource" to kube-apiserver's apiserver_request_total summed over
// the other labels (codes, scopes, versions).
type requestCounts map[string]float64

// apiserverRequests scrapes kube-apiserver's /metrics with the admin token.
func apiserverRequests(t testing.TB) requestCounts {
	t.Helper()
	ca, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest(http.MethodGet, cp.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+cp.Token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := requestCounts{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, ok := strings.Cut(line[len("apiserver_request_total{"):], "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		verb, resource := labelValue(labels, "verb"), labelValue(labels, "resource")
		if labelValue(labels, "subresource") != "" {
			resource += "/" + labelValue(labels, "subresource")
		}
		out[verb+" "+resource] += v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func labelValue(labels, name string) string {
	i := strings.Index(labels, name+`="`)
	if i < 0 || (i > 0 && labels[i-1] != ',') {
		return ""
	}
	rest := labels[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// objectRequests returns the requests on resource between two scrapes that act on single
// objects (everything but LIST and WATCH, which informers spend once, not per object).
func objectRequests(before, after requestCounts, resource string) (float64, string) {
	var total float64
	var parts []string
	for key, v := range after {
		verb, res, _ := strings.Cut(key, " ")
		if res != resource || verb == "LIST" || verb == "WATCH" {
			continue
		}
		if d := v - before[key]; d > 0 {
			total += d
			parts = append(parts, fmt.Sprintf("%s=%.0f", verb, d))
		}
	}
	return total, strings.Join(parts, " ")
}
