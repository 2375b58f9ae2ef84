package framework

import (
	"strings"
	"testing"

	"github.com/cascade-gc/cascade/e2e/harness"
)

func TestCompareVersions(t *testing.T) {
	v134 := harness.Versions{APIServer: "v1.34.4", APIServerModule: "v1.34.4", Etcd: "3.6.4", EtcdModule: "3.6.4"}
	for _, tc := range []struct {
		name       string
		v          harness.Versions
		kube, etcd string
		wrong      []string // what the error must name; none: no error
	}{
		{name: "nothing expected", v: v134},
		{name: "both as expected", v: v134, kube: "v1.34.4", etcd: "v3.6.4"},
		{name: "etcd without the v", v: v134, etcd: "3.6.4"},
		{name: "another kube-apiserver", v: v134, kube: "v1.35.4", wrong: []string{"CASCADE_KUBE_VERSION=v1.35.4", "reports v1.34.4"}},
		{name: "stamped but built from another module",
			v:    harness.Versions{APIServer: "v1.35.4", APIServerModule: "v1.34.4", Etcd: "3.6.4", EtcdModule: "3.6.4"},
			kube: "v1.35.4", wrong: []string{"built from k8s.io/kubernetes v1.34.4"}},
		{name: "unstamped", v: harness.Versions{APIServer: "v0.0.0-master+$Format:%H$", APIServerModule: "v1.34.4"},
			kube: "v1.34.4", wrong: []string{"reports v0.0.0-master"}},
		{name: "another etcd", v: v134, kube: "v1.34.4", etcd: "v3.6.5", wrong: []string{"CASCADE_ETCD_VERSION=v3.6.5", "etcd reports 3.6.4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := compareVersions(tc.v, tc.kube, tc.etcd)
			if len(tc.wrong) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %q", tc.wrong)
			}
			for _, w := range tc.wrong {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestKubeMinor(t *testing.T) {
	for in, want := range map[string]int{"v1.34.4": 34, "v1.37.2": 37, "1.36.3": 36, "v0.0.0-master+$Format:%H$": 0, "": 0, "garbage": 0} {
		if got := kubeMinor(in); got != want {
			t.Errorf("kubeMinor(%q) = %d, want %d", in, got, want)
		}
	}
}
