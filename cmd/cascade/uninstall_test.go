package main

import (
	"context"
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/policy"
)

var gadgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}

// uninstallFixture is a cluster for uninstall: Widgets and Gadgets (both listable and
// patchable) and Pods' status subresource (never listed), cascade's admission objects, and
// objects stamped or not.
type uninstallFixture struct {
	meta *metadatafake.FakeMetadataClient
	kube *fake.Clientset
	u    *uninstaller
	// clock is the uninstaller's now; each of its sleeps moves it and calls onSleep (when set)
	// with the number of sleeps so far.
	clock   time.Time
	sleeps  int
	onSleep func(n int)
}

func obj(gvr schema.GroupVersionResource, kind, ns, name string, finalizers []string, stamped string, deleting bool) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gvr.GroupVersion().String(), Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "5", Finalizers: finalizers},
	}
	if stamped != "" {
		m.Annotations = map[string]string{policy.DefaultPropagationAnnotation: stamped, "user": "keep"}
	}
	if deleting {
		m.DeletionTimestamp = &clienttest.DeletedAt
	}
	return m
}

func newUninstallFixture(t *testing.T, labelled bool, kubeObjs ...runtime.Object) *uninstallFixture {
	t.Helper()
	labels := map[string]string{policy.ManagedByLabel: policy.ManagedByValue}
	if !labelled {
		labels = map[string]string{policy.ManagedByLabel: "someone-else"}
	}
	kubeObjs = append(kubeObjs,
		&admissionv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy.AdmissionName, UID: "mp-uid", Labels: labels}},
		&admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy.AdmissionName, Labels: labels}},
	)
	meta := clienttest.NewFake(
		obj(clienttest.Widgets, "Widget", "ns1", "stamped-orphan", []string{"example.com/a", "orphan"}, "Orphan", false),
		obj(clienttest.Widgets, "Widget", "ns1", "stamped-foreground", []string{"foregroundDeletion", "example.com/b"}, "Foreground", false),
		obj(clienttest.Widgets, "Widget", "ns2", "opted-out", []string{"example.com/a"}, "Orphan", false),
		obj(clienttest.Widgets, "Widget", "ns1", "users-orphan", []string{"orphan", "example.com/a"}, "", false),
		obj(clienttest.Widgets, "Widget", "ns1", "deleting", []string{"orphan"}, "Orphan", true),
		obj(gadgets, "Gadget", "", "cluster-scoped", []string{"orphan"}, "Orphan", false),
		obj(gadgets, "Gadget", "", "plain", nil, "", false),
	)
	if !slices.ContainsFunc(kubeObjs, func(o runtime.Object) bool { _, ok := o.(*coordinationv1.Lease); return ok }) {
		// cascade stopped: its Lease released.
		kubeObjs = append(kubeObjs, heldLease("cascade-system", "", 0))
	}
	kube := fake.NewClientset(kubeObjs...)
	rw := []string{"get", "list", "watch", "patch", "delete"}
	lists := []*metav1.APIResourceList{
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: rw},
			{Name: "gadgets", Kind: "Gadget", Verbs: rw},
			{Name: "readonlies", Kind: "Readonly", Verbs: []string{"get", "list"}},
		}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: []string{"get", "patch"}}}},
	}
	u := &uninstaller{
		resources: func() ([]*metav1.APIResourceList, error) { return lists, nil },
		admission: func() (features.Admission, error) { return features.Admission{V1: true}, nil },
		meta:      meta, kube: kube, edge: client.NewEdge(meta, kube),
		leaseNamespace: "cascade-system", leaseName: "cascade",
	}
	f := &uninstallFixture{meta: meta, kube: kube, u: u, clock: uninstallT0}
	u.now = func() time.Time { return f.clock }
	u.sleep = func(_ context.Context, d time.Duration) error {
		f.clock = f.clock.Add(d)
		f.sleeps++
		if f.onSleep != nil {
			f.onSleep(f.sleeps)
		}
		return nil
	}
	return f
}

// uninstallT0 is the fixture's clock at start.
var uninstallT0 = time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)

// heldLease is the Lease cascade in ns held by holder ("": released), renewed renewedAgo before
// uninstallT0, for 15 s.
func heldLease(ns, holder string, renewedAgo time.Duration) *coordinationv1.Lease {
	d := int32(15)
	renew := metav1.NewMicroTime(uninstallT0.Add(-renewedAgo))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cascade"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &renew},
	}
}

