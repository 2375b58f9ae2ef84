//go:build e2e

package e2e

// Orphan and foreground deletion, after the in-tree conformance scenarios
// (test/e2e/apimachinery/garbage_collector.go) and integration tests
// (test/integration/garbagecollector). No controller runs beside the API server, so pods are
// created by the tests themselves with ownerReferences, are never scheduled, and are deleted
// at once when deleted (an unscheduled pod has no grace period).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cascade-gc/cascade/e2e/framework"
)

const (
	// orphanQuietPeriod is how long orphaned dependents must stay after their owner is gone.
	// Upstream waits 30 s; 10 s is enough here because cascade acts on an owner's deletion
	// event within milliseconds (background cascades of 100 dependents finish in well under a
	// second in this suite), and each test also has a canary: a dependent of an owner deleted
	// in the background after the orphaned owner was gone, whose collection proves that the
	// collector was running during the wait.
	orphanQuietPeriod = 10 * time.Second
	holdFinalizer     = "example.com/hold"
	keepFinalizer     = "example.com/keep"
)

// --- helpers ---

// finNamespace is newNamespace plus the "default" ServiceAccount pods need (no controller
// creates it here).
func finNamespace(t *testing.T, cs framework.Clients) string {
	t.Helper()
	ns := cs.NewNamespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := cs.Kube.CoreV1().ServiceAccounts(ns).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// ctrlRef is the reference a controller puts on what it creates: controller and
// blockOwnerDeletion true.
func ctrlRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func finPodSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}
}

func finPod(t *testing.T, cs framework.Clients, ns, name string, finalizers []string, owners ...metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "fin"}, Finalizers: finalizers, OwnerReferences: owners},
		Spec:       finPodSpec(),
	}
	got, err := cs.Kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return got
}

// finPods creates prefix-0..n-1 with the given owners, 8 at a time.
func finPods(t *testing.T, cs framework.Clients, ns, prefix string, n int, owners ...metav1.OwnerReference) {
	t.Helper()
	if err := framework.Parallel(n, 8, func(i int) error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Labels: map[string]string{"app": "fin"}, OwnerReferences: owners},
			Spec:       finPodSpec(),
		}
		_, err := cs.Kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func finRC(t *testing.T, cs framework.Clients, ns, name string) *corev1.ReplicationController {
	t.Helper()
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: ptr.To[int32](2),
			Selector: map[string]string{"rc": name},
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"rc": name}}, Spec: finPodSpec()},
		},
	}
	got, err := cs.Kube.CoreV1().ReplicationControllers(ns).Create(context.Background(), rc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create rc %s/%s: %v", ns, name, err)
	}
	return got
}

func rcRef(rc *corev1.ReplicationController) metav1.OwnerReference {
	return ctrlRef("v1", "ReplicationController", rc.Name, rc.UID)
}

func deleteRC(t *testing.T, cs framework.Clients, ns, name string, opts metav1.DeleteOptions) {
	t.Helper()
	if err := cs.Kube.CoreV1().ReplicationControllers(ns).Delete(context.Background(), name, opts); err != nil {
		t.Fatalf("delete rc %s/%s: %v", ns, name, err)
	}
}

func waitRCGone(t *testing.T, cs framework.Clients, ns, name string) {
	t.Helper()
	framework.WaitGone(t, "rc "+ns+"/"+name, collectTimeout, func() error {
		_, err := cs.Kube.CoreV1().ReplicationControllers(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err
	})
}

// listPods returns the pods in ns whose name starts with prefix.
func listPods(cs framework.Clients, ns, prefix string) ([]corev1.Pod, error) {
	list, err := cs.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p)
		}
	}
	return out, nil
}

func waitPodCount(t *testing.T, cs framework.Clients, ns, prefix string, want int, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, fmt.Sprintf("%d pods %s/%s*", want, ns, prefix), func() (bool, error) {
		pods, err := listPods(cs, ns, prefix)
		return len(pods) == want, err
	})
}

// canary deletes a fresh owner in the background and waits for its dependent to be collected:
// proof that cascade's collector is working at this point of the test.
func canary(t *testing.T, cs framework.Clients, ns string) {
	t.Helper()
	owner := cs.CreateCM(t, ns, fmt.Sprintf("canary-owner-%d", time.Now().UnixNano()))
	dep := cs.CreateCM(t, ns, owner.Name+"-dep", framework.CMRef(owner))
	cs.DeleteCM(t, ns, owner.Name, metav1.DeletePropagationBackground)
	cs.WaitCMGone(t, ns, dep.Name, collectTimeout)
}

