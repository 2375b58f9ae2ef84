//go:build e2e

package chaos

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-gc/cascade/e2e/harness"
)

// testPlane starts a control plane of the test's own (stopped at cleanup), builds cascade for it
// and creates namespace ns: the setup of the suite's deterministic tests.
func testPlane(ctx context.Context, t *testing.T, ns string) (*harness.ControlPlane, string, *kubernetes.Clientset) {
	t.Helper()
	startCtx, cancelStart := context.WithTimeout(ctx, 3*time.Minute)
	cp, err := harness.Start(startCtx, harness.Options{})
	cancelStart()
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	bin, err := harness.BuildCascade(cp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cp, bin, kube
}
