package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RefTo is an ownerReference to the named object, with blockOwnerDeletion when block is set.
func RefTo(apiVersion, kind, name string, uid types.UID, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
	if block {
		b := true
		r.BlockOwnerDeletion = &b
	}
	return r
}

// CMRef is a plain (non-blocking) ownerReference to cm.
func CMRef(cm *corev1.ConfigMap) metav1.OwnerReference {
	return RefTo("v1", "ConfigMap", cm.Name, cm.UID, false)
}

// CreateNamespace creates the namespace name.
func (cs Clients) CreateNamespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.Kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// NewNamespace creates a namespace named after the test, and deletes it at cleanup (no
// namespace controller runs, so what it holds stays; every test uses fresh names).
func (cs Clients) NewNamespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	cs.CreateNamespace(t, name)
	t.Cleanup(func() {
		_ = cs.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// CreateCM creates the ConfigMap ns/name with the given owners.
func (cs Clients) CreateCM(t testing.TB, ns, name string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners}}
	got, err := cs.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap %s/%s: %v", ns, name, err)
	}
	return got
}

// CreateCMs creates the ConfigMaps prefix-0 ... prefix-(n-1) with the given owners, 8 at a
// time.
func (cs Clients) CreateCMs(t testing.TB, ns, prefix string, n int, owners ...metav1.OwnerReference) {
	t.Helper()
	cs.CreateConfigMaps(t, ns, n, 8, func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), OwnerReferences: owners}}
	})
}

// CreateConfigMaps creates build(0) ... build(n-1) in ns with workers concurrent requests and
// returns their UIDs in that order.
func (cs Clients) CreateConfigMaps(t testing.TB, ns string, n, workers int, build func(i int) *corev1.ConfigMap) []types.UID {
	t.Helper()
	uids := make([]types.UID, n)
	err := Parallel(n, workers, func(i int) error {
		cm := build(i)
		got, err := cs.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create configmap %s/%s: %w", ns, cm.Name, err)
		}
		uids[i] = got.UID
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return uids
}

// CountCMs counts the ConfigMaps in ns whose name starts with prefix.
func (cs Clients) CountCMs(ns, prefix string) (int, error) {
	list, err := cs.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, prefix) {
			n++
		}
	}
	return n, nil
}

// WaitCMCount waits until ns holds want ConfigMaps named prefix*.
func (cs Clients) WaitCMCount(t testing.TB, ns, prefix string, want int, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, fmt.Sprintf("%d configmaps %s/%s*", want, ns, prefix), func() (bool, error) {
		n, err := cs.CountCMs(ns, prefix)
		return n == want, err
	})
}

// WaitCMGone waits until the ConfigMap ns/name is gone.
func (cs Clients) WaitCMGone(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	WaitGone(t, "configmap "+ns+"/"+name, timeout, func() error {
		_, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err
	})
}

// MustExistCM returns the live ConfigMap ns/name, and fails the test if it is gone: for
// objects that must never be collected.
func (cs Clients) MustExistCM(t testing.TB, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("configmap %s/%s must never be collected, but: %v", ns, name, err)
	}
	return cm
}

// DeleteCM deletes the ConfigMap ns/name with the propagation policy.
func (cs Clients) DeleteCM(t testing.TB, ns, name string, policy metav1.DeletionPropagation) {
	t.Helper()
	err := cs.Kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if err != nil {
		t.Fatalf("delete configmap %s/%s: %v", ns, name, err)
	}
}