// referencesUID reports whether refs names uid.
func referencesUID(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// podsReleased checks orphaned pods: it fails the test if any of the want pods named prefix*
// is gone or being deleted, and returns an error while one still references owner (with owner
// "", it only checks that they stay).
func podsReleased(t *testing.T, cs framework.Clients, ns, prefix string, want int, owner types.UID) func() error {
	return func() error {
		pods, err := listPods(cs, ns, prefix)
		if err != nil {
			return err
		}
		if len(pods) != want {
			t.Fatalf("orphaned pods must never be deleted: %d of %d %s* left", len(pods), want, prefix)
		}
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				t.Fatalf("orphaned pod %s is being deleted", p.Name)
			}
			if owner != "" && referencesUID(p.OwnerReferences, owner) {
				return fmt.Errorf("pod %s still references %s", p.Name, owner)
			}
		}
		return nil
	}
}

// staysReleased is the negative check of every orphan test: it waits until released returns
// nil (every orphaned dependent has lost its reference; released fails the test itself when
// one is deleted), then for a canary, so that cascade has processed everything before, then
// checks released for quiet more.
func staysReleased(t *testing.T, cs framework.Clients, ns string, quiet time.Duration, what string, released func() error) {
	t.Helper()
	framework.Eventually(t, collectTimeout, what, func() (bool, error) {
		err := released()
		return err == nil, err
	})
	canary(t, cs, ns)
	framework.Consistently(t, quiet, what+", and staying so", released)
}

// --- background ---

// TestFinalizersBackgroundRC (conformance "delete pods created by rc when not orphaning"): an
// RC deleted with propagationPolicy Background takes its pods with it.
func TestFinalizersBackgroundRC(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	suite.StartCascade(t)
	rc := finRC(t, cs, ns, "rc")
	finPods(t, cs, ns, "pod", 5, rcRef(rc))
	bystander := finPod(t, cs, ns, "bystander", nil)
	deleteRC(t, cs, ns, "rc", metav1.DeleteOptions{
		Preconditions: metav1.NewUIDPreconditions(string(rc.UID)), PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	waitPodCount(t, cs, ns, "pod-", 0, collectTimeout)
	if _, err := cs.Kube.CoreV1().Pods(ns).Get(context.Background(), bystander.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("a pod without owner must never be collected: %v", err)
	}
}

// --- orphan ---

// TestFinalizersOrphanRC (conformance "orphan pods created by rc if delete options say so"):
// the RC goes, its 10 pods stay, each without the reference to the RC. Pods must never be
// deleted.
func TestFinalizersOrphanRC(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	c := suite.StartCascade(t)
	// Owners earlier tests left waiting on the orphan finalizer are finished by this cascade
	// too: the count is this test's from here.
	const removed = `cascade_finalizers_removed_total{finalizer="orphan"}`
	base, _ := settled(t, c).Value(removed)
	rc := finRC(t, cs, ns, "rc")
	other := finRC(t, cs, ns, "other")
	finPods(t, cs, ns, "pod", 10, rcRef(rc))
	finPods(t, cs, ns, "shared", 3, rcRef(rc), framework.RefTo("v1", "ReplicationController", other.Name, other.UID, false))
	deleteRC(t, cs, ns, "rc", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)})
	waitRCGone(t, cs, ns, "rc")
	framework.Eventually(t, collectTimeout, "shared pods keep only the other RC", func() (bool, error) {
		pods, err := listPods(cs, ns, "shared-")
		if err != nil || len(pods) != 3 {
			return false, err
		}
		for _, p := range pods {
			if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != other.UID {
				return false, nil
			}
		}
		return true, nil
	})
	staysReleased(t, cs, ns, orphanQuietPeriod, "pods released by the RC", podsReleased(t, cs, ns, "pod-", 10, rc.UID))
	if v := framework.MetricValue(t, c, removed) - base; v != 1 {
		t.Errorf("%s rose by %g during the test, want 1 (the RC's)", removed, v)
	}
}

