//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// newNamespace creates a namespace named after the test and deletes it at cleanup.
func newNamespace(t testing.TB, cs clients) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// refTo is an ownerReference to a ConfigMap-like object with the given kind.
func refTo(apiVersion, kind, name string, uid types.UID, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
	if block {
		b := true
		r.BlockOwnerDeletion = &b
	}
	return r
}

func cmRef(cm *corev1.ConfigMap) metav1.OwnerReference {
	return refTo("v1", "ConfigMap", cm.Name, cm.UID, false)
}

func createCM(t testing.TB, cs clients, ns, name string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owners}}
	got, err := cs.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap %s/%s: %v", ns, name, err)
	}
	return got
}

// createCMs creates n ConfigMaps prefix-0..n-1 with the given owners, 8 at a time.
func createCMs(t testing.TB, cs clients, ns, prefix string, n int, owners ...metav1.OwnerReference) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: ns, OwnerReferences: owners}}
			if _, err := cs.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create configmaps %s-*: %v", prefix, err)
	}
}

// countCMs counts the ConfigMaps in ns whose name starts with prefix.
func countCMs(t testing.TB, cs clients, ns, prefix string) (int, error) {
	list, err := cs.kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
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

func waitCMCount(t testing.TB, cs clients, ns, prefix string, want int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d configmaps %s/%s*", want, ns, prefix), func() (bool, error) {
		n, err := countCMs(t, cs, ns, prefix)
		return n == want, err
	})
}

func waitCMGone(t testing.TB, cs clients, ns, name string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "configmap "+ns+"/"+name+" gone", func() (bool, error) {
		_, err := cs.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// mustExist fails the test if the ConfigMap is gone: used for objects that must never be
// deleted. It returns the live object.
func mustExist(t testing.TB, cs clients, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("configmap %s/%s must never be collected, but: %v", ns, name, err)
	}
	return cm
}

func deleteCM(t testing.TB, cs clients, ns, name string, policy metav1.DeletionPropagation) {
	t.Helper()
	err := cs.kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if err != nil {
		t.Fatalf("delete configmap %s/%s: %v", ns, name, err)
	}
}
