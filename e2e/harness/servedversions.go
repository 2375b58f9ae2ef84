package harness

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/discovery"
)

// Versions is what a control plane runs, as the servers report it and as their binaries were
// built: the version matrix (make test-versions) checks it, so that a wrong binary in a
// version's directory cannot pass for that version.
type Versions struct {
	// APIServer is kube-apiserver's /version gitVersion (stamped at build time from the
	// Makefile's ldflags) and APIServerModule the k8s.io/kubernetes module version its binary
	// was built from (its Go build information).
	APIServer, APIServerModule string
	// Etcd is etcd's /version etcdserver and EtcdModule the go.etcd.io/etcd/server/v3 module
	// version its binary was built from, without the leading "v".
	Etcd, EtcdModule string
}

// Versions asks the running kube-apiserver and etcd for their versions and reads the module
// versions from the binaries they were started from.
func (cp *ControlPlane) Versions(ctx context.Context) (Versions, error) {
	var v Versions
	dc, err := discovery.NewDiscoveryClientForConfig(cp.RestConfig())
	if err != nil {
		return v, err
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return v, fmt.Errorf("kube-apiserver /version: %w", err)
	}
	v.APIServer = info.GitVersion
	if v.APIServerModule, err = moduleVersion(filepath.Join(cp.BinDir, "kube-apiserver"), "k8s.io/kubernetes"); err != nil {
		return v, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.EtcdURL+"/version", nil)
	if err != nil {
		return v, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, fmt.Errorf("etcd /version: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var ev struct {
		Server string `json:"etcdserver"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		return v, fmt.Errorf("etcd /version: %w", err)
	}
	v.Etcd = ev.Server
	mod, err := moduleVersion(filepath.Join(cp.BinDir, "etcd"), "go.etcd.io/etcd/server/v3")
	if err != nil {
		return v, err
	}
	v.EtcdModule = strings.TrimPrefix(mod, "v")
	return v, nil
}

// moduleVersion is the version of module path the binary at bin was built with (a dependency
// in its Go build information, or its main module).
func moduleVersion(bin, path string) (string, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("build information of %s: %w", bin, err)
	}
	if bi.Main.Path == path {
		return bi.Main.Version, nil
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version, nil
			}
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s was not built with module %s", bin, path)
}

// loopbackRefused says whether the kube-apiserver binary at bin is Kubernetes 1.37 or later,
// which refuses a loopback advertise address with its endpoint reconciler on (the version is
// the k8s.io/kubernetes module it was built from; unknown: false, the older behaviour).
func loopbackRefused(bin string) bool {
	v, err := moduleVersion(bin, "k8s.io/kubernetes")
	if err != nil {
		return false
	}
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 || parts[0] != "1" {
		return false
	}
	minor, err := strconv.Atoi(parts[1])
	return err == nil && minor >= 37
}