// TestFinalizersOrphanDeprecatedAndDefault: the deprecated orphanDependents: true on a
// Deployment (conformance "orphan RS created by deployment") and an RC deleted with empty
// options (its type default for v1 is orphan; upstream "should orphan pods created by rc if
// deleteOptions.OrphanDependents is nil"). No ReplicaSet and no pod may ever be deleted.
func TestFinalizersOrphanDeprecatedAndDefault(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	suite.StartCascade(t)
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	dep, err := cs.Kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: finPodSpec()},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cs.Kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", OwnerReferences: []metav1.OwnerReference{ctrlRef("apps/v1", "Deployment", dep.Name, dep.UID)}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: finPodSpec()},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	finPods(t, cs, ns, "web-pod", 2, ctrlRef("apps/v1", "ReplicaSet", rs.Name, rs.UID))
	rc := finRC(t, cs, ns, "rc")
	finPods(t, cs, ns, "rc-pod", 5, rcRef(rc))

	if err := cs.Kube.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{OrphanDependents: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	deleteRC(t, cs, ns, "rc", metav1.DeleteOptions{})
	framework.WaitGone(t, "deployment", collectTimeout, func() error {
		_, err := cs.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err
	})
	waitRCGone(t, cs, ns, "rc")
	released := func() error {
		got, err := cs.Kube.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the orphaned ReplicaSet must never be deleted: %v", err)
		}
		if got.DeletionTimestamp != nil {
			t.Fatal("the orphaned ReplicaSet is being deleted")
		}
		if len(got.OwnerReferences) != 0 {
			return fmt.Errorf("the ReplicaSet still references the Deployment")
		}
		if err := podsReleased(t, cs, ns, "web-pod-", 2, "")(); err != nil {
			return err
		}
		return podsReleased(t, cs, ns, "rc-pod-", 5, rc.UID)()
	}
	staysReleased(t, cs, ns, orphanQuietPeriod, "the ReplicaSet and the RC's pods released", released)
	// The grandchildren keep their reference to the ReplicaSet: orphaning is one level.
	pods, err := listPods(cs, ns, "web-pod-")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if !referencesUID(p.OwnerReferences, rs.UID) {
			t.Errorf("pod %s lost its reference to the ReplicaSet", p.Name)
		}
	}
}

// TestFinalizersOrphanDependentsCreatedJustBefore: dependents of three resources created right
// before an orphan delete, with no wait for cascade to observe them (the in-tree integration
// tests must wait for the graph; the in-tree collector deletes what it learns of late). None
// may ever be deleted, and all lose their reference to the owner.
func TestFinalizersOrphanDependentsCreatedJustBefore(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	c := suite.StartCascade(t)
	ctx := context.Background()
	for round := range 3 {
		owner := cs.CreateCM(t, ns, fmt.Sprintf("owner-%d", round))
		ref := framework.CMRef(owner)
		prefix := fmt.Sprintf("r%d-", round)
		// Pods, ConfigMaps and Secrets come through three watches, in no particular order.
		if err := framework.Parallel(60, 8, func(i int) error {
			meta := metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{ref}}
			var err error
			switch i % 3 {
			case 0:
				meta.Name = fmt.Sprintf("%spod-%d", prefix, i)
				_, err = cs.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: meta, Spec: finPodSpec()}, metav1.CreateOptions{})
			case 1:
				meta.Name = fmt.Sprintf("%scm-%d", prefix, i)
				_, err = cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta}, metav1.CreateOptions{})
			default:
				meta.Name = fmt.Sprintf("%ssecret-%d", prefix, i)
				_, err = cs.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta}, metav1.CreateOptions{})
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		cs.DeleteCM(t, ns, owner.Name, metav1.DeletePropagationOrphan)
	}
	released := func() error {
		for round := range 3 {
			prefix := fmt.Sprintf("r%d-", round)
			pods, err := listPods(cs, ns, prefix+"pod-")
			if err != nil {
				return err
			}
			cms, err := cs.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			secrets, err := cs.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			var metas []metav1.ObjectMeta
			for _, p := range pods {
				metas = append(metas, p.ObjectMeta)
			}
			for _, c := range cms.Items {
				if strings.HasPrefix(c.Name, prefix+"cm-") {
					metas = append(metas, c.ObjectMeta)
				}
			}
			for _, s := range secrets.Items {
				if strings.HasPrefix(s.Name, prefix+"secret-") {
					metas = append(metas, s.ObjectMeta)
				}
			}
			if len(metas) != 60 {
				t.Fatalf("round %d: %d of 60 dependents left: dependents of an orphaned owner must never be deleted", round, len(metas))
			}
			for _, m := range metas {
				if m.DeletionTimestamp != nil {
					t.Fatalf("%s is being deleted", m.Name)
				}
				if len(m.OwnerReferences) != 0 {
					return fmt.Errorf("%s still references %s", m.Name, m.OwnerReferences[0].Name)
				}
			}
		}
		return nil
	}
	for round := range 3 {
		cs.WaitCMGone(t, ns, fmt.Sprintf("owner-%d", round), collectTimeout)
	}
	staysReleased(t, cs, ns, orphanQuietPeriod, "every dependent released", released)
	// How many late references the collector removed instead of deleting (nothing else here
	// has stale references); it varies from run to run.
	m := framework.Scrape(t, c)
	removed, _ := m.Value(`cascade_collected_total{action="remove_refs"}`)
	orphaned, _ := m.Value("cascade_orphaned_dependents_total")
	t.Logf("references removed by the collector: %g; dependents orphaned by the finalizer processor: %g", removed, orphaned)
}