func (f *uninstallFixture) live(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *metav1.PartialObjectMetadata {
	t.Helper()
	m, err := clienttest.Live(f.meta, gvr, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writes are the write actions the fakes saw.
func (f *uninstallFixture) writes() []string {
	var out []string
	for _, a := range append(f.meta.Actions(), f.kube.Actions()...) {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			out = append(out, v+" "+a.GetResource().Resource)
		}
	}
	return out
}

// TestUninstall: the admission objects go (binding first); every stamped object loses the
// finalizer its annotation records and the annotation, and nothing else; a user's own
// finalizers (an orphan finalizer on an object cascade did not stamp too) stay; an object
// being deleted is left alone; the report counts it all per resource.
func TestUninstall(t *testing.T) {
	f := newUninstallFixture(t, true)
	var out strings.Builder
	if err := f.u.run(context.Background(), &out); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out.String())
	}
	t.Logf("report:\n%s", out.String())
	for _, want := range []struct {
		gvr            schema.GroupVersionResource
		ns, name       string
		finalizers     []string
		stamp, userAnn string
	}{
		{clienttest.Widgets, "ns1", "stamped-orphan", []string{"example.com/a"}, "", "keep"},
		{clienttest.Widgets, "ns1", "stamped-foreground", []string{"example.com/b"}, "", "keep"},
		{clienttest.Widgets, "ns2", "opted-out", []string{"example.com/a"}, "", "keep"},
		{clienttest.Widgets, "ns1", "users-orphan", []string{"orphan", "example.com/a"}, "", ""},
		{clienttest.Widgets, "ns1", "deleting", []string{"orphan"}, "Orphan", "keep"},
		{gadgets, "", "cluster-scoped", nil, "", "keep"},
		{gadgets, "", "plain", nil, "", ""},
	} {
		m := f.live(t, want.gvr, want.ns, want.name)
		if !slices.Equal(m.Finalizers, want.finalizers) || m.Annotations[policy.DefaultPropagationAnnotation] != want.stamp || m.Annotations["user"] != want.userAnn {
			t.Errorf("%s/%s after uninstall: finalizers %q, annotations %v; want finalizers %q, stamp %q", want.ns, want.name, m.Finalizers, m.Annotations, want.finalizers, want.stamp)
		}
	}
	wantWrites := []string{"patch widgets", "patch widgets", "patch widgets", "patch gadgets", "delete mutatingadmissionpolicybindings", "delete mutatingadmissionpolicies"}
	if got := f.writes(); !sameElements(got, wantWrites) {
		t.Errorf("writes %q, want %q", got, wantWrites)
	}
	if i, j := slices.Index(f.writes(), "delete mutatingadmissionpolicybindings"), slices.Index(f.writes(), "delete mutatingadmissionpolicies"); i > j {
		t.Errorf("the policy was deleted before its binding: %q", f.writes())
	}
	for _, want := range []string{
		"MutatingAdmissionPolicyBinding cascade-default-propagation: deleted\n",
		"MutatingAdmissionPolicy cascade-default-propagation: deleted\n",
		"Total: 5 stamped objects in 2 resource(s): 4 unstamped (2 orphan and 1 foregroundDeletion finalizers removed with the annotation), 1 being deleted left alone, 0 changed meanwhile, 0 failed.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if !regexpLine(out.String(), `^\s+gadgets\.example\.com\s+1\s+1\s+1\s+0\s+0\s+0\s+0$`) ||
		!regexpLine(out.String(), `^\s+widgets\.example\.com\s+4\s+3\s+1\s+1\s+1\s+0\s+0$`) {
		t.Errorf("per-resource counts wrong:\n%s", out.String())
	}

	// A second run finds nothing left and writes nothing.
	f.meta.ClearActions()
	f.kube.ClearActions()
	out.Reset()
	if err := f.u.run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("second run wrote %q", w)
	}
	if !strings.Contains(out.String(), "MutatingAdmissionPolicy cascade-default-propagation: none") ||
		!strings.Contains(out.String(), "Total: 1 stamped objects in 1 resource(s): 0 unstamped") {
		t.Errorf("second run's report:\n%s", out.String())
	}
}

// TestUninstallDryRun: --dry-run reads and reports the same, and writes nothing.
func TestUninstallDryRun(t *testing.T) {
	f := newUninstallFixture(t, true)
	f.u.dryRun = true
	var out strings.Builder
	if err := f.u.run(context.Background(), &out); err != nil {
		t.Fatalf("uninstall --dry-run: %v\n%s", err, out.String())
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("dry run wrote %q", w)
	}
	for _, want := range []string{
		"Dry run: nothing is changed",
		"MutatingAdmissionPolicy cascade-default-propagation: would be deleted\n",
		"Total: 5 stamped objects in 2 resource(s): 4 would be unstamped (2 orphan and 1 foregroundDeletion finalizers would be removed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if m := f.live(t, clienttest.Widgets, "ns1", "stamped-orphan"); !slices.Contains(m.Finalizers, "orphan") {
		t.Errorf("dry run removed a finalizer: %q", m.Finalizers)
	}
}

