package harness

import (
	"os"
	"strings"
	"testing"
)

// moduleVersion reads the Go build information of a binary. A test binary records its main
// module (cascade's, unversioned) but not its dependencies; the dependency case (etcd's server
// module in bin/etcd) is exercised by make test-versions, which refuses to run without it.
func TestModuleVersion(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	v, err := moduleVersion(self, "github.com/cascade-gc/cascade")
	if err != nil {
		t.Fatal(err)
	}
	if v != "(devel)" {
		t.Errorf("main module version %q, want (devel)", v)
	}
	if _, err := moduleVersion(self, "k8s.io/kubernetes"); err == nil || !strings.Contains(err.Error(), "was not built with module k8s.io/kubernetes") {
		t.Errorf("a module the binary lacks: error %v", err)
	}
	if loopbackRefused(self) {
		t.Errorf("a binary not built from k8s.io/kubernetes taken for kube-apiserver 1.37 or later")
	}
	if _, err := moduleVersion(t.TempDir(), "k8s.io/kubernetes"); err == nil {
		t.Errorf("not a binary: no error")
	}
}