// TestFinalizersOrphanDependentOfNewResource: a custom resource of a CRD created after cascade
// started, referencing an owner that is then deleted with the orphan policy before cascade
// watches the new resource. cascade finishes the owner without seeing that dependent; when it
// starts watching the resource it finds a reference to a gone owner that it orphaned, and
// removes the reference instead of deleting the dependent (the in-tree collector deletes it).
func TestFinalizersOrphanDependentOfNewResource(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	c := suite.StartCascade(t, "--discovery-period=10s")
	ctx := context.Background()
	// References removed from here on are this test's: this cascade also removes references
	// that earlier tests left dangling (to owners in the orphan record, say) as it starts.
	const removeRefs = `cascade_collected_total{action="remove_refs"}`
	base, _ := settled(t, c).Value(removeRefs)
	owner := cs.CreateCM(t, ns, "owner")
	const group = "late.e2e.cascade.dev"
	gvr := createCRD(t, cs, group, "Late", "Namespaced")
	late := cs.Dyn.Resource(gvr).Namespace(ns)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Late"}}
	u.SetName("late-dep")
	u.SetOwnerReferences([]metav1.OwnerReference{framework.CMRef(owner)})
	if _, err := late.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationOrphan)
	cs.WaitCMGone(t, ns, "owner", collectTimeout)
	unseen := !watched(framework.Scrape(t, c), gvr)
	t.Logf("the new resource was watched before the owner was finished: %t", !unseen)

	released := func() error {
		got, err := late.Get(ctx, "late-dep", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("a dependent of an orphaned owner must never be deleted: %v", err)
		}
		if got.GetDeletionTimestamp() != nil {
			t.Fatal("a dependent of an orphaned owner is being deleted")
		}
		if len(got.GetOwnerReferences()) != 0 {
			return fmt.Errorf("late-dep still references the owner")
		}
		return nil
	}
	// Released once cascade watches the new resource: within a discovery period.
	framework.Eventually(t, 2*collectTimeout, "late-dep released", func() (bool, error) {
		err := released()
		return err == nil, err
	})
	staysReleased(t, cs, ns, 3*time.Second, "late-dep released", released)
	if unseen && framework.MetricValue(t, c, removeRefs)-base < 1 {
		t.Error("the late reference was not removed by the collector's orphan rule")
	}
}

// --- foreground ---