// TestUninstallAdmissionVersions: cascade's admission objects are deleted at whichever version
// the server serves them: at v1beta1 on a server that serves only it (Kubernetes 1.34 and 1.35
// with the beta on), at both where both are served, and none is looked for where neither is.
func TestUninstallAdmissionVersions(t *testing.T) {
	labels := map[string]string{policy.ManagedByLabel: policy.ManagedByValue}
	beta := []runtime.Object{
		&admissionv1beta1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy.AdmissionName, UID: "beta-uid", Labels: labels}},
		&admissionv1beta1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy.AdmissionName, Labels: labels}},
	}
	for _, tt := range []struct {
		name       string
		served     features.Admission
		wantWrites []string
		wantOut    []string
	}{
		{"v1beta1 only", features.Admission{V1beta1: true},
			[]string{"delete v1beta1/mutatingadmissionpolicybindings", "delete v1beta1/mutatingadmissionpolicies"},
			[]string{"MutatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1beta1) cascade-default-propagation: deleted\n",
				"MutatingAdmissionPolicy (admissionregistration.k8s.io/v1beta1) cascade-default-propagation: deleted\n"}},
		{"both", features.Admission{V1: true, V1beta1: true},
			[]string{"delete v1/mutatingadmissionpolicybindings", "delete v1/mutatingadmissionpolicies", "delete v1beta1/mutatingadmissionpolicybindings", "delete v1beta1/mutatingadmissionpolicies"},
			[]string{"MutatingAdmissionPolicy cascade-default-propagation: deleted\n", "MutatingAdmissionPolicy (admissionregistration.k8s.io/v1beta1) cascade-default-propagation: deleted\n"}},
		{"neither", features.Admission{}, nil,
			[]string{"MutatingAdmissionPolicy cascade-default-propagation: none (the API server serves no MutatingAdmissionPolicy"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newUninstallFixture(t, true, beta...)
			f.u.admission = func() (features.Admission, error) { return tt.served, nil }
			var out strings.Builder
			if err := f.u.run(context.Background(), &out); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			var got []string
			for _, a := range f.kube.Actions() {
				if a.GetVerb() == "delete" {
					got = append(got, "delete "+a.GetResource().Version+"/"+a.GetResource().Resource)
				}
			}
			if !slices.Equal(got, tt.wantWrites) {
				t.Errorf("deletes %q, want %q", got, tt.wantWrites)
			}
			for _, want := range tt.wantOut {
				if !strings.Contains(out.String(), want) {
					t.Errorf("report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
	f := newUninstallFixture(t, true)
	f.u.admission = func() (features.Admission, error) { return features.Admission{}, errors.New("discovery down") }
	var out strings.Builder
	if err := f.u.run(context.Background(), &out); err == nil || !strings.Contains(err.Error(), "cannot tell which versions") {
		t.Errorf("uninstall with discovery down = %v, want it incomplete", err)
	}
}

// TestUninstallLeavesOthersAdmission: admission objects of that name not labelled as cascade's
// are left alone (and said so); the stamps still go.
func TestUninstallLeavesOthersAdmission(t *testing.T) {
	f := newUninstallFixture(t, false)
	var out strings.Builder
	if err := f.u.run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	for _, w := range f.writes() {
		if strings.HasPrefix(w, "delete") {
			t.Errorf("deleted an admission object that is not cascade's: %q", f.writes())
		}
	}
	if !strings.Contains(out.String(), "MutatingAdmissionPolicy cascade-default-propagation: left alone, not labelled app.kubernetes.io/managed-by=cascade") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestUninstallRefusesWhileCascadeRuns: a held Lease renewed within its duration means cascade
// is running, and uninstall writes nothing; an expired or released one, or --force, lets it go.
func TestUninstallRefusesWhileCascadeRuns(t *testing.T) {
	lease := func(holder string, renewedAgo time.Duration) *coordinationv1.Lease {
		return heldLease("cascade-system", holder, renewedAgo)
	}
	for _, tt := range []struct {
		name    string
		lease   *coordinationv1.Lease
		force   bool
		refused bool
	}{
		{"held", lease("cascade-7d9f", 3*time.Second), false, true},
		{"held, --force", lease("cascade-7d9f", 3*time.Second), true, false},
		{"expired", lease("cascade-7d9f", 20*time.Second), false, false},
		{"released", lease("", time.Second), false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newUninstallFixture(t, true, tt.lease)
			f.u.force = tt.force
			var out strings.Builder
			err := f.u.run(context.Background(), &out)
			if tt.refused {
				if err == nil || !strings.Contains(err.Error(), "cascade is running: the Lease cascade-system/cascade is held by cascade-7d9f, renewed 3s ago") {
					t.Errorf("err = %v, want a refusal", err)
				}
				if w := f.writes(); len(w) != 0 {
					t.Errorf("refused, yet wrote %q", w)
				}
				return
			}
			if err != nil || len(f.writes()) == 0 {
				t.Errorf("err = %v, writes %q; want it done", err, f.writes())
			}
		})
	}
}

func sameElements(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// regexpLine reports whether some line of s matches re.
func regexpLine(s, re string) bool {
	r := regexp.MustCompile(re)
	for line := range strings.Lines(s) {
		if r.MatchString(strings.TrimRight(line, "\n")) {
			return true
		}
	}
	return false
}

// TestUninstallIgnoresOwnAggregatedAPI: with cascade scaled to zero, its own aggregated API
// (debug.cascade.dev) cannot be discovered; that alone is no reason to call the uninstall
// incomplete, while any other group that fails still is.
func TestUninstallIgnoresOwnAggregatedAPI(t *testing.T) {
	own := schema.GroupVersion{Group: debugGroup, Version: "v1alpha1"}
	other := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	for _, tc := range []struct {
		name       string
		failed     []schema.GroupVersion
		incomplete bool
	}{
		{"own group only", []schema.GroupVersion{own}, false},
		{"another group too", []schema.GroupVersion{own, other}, true},
		{"another group only", []schema.GroupVersion{other}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newUninstallFixture(t, true)
			lists, _ := f.u.resources()
			groups := map[schema.GroupVersion]error{}
			for _, gv := range tc.failed {
				groups[gv] = errors.New("the server is currently unable to handle the request")
			}
			f.u.resources = func() ([]*metav1.APIResourceList, error) {
				return lists, &discovery.ErrGroupDiscoveryFailed{Groups: groups}
			}
			var out strings.Builder
			err := f.u.run(context.Background(), &out)
			if got := err != nil; got != tc.incomplete {
				t.Fatalf("uninstall: error %v, want an error %v\n%s", err, tc.incomplete, out.String())
			}
			if tc.incomplete && (!strings.Contains(err.Error(), other.String()) || strings.Contains(err.Error(), debugGroup)) {
				t.Errorf("the error names %q, want %s and not %s", err, other, debugGroup)
			}
			if m := f.live(t, clienttest.Widgets, "ns1", "stamped-orphan"); slices.Contains(m.Finalizers, "orphan") {
				t.Errorf("the stamped finalizer stayed: %q", m.Finalizers)
			}
		})
	}
}

// TestUninstallFailsClosed (issue 31.3): no Lease is "cannot tell", never "not running": with
// the default --lease (the name, in every namespace) a Lease held in another namespace refuses,
// and no Lease anywhere refuses too, unless --force. Nothing is written when refused.
func TestUninstallFailsClosed(t *testing.T) {
	for _, tt := range []struct {
		name    string
		lease   *coordinationv1.Lease
		ns      string // --lease's namespace ("": every namespace)
		force   bool
		refusal string
	}{
		{"held elsewhere", heldLease("platform", "cascade-1", 2*time.Second), "", false, "the Lease platform/cascade is held by cascade-1"},
		{"released elsewhere", heldLease("platform", "", 0), "", false, ""},
		{"none anywhere", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "other"}}, "", false, "no Lease cascade in any namespace"},
		{"none where named", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "other"}}, "cascade-system", false, "no Lease cascade-system/cascade"},
		{"none, --force", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "other"}}, "", true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newUninstallFixture(t, true, tt.lease)
			f.u.leaseNamespace, f.u.force = tt.ns, tt.force
			var out strings.Builder
			err := f.u.run(context.Background(), &out)
			if tt.refusal == "" {
				if err != nil || len(f.writes()) == 0 {
					t.Errorf("err = %v, writes %q; want it done", err, f.writes())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.refusal) {
				t.Errorf("err = %v, want a refusal naming %q", err, tt.refusal)
			}
			if w := f.writes(); len(w) != 0 {
				t.Errorf("refused, yet wrote %q", w)
			}
		})
	}
}

