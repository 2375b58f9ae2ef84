//go:build e2e

package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
)

// TestBadInput feeds cascade what a careless or hostile client can put in owner references,
// and huge fan-in and fan-out. What must never happen: cascade crashes, or deletes an object
// that has a live owner, no owner reference, or an owner it cannot resolve.
//   - a reference with an empty UID, or an apiVersion with two slashes: the apiserver refuses
//     them (the test proves it, so that cascade can rely on it);
//   - an apiVersion the apiserver accepts but no API serves ("not a version!"): kept, counted in
//     cascade_rest_mapping_errors_total, logged;
//   - a self-reference: the object is its own present owner, kept; deleted, it goes;
//   - 10,000 references on one object (9,999 to owners that never existed, one live): kept, and
//     collected once the live owner goes;
//   - one owner with 20,000 dependents: all collected once it goes;
//   - names at the length limits (253-character names, a 63-character namespace): collected.
//
// It reports cascade's peak RSS (VmHWM).
func TestBadInput(t *testing.T) {
	// On control planes of its own: runs beside the suite's other such tests once TestChaos, which
	// runs alone, is done (t.Parallel; go test's -parallel is GOMAXPROCS, 2 here), CI's time.
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "bad-input"
	cp, bin, kube := testPlane(ctx, t, ns)
	c := framework.StartReady(t, cp, "cascade-bad-input", bin, "--kube-api-qps=0", "--v=1")
	cms := kube.CoreV1().ConfigMaps(ns)
	create := func(name string, refs ...metav1.OwnerReference) (*corev1.ConfigMap, error) {
		return cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: refs}}, metav1.CreateOptions{})
	}
	mustCreate := func(name string, refs ...metav1.OwnerReference) *corev1.ConfigMap {
		t.Helper()
		cm, err := create(name, refs...)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return cm
	}
	ref := func(name string, uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: uid}
	}
	gone := func(name string, timeout time.Duration) {
		t.Helper()
		framework.WaitGone(t, "configmap "+name, timeout, func() error {
			_, err := cms.Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	mustExist := func(names ...string) {
		t.Helper()
		for _, n := range names {
			if _, err := cms.Get(ctx, n, metav1.GetOptions{}); err != nil {
				t.Fatalf("configmap %s must never be collected, but: %v", n, err)
			}
		}
	}
	live := mustCreate("live-owner")

	// Refused by the apiserver: nothing reaches cascade.
	if _, err := create("empty-uid", ref("live-owner", "")); !apierrors.IsInvalid(err) {
		t.Fatalf("a reference with an empty UID: want Invalid, got %v", err)
	}
	bad := ref("live-owner", live.UID)
	bad.APIVersion = "a/b/c"
	if _, err := create("bad-apiversion", bad); !apierrors.IsInvalid(err) {
		t.Fatalf("apiVersion a/b/c: want Invalid, got %v", err)
	}
	// Accepted, but no API serves it.
	odd := ref("live-owner", live.UID)
	odd.APIVersion = "not a version!"
	mustCreate("odd-apiversion", odd, ref("never", "0b1d-never"))
	self := mustCreate("self")
	self.OwnerReferences = []metav1.OwnerReference{ref("self", self.UID), ref("never", "0b1d-never-2")}
	if _, err := cms.Update(ctx, self, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// 10,000 references: one live, 9,999 never existed.
	refs := []metav1.OwnerReference{ref("live-owner", live.UID)}
	for i := range 9999 {
		refs = append(refs, ref("gone-"+strconv.Itoa(i%50), types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))))
	}
	if _, err := create("many-refs", refs...); err != nil {
		t.Fatalf("create an object with 10,000 references: %v", err)
	}
	// Names at the limits: a 63-character namespace, 253-character names.
	longNS := strings.Repeat("n", 63)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: longNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	longOwner := strings.Repeat("o", 253)
	lo, err := kube.CoreV1().ConfigMaps(longNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: longOwner}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	longDep := strings.Repeat("d", 253)
	if _, err := kube.CoreV1().ConfigMaps(longNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: longDep,
		OwnerReferences: []metav1.OwnerReference{ref(longOwner, lo.UID)}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A canary: a dependent of an owner that never existed, created after all of the above,
	// collected means cascade got past them.
	mustCreate("canary", ref("never", "0b1d-never-3"))
	gone("canary", 2*time.Minute)
	mustExist("live-owner", "odd-apiversion", "self", "many-refs")
	framework.Eventually(t, time.Minute, "the unserved apiVersion counted", func() (bool, error) {
		v, err := metricValue(c, "cascade_rest_mapping_errors_total")
		return v > 0, err
	})

	// One owner, 20,000 dependents.
	const fan = 20000
	big := mustCreate("big-owner")
	start := time.Now()
	err = framework.Parallel(fan, 16, func(i int) error {
		_, err := create(fmt.Sprintf("fan-%d", i), ref("big-owner", big.UID))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d dependents of one owner in %s", fan, time.Since(start).Round(time.Second))
	bg := metav1.DeletePropagationBackground
	if err := cms.Delete(ctx, "big-owner", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "live-owner", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().ConfigMaps(longNS).Delete(ctx, longOwner, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	framework.EventuallyEvery(t, time.Second, 10*time.Minute, "20,000 dependents collected", func() (bool, error) {
		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, "fan-") {
				n++
			}
		}
		return n == 0, nil
	})
	t.Logf("20,000 dependents collected in %s", time.Since(start).Round(time.Second))
	gone("many-refs", 2*time.Minute)
	framework.WaitGone(t, "the 253-character dependent", time.Minute, func() error {
		_, err := kube.CoreV1().ConfigMaps(longNS).Get(ctx, longDep, metav1.GetOptions{})
		return err
	})
	// Still kept: the unresolvable reference holds its object even with its other owner gone.
	mustExist("odd-apiversion", "self")
	// The self-reference deleted: it goes (no finalizer, nothing waits).
	if err := cms.Delete(ctx, "self", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	gone("self", time.Minute)

	if exited, err := c.Exited(); exited {
		t.Fatalf("cascade exited: %v\n%s", err, c.Tail(40))
	}
	if !logContains(c.LogPath, "not a version!") {
		t.Errorf("cascade's log does not name the unserved apiVersion %q", "not a version!")
	}
	hwm, rss := procStatus(c.Pid(), "VmHWM"), procStatus(c.Pid(), "VmRSS")
	t.Logf("cascade peak RSS (VmHWM) %s, RSS now %s", hwm, rss)
	fmt.Printf("bad input: cascade peak RSS (VmHWM) %s, RSS at the end %s\n", hwm, rss)
}

func metricValue(c *harness.Cascade, sel string) (float64, error) {
	text, err := c.Metrics()
	if err != nil {
		return 0, err
	}
	m, err := framework.ParseMetrics(text)
	if err != nil {
		return 0, err
	}
	v, _ := m.Value(sel)
	return v, nil
}

func logContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// procStatus returns a field of /proc/PID/status ("123456 kB"), or "?".
func procStatus(pid int, field string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