// TestFinalizersForeground (conformance "keep the rc around until all its pods are deleted"):
// the RC stays while a blocking pod remains (one held by a finalizer), and when it finally
// disappears no pod remains.
func TestFinalizersForeground(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	suite.StartCascade(t)
	ctx := context.Background()
	rc := finRC(t, cs, ns, "rc")
	finPods(t, cs, ns, "pod", 20, rcRef(rc))
	finPod(t, cs, ns, "pod-held", []string{holdFinalizer}, rcRef(rc))
	deleteRC(t, cs, ns, "rc", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	// Every pod is deleted; the held one stays Terminating.
	framework.Eventually(t, collectTimeout, "all pods deleted but the held one", func() (bool, error) {
		pods, err := listPods(cs, ns, "pod-")
		return err == nil && len(pods) == 1 && pods[0].DeletionTimestamp != nil, err
	})
	framework.Consistently(t, 3*time.Second, "the RC waits for its blocking pod", func() error {
		got, err := cs.Kube.CoreV1().ReplicationControllers(ns).Get(ctx, "rc", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the RC went while a blocking pod remained: %v", err)
		}
		if got.DeletionTimestamp == nil || !strings.Contains(strings.Join(got.Finalizers, ","), metav1.FinalizerDeleteDependents) {
			return fmt.Errorf("the RC is not waiting in the foreground: %v %v", got.DeletionTimestamp, got.Finalizers)
		}
		return nil
	})
	if _, err := cs.Kube.CoreV1().Pods(ns).Patch(ctx, "pod-held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Polled every 10 ms, so that an RC that went before its last pod is seen with that pod.
	framework.EventuallyEvery(t, 10*time.Millisecond, collectTimeout, "the RC gone after its last pod went", func() (bool, error) {
		_, err := cs.Kube.CoreV1().ReplicationControllers(ns).Get(ctx, "rc", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	pods, err := listPods(cs, ns, "pod")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 0 {
		t.Fatalf("the RC went while %d of its pods remained (first: %s)", len(pods), pods[0].Name)
	}
}

// TestFinalizersForegroundNonBlocking (in-tree TestNonBlockingOwnerRefDoesNotBlock): a
// dependent without blockOwnerDeletion is deleted but not waited for.
func TestFinalizersForegroundNonBlocking(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	suite.StartCascade(t)
	ctx := context.Background()
	owner := cs.CreateCM(t, ns, "owner")
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{holdFinalizer}, OwnerReferences: []metav1.OwnerReference{framework.CMRef(owner)}}}
	if _, err := cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationForeground)
	cs.WaitCMGone(t, ns, "owner", collectTimeout)
	got := cs.MustExistCM(t, ns, "held")
	if got.DeletionTimestamp == nil {
		t.Errorf("the non-blocking dependent was not deleted")
	}
	if _, err := cs.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.WaitCMGone(t, ns, "held", collectTimeout)
}

// TestFinalizersForegroundMultipleOwners (conformance "multiple owners"): half of RC1's pods
// also belong to RC2; deleting RC1 in the foreground deletes the others, and the shared ones
// survive, not Terminating, with only the reference to RC2. They must never be deleted.
func TestFinalizersForegroundMultipleOwners(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	suite.StartCascade(t)
	ctx := context.Background()
	rc1, rc2 := finRC(t, cs, ns, "rc1"), finRC(t, cs, ns, "rc2")
	finPods(t, cs, ns, "only", 5, rcRef(rc1))
	finPods(t, cs, ns, "shared", 5, rcRef(rc1), framework.RefTo("v1", "ReplicationController", rc2.Name, rc2.UID, false))
	if err := cs.Kube.CoreV1().ReplicationControllers(ns).Delete(ctx, "rc1", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, "rc1", collectTimeout, func() error {
		_, err := cs.Kube.CoreV1().ReplicationControllers(ns).Get(ctx, "rc1", metav1.GetOptions{})
		return err
	})
	waitPodCount(t, cs, ns, "only-", 0, collectTimeout)
	pods, err := listPods(cs, ns, "shared-")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 5 {
		t.Fatalf("pods with a live second owner must never be deleted: %d of 5 left", len(pods))
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			t.Errorf("%s is Terminating", p.Name)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != rc2.UID {
			t.Errorf("%s owners = %+v, want only rc2", p.Name, p.OwnerReferences)
		}
	}
	if _, err := cs.Kube.CoreV1().ReplicationControllers(ns).Get(ctx, "rc2", metav1.GetOptions{}); err != nil {
		t.Errorf("rc2 must stay: %v", err)
	}
}

// TestFinalizersForegroundCycle (conformance "dependency cycle"): pod1 → pod3 → pod2 → pod1,
// every reference controller and blockOwnerDeletion; deleting pod1 in the foreground removes
// all three.
func TestFinalizersForegroundCycle(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	suite.StartCascade(t)
	ctx := context.Background()
	p1 := finPod(t, cs, ns, "pod1", nil)
	p2 := finPod(t, cs, ns, "pod2", nil)
	p3 := finPod(t, cs, ns, "pod3", nil)
	setOwner := func(p, owner *corev1.Pod) {
		patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}]}}`, owner.Name, owner.UID)
		if _, err := cs.Kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setOwner(p1, p3)
	setOwner(p2, p1)
	setOwner(p3, p2)
	if err := cs.Kube.CoreV1().Pods(ns).Delete(ctx, "pod1", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	waitPodCount(t, cs, ns, "pod", 0, collectTimeout)
}

// TestFinalizersForegroundKeepsOtherFinalizers (in-tree TestDoubleDeletionWithFinalizer):
// cascade removes only foregroundDeletion; example.com/keep stays, also after a second
// foreground delete, until the test removes it.
func TestFinalizersForegroundKeepsOtherFinalizers(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	suite.StartCascade(t)
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Finalizers: []string{keepFinalizer}}}
	created, err := cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, owner, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs.CreateCMs(t, ns, "dep", 5, framework.RefTo("v1", "ConfigMap", "owner", created.UID, true))
	onlyKeep := func() (bool, error) {
		got := cs.MustExistCM(t, ns, "owner")
		if got.DeletionTimestamp == nil {
			t.Fatal("the owner is not being deleted")
		}
		for _, f := range got.Finalizers {
			if f != keepFinalizer && f != metav1.FinalizerDeleteDependents {
				t.Fatalf("unexpected finalizer %q", f)
			}
		}
		if !strings.Contains(strings.Join(got.Finalizers, ","), keepFinalizer) {
			t.Fatalf("someone else's finalizer was removed: %q", got.Finalizers)
		}
		return len(got.Finalizers) == 1, nil
	}
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationForeground)
	cs.WaitCMCount(t, ns, "dep-", 0, collectTimeout)
	framework.Eventually(t, collectTimeout, "only example.com/keep left on the owner", onlyKeep)

	// Deleting again in the foreground puts foregroundDeletion back (upstream #77081).
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationForeground)
	if got := cs.MustExistCM(t, ns, "owner"); len(got.Finalizers) > 1 {
		t.Logf("second delete re-added foregroundDeletion: %q", got.Finalizers)
	}
	framework.Eventually(t, collectTimeout, "only example.com/keep left after the second delete", onlyKeep)
	framework.Consistently(t, 2*time.Second, "the owner stays while example.com/keep is on it", func() error {
		_, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
		return err
	})
	if _, err := cs.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, "owner", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.WaitCMGone(t, ns, "owner", collectTimeout)
}

// --- custom resources ---

// TestFinalizersCustomResources: foreground and orphan deletion of custom resources whose
// dependents are custom resources (no strategic merge patch: JSON merge patch fallback) and
// ConfigMaps. The orphaned dependents must never be deleted.
func TestFinalizersCustomResources(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	const group = "fin.e2e.cascade.dev"
	gvr := createCRD(t, cs, group, "Thing", "Namespaced")
	suite.StartCascade(t, "--discovery-period=2s")
	ctx := context.Background()
	things := cs.Dyn.Resource(gvr).Namespace(ns)
	create := func(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Thing"}}
		u.SetName(name)
		u.SetOwnerReferences(owners)
		got, err := things.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	ref := func(u *unstructured.Unstructured, block bool) metav1.OwnerReference {
		return framework.RefTo(group+"/v1", "Thing", u.GetName(), u.GetUID(), block)
	}
	getThing := func(name string) func() error {
		return func() error { _, err := things.Get(ctx, name, metav1.GetOptions{}); return err }
	}

	fg := create("fg")
	create("fg-child", ref(fg, true))
	create("fg-held", ref(fg, true))
	if _, err := things.Patch(ctx, "fg-held", types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+holdFinalizer+`"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.CreateCM(t, ns, "fg-cm", ref(fg, true))
	orph := create("orph")
	keeper := cs.CreateCM(t, ns, "keeper")
	create("orph-child", ref(orph, false), framework.CMRef(keeper))
	cs.CreateCM(t, ns, "orph-cm", ref(orph, true))

	if err := things.Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	if err := things.Delete(ctx, "orph", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}); err != nil {
		t.Fatal(err)
	}
	// Foreground: the dependents go, the held one blocks the owner.
	framework.WaitGone(t, "fg-child", collectTimeout, getThing("fg-child"))
	cs.WaitCMGone(t, ns, "fg-cm", collectTimeout)
	framework.Consistently(t, 2*time.Second, "the foreground owner waits for its held dependent", getThing("fg"))
	if _, err := things.Patch(ctx, "fg-held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, "fg", collectTimeout, getThing("fg"))

	// Orphan: the owner goes, the dependents stay without the reference.
	framework.WaitGone(t, "orph", collectTimeout, getThing("orph"))
	released := func() error {
		child, err := things.Get(ctx, "orph-child", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the orphaned custom resource must never be deleted: %v", err)
		}
		cm := cs.MustExistCM(t, ns, "orph-cm")
		if child.GetDeletionTimestamp() != nil || cm.DeletionTimestamp != nil {
			t.Fatal("an orphaned dependent is being deleted")
		}
		if referencesUID(child.GetOwnerReferences(), orph.GetUID()) || referencesUID(cm.OwnerReferences, orph.GetUID()) {
			return fmt.Errorf("still referencing the orphaned owner")
		}
		if refs := child.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != keeper.UID {
			t.Fatalf("orph-child must keep exactly its reference to the live keeper: %+v", refs)
		}
		return nil
	}
	staysReleased(t, cs, ns, orphanQuietPeriod, "orphaned custom resource's dependents released", released)
}