// TestUninstallStopsTheDeployment (issue 31.3, the chart's pre-delete hook): --stop-deployment
// scales cascade's Deployment to zero, waits until its pods are gone and its Lease is free (here
// released by the leader on its way out, two seconds later), then uninstalls. A Deployment whose
// pods never go is a refusal after --wait, with nothing of cascade's removed.
func TestUninstallStopsTheDeployment(t *testing.T) {
	deployment := func() *appsv1.Deployment {
		two := int32(2)
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "cascade-system", Name: "cascade"},
			Spec:       appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "cascade"}}},
		}
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "cascade-system", Name: name, Labels: map[string]string{"app.kubernetes.io/name": "cascade"}}}
	}
	// The scale goes through the edge (the metadata client: a merge patch of the Deployment),
	// which holds the Deployment too.
	inMeta := func(f *uninstallFixture) {
		t.Helper()
		if err := f.meta.Tracker().Add(&metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "cascade-system", Name: "cascade", UID: "dep-uid"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("stops", func(t *testing.T) {
		f := newUninstallFixture(t, true, deployment(), pod("cascade-a"), pod("cascade-b"), heldLease("cascade-system", "cascade-a", time.Second))
		inMeta(f)
		f.u.stopNamespace, f.u.stopName, f.u.wait = "cascade-system", "cascade", time.Minute
		ctx := context.Background()
		f.onSleep = func(n int) {
			switch n {
			case 1: // the kubelet stops the pods; the leader releases its Lease
				_ = f.kube.CoreV1().Pods("cascade-system").Delete(ctx, "cascade-a", metav1.DeleteOptions{})
				_ = f.kube.CoreV1().Pods("cascade-system").Delete(ctx, "cascade-b", metav1.DeleteOptions{})
			case 3:
				_, _ = f.kube.CoordinationV1().Leases("cascade-system").Update(ctx, heldLease("cascade-system", "", 0), metav1.UpdateOptions{})
			}
		}
		var out strings.Builder
		if err := f.u.run(ctx, &out); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		scaled := false
		for _, a := range f.meta.Actions() {
			if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "deployments" && string(p.GetPatch()) == `{"spec":{"replicas":0}}` {
				scaled = true
			}
		}
		if !scaled {
			t.Errorf("no patch scaling the Deployment to zero among %v", f.meta.Actions())
		}
		if !strings.Contains(out.String(), "Stopped the Deployment cascade-system/cascade") {
			t.Errorf("output does not say the Deployment stopped:\n%s", out.String())
		}
		if _, err := f.kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, policy.AdmissionName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the admission policy is still there: %v", err)
		}
	})
	t.Run("pods never go", func(t *testing.T) {
		f := newUninstallFixture(t, true, deployment(), pod("cascade-a"))
		inMeta(f)
		f.u.stopNamespace, f.u.stopName, f.u.wait = "cascade-system", "cascade", 10*time.Second
		var out strings.Builder
		err := f.u.run(context.Background(), &out)
		if err == nil || !strings.Contains(err.Error(), "1 of its pods are still there after 10s") {
			t.Errorf("err = %v, want a refusal after the wait", err)
		}
		for _, w := range f.writes() {
			if w != "patch deployments" {
				t.Errorf("refused, yet wrote %s", w)
			}
		}
	})
}

