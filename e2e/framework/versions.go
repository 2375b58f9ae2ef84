package framework

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cascade-gc/cascade/e2e/harness"
)

// The version matrix (make test-versions) runs a package against kube-apiserver and etcd of
// several Kubernetes versions, each from its own directory (CASCADE_BIN_DIR). It names the
// versions it expects in the environment, and Main refuses to run the tests unless the control
// plane it started is those versions, as the servers report them (/version) and as their
// binaries were built (the pinned module in their Go build information):
//
//   - CASCADE_KUBE_VERSION, e.g. v1.34.4: kube-apiserver's gitVersion and k8s.io/kubernetes;
//   - CASCADE_ETCD_VERSION, e.g. v3.6.4: etcd's etcdserver and go.etcd.io/etcd/server/v3.
//
// Unset, nothing is checked (make e2e runs against bin/, KUBE_VERSION). Tests that must expect
// something different per version read Suite.KubeVersion and Suite.KubeMinor, the version the
// suite's kube-apiserver serves (checked against CASCADE_KUBE_VERSION when that is set).
const (
	KubeVersionEnv = "CASCADE_KUBE_VERSION"
	EtcdVersionEnv = "CASCADE_ETCD_VERSION"
)

// checkVersions reads the control plane's versions and compares them with the expected ones
// from the environment; it returns them, and a line describing what runs.
func checkVersions(ctx context.Context, cp *harness.ControlPlane) (harness.Versions, string, error) {
	v, err := cp.Versions(ctx)
	if err != nil {
		return v, "", err
	}
	line := fmt.Sprintf("kube-apiserver %s (module k8s.io/kubernetes %s), etcd %s (module %s), from %s",
		v.APIServer, v.APIServerModule, v.Etcd, v.EtcdModule, cp.BinDir)
	if err := compareVersions(v, os.Getenv(KubeVersionEnv), os.Getenv(EtcdVersionEnv)); err != nil {
		return v, line, fmt.Errorf("%s: %w", line, err)
	}
	return v, line, nil
}

// compareVersions says how v differs from the expected kube and etcd versions; an empty
// expectation is not checked.
func compareVersions(v harness.Versions, kube, etcd string) error {
	var wrong []string
	if kube != "" && (v.APIServer != kube || v.APIServerModule != kube) {
		wrong = append(wrong, fmt.Sprintf("%s=%s, but kube-apiserver reports %s and was built from k8s.io/kubernetes %s",
			KubeVersionEnv, kube, v.APIServer, v.APIServerModule))
	}
	if want := strings.TrimPrefix(etcd, "v"); want != "" && (v.Etcd != want || v.EtcdModule != want) {
		wrong = append(wrong, fmt.Sprintf("%s=%s, but etcd reports %s and was built from go.etcd.io/etcd/server/v3 %s",
			EtcdVersionEnv, etcd, v.Etcd, v.EtcdModule))
	}
	if len(wrong) > 0 {
		return fmt.Errorf("not the control plane this run expects: %s", strings.Join(wrong, "; "))
	}
	return nil
}

// kubeMinor is the minor version in a gitVersion such as v1.34.4, or 0.
func kubeMinor(gitVersion string) int {
	parts := strings.SplitN(strings.TrimPrefix(gitVersion, "v"), ".", 3)
	if len(parts) < 2 {
		return 0
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return 0
	}
	return n
}