// --- level-driven ---

// TestFinalizersLevelDriven: owners deleted with foreground and orphan while cascade is not
// running are finished when it starts (nothing relies on having seen the transition).
func TestFinalizersLevelDriven(t *testing.T) {
	cs := suite.Clients(t)
	ns := finNamespace(t, cs)
	ctx := context.Background()
	first := suite.StartCascade(t)
	// The first cascade finishes what earlier tests left waiting on a GC finalizer, so that the
	// second, which counts from its start, finds only this test's two owners to finish.
	settled(t, first)
	fg := cs.CreateCM(t, ns, "fg")
	cs.CreateCMs(t, ns, "fg-dep", 5, framework.RefTo("v1", "ConfigMap", "fg", fg.UID, true))
	orph := cs.CreateCM(t, ns, "orph")
	cs.CreateCMs(t, ns, "orph-dep", 5, framework.CMRef(orph))
	if err := first.Stop(10 * time.Second); err != nil {
		t.Logf("stopping cascade: %v", err)
	}

	cs.DeleteCM(t, ns, "fg", metav1.DeletePropagationForeground)
	cs.DeleteCM(t, ns, "orph", metav1.DeletePropagationOrphan)
	for _, name := range []string{"fg", "orph"} {
		if got := cs.MustExistCM(t, ns, name); got.DeletionTimestamp == nil || len(got.Finalizers) == 0 {
			t.Fatalf("%s should wait for a collector: %v %q", name, got.DeletionTimestamp, got.Finalizers)
		}
	}

	second := suite.StartCascade(t, "--v=2") // logs each GC finalizer it removes, naming the owner's UID
	cs.WaitCMGone(t, ns, "fg", collectTimeout)
	if n, err := cs.CountCMs(ns, "fg-dep-"); err != nil || n != 0 {
		t.Fatalf("the foreground owner went with %d dependents left (%v)", n, err)
	}
	cs.WaitCMGone(t, ns, "orph", collectTimeout)
	released := func() error {
		list, err := cs.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, cm := range list.Items {
			if !strings.HasPrefix(cm.Name, "orph-dep-") {
				continue
			}
			n++
			if len(cm.OwnerReferences) != 0 {
				return fmt.Errorf("%s still references the owner", cm.Name)
			}
		}
		if n != 5 {
			t.Fatalf("orphaned dependents must never be deleted: %d of 5 left", n)
		}
		return nil
	}
	staysReleased(t, cs, ns, 3*time.Second, "orphaned dependents released", released)
	// The second cascade finished both owners: each waited for it, not for time to pass. Its
	// log names each owner once (the first cascade, which shares the log file, never removed
	// theirs), and its counters hold these two alone: the first finished what others left.
	for _, o := range []struct {
		finalizer string
		uid       types.UID
	}{{metav1.FinalizerDeleteDependents, fg.UID}, {metav1.FinalizerOrphanDependents, orph.UID}} {
		if n := logLines(t, second, "Removed the "+o.finalizer+" finalizer", string(o.uid)); n != 1 {
			t.Errorf("%d log lines say the %s finalizer of %s was removed, want 1", n, o.finalizer, o.uid)
		}
		sel := fmt.Sprintf(`cascade_finalizers_removed_total{finalizer=%q}`, o.finalizer)
		if v := framework.MetricValue(t, second, sel); v != 1 {
			t.Errorf("%s of the cascade started after the deletes is %g, want 1", sel, v)
		}
	}
}