// TestUninstallFleetMember: on a fleet member, which has no Lease of cascade's (a fleet's Leases
// are in its host), `cascade uninstall` refuses by default (fail closed) and runs with
// --fleet-member, saying why no Lease was looked for; --fleet-member with --lease or
// --stop-deployment is a usage error that touches nothing.
func TestUninstallFleetMember(t *testing.T) {
	member := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "other"}}
	f := newUninstallFixture(t, true, member)
	if err := f.u.run(context.Background(), io.Discard); err == nil || !strings.Contains(err.Error(), "no Lease") {
		t.Fatalf("on a member without --fleet-member: %v, want the refusal", err)
	}
	f = newUninstallFixture(t, true, member)
	f.u.fleetMember, f.u.leaseName = true, "" // what --fleet-member sets
	var out strings.Builder
	if err := f.u.run(context.Background(), &out); err != nil {
		t.Fatalf("with --fleet-member: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "Fleet member: no Lease looked for") || len(f.writes()) == 0 {
		t.Errorf("with --fleet-member: writes %q, output\n%s", f.writes(), out.String())
	}
	for _, args := range [][]string{{"--fleet-member", "--lease=ns/cascade"}, {"--fleet-member", "--stop-deployment=ns/cascade"}} {
		cmd := newUninstallCommand()
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		var usage *usageError
		if err := cmd.Execute(); !errors.As(err, &usage) || !strings.Contains(err.Error(), "--fleet-member takes neither") {
			t.Errorf("%v: %v, want the usage error", args, err)
		}
	}
}
