package client

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cascade-gc/cascade/internal/client/clienttest"
	"github.com/cascade-gc/cascade/policy"
)

// TestStampDefault: the stamp is planned on the live object and written with its
// resourceVersion; every other finalizer and annotation stays; an object being deleted,
// replaced or gone is never written to.
func TestStampDefault(t *testing.T) {
	const get = "GET widgets.v1.example.com ns1/w"
	now := metav1.Now()
	for _, tt := range []struct {
		name       string
		finalizers []string
		stamped    string
		deleting   bool
		uid        string
		want       metav1.DeletionPropagation
		wantPatch  string // "" none
		wantFins   []string
		wantAnno   string
	}{
		{
			name: "stamp Orphan", finalizers: []string{"example.com/keep"}, want: metav1.DeletePropagationOrphan,
			wantPatch: `{"metadata":{"resourceVersion":"7","finalizers":["example.com/keep","orphan"],"annotations":{"cascade.dev/default-propagation":"Orphan"}}}`,
			wantFins:  []string{"example.com/keep", "orphan"}, wantAnno: "Orphan",
		},
		{
			name: "unstamp: only the stamped finalizer goes", finalizers: []string{"a/x", "foregroundDeletion", "b/y"}, stamped: "Foreground",
			wantPatch: `{"metadata":{"resourceVersion":"7","finalizers":["a/x","b/y"],"annotations":{"cascade.dev/default-propagation":null}}}`,
			wantFins:  []string{"a/x", "b/y"},
		},
		{
			name: "being deleted: untouched", finalizers: []string{"a/x"}, deleting: true, want: metav1.DeletePropagationOrphan,
			wantFins: []string{"a/x"},
		},
		{
			name: "another object at the name: untouched", uid: "other", want: metav1.DeletePropagationOrphan,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			uid := "w-uid"
			if tt.uid != "" {
				uid = tt.uid
			}
			w := widget("ns1", "w", types.UID(uid), "7")
			w.Finalizers = slices.Clone(tt.finalizers)
			w.Annotations = map[string]string{"keep": "me"}
			if tt.stamped != "" {
				w.Annotations[policy.DefaultPropagationAnnotation] = tt.stamped
			}
			if tt.deleting {
				w.DeletionTimestamp = &now
			}
			fake := clienttest.NewFake(w)
			plan, err := StampDefault(context.Background(), New(fake), Target{GVR: widgets, Namespace: "ns1", Name: "w", UID: "w-uid"}, tt.want)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{get}
			if tt.wantPatch != "" {
				want = append(want, "PATCH widgets.v1.example.com ns1/w merge "+tt.wantPatch)
			}
			if got := clienttest.Actions(fake); !slices.Equal(got, want) {
				t.Errorf("actions:\n%q\nwant\n%q", got, want)
			}
			if plan.Change != (tt.wantPatch != "") {
				t.Errorf("plan %+v, want a change: %t", plan, tt.wantPatch != "")
			}
			if tt.uid != "" {
				return
			}
			live, err := clienttest.Live(fake, widgets, "ns1", "w")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(live.Finalizers, tt.wantFins) || live.Annotations["keep"] != "me" || live.Annotations[policy.DefaultPropagationAnnotation] != tt.wantAnno {
				t.Errorf("after: finalizers %q annotations %v; want finalizers %q stamp %q", live.Finalizers, live.Annotations, tt.wantFins, tt.wantAnno)
			}
		})
	}
}

// TestStampDefaultConflict: a 409 (the object changed: here a delete reached it between the
// read and the patch) is answered with a new read and a new plan, which finds the object being
// deleted and writes nothing: the stamp never lands on an object being deleted.
func TestStampDefaultConflict(t *testing.T) {
	fake := clienttest.NewFake(widget("ns1", "w", "w-uid", "7"))
	patches := 0
	fake.PrependReactor("patch", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		patches++
		obj, err := fake.Tracker().Get(widgets, "ns1", "w") // not through the fake: its lock is held
		if err != nil {
			t.Fatal(err)
		}
		live := obj.(*metav1.PartialObjectMetadata).DeepCopy()
		now := metav1.Now()
		live.DeletionTimestamp, live.ResourceVersion = &now, "8"
		if err := fake.Tracker().Update(widgets, live, "ns1"); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(widgets.GroupResource(), "w", nil)
	})
	plan, err := StampDefault(context.Background(), New(fake), Target{GVR: widgets, Namespace: "ns1", Name: "w", UID: "w-uid"}, metav1.DeletePropagationOrphan)
	if err != nil || plan.Change || patches != 1 {
		t.Fatalf("StampDefault = %+v, %v after %d patches; want nothing done after the one conflict", plan, err, patches)
	}
	if live, _ := clienttest.Live(fake, widgets, "ns1", "w"); len(live.Finalizers) != 0 || live.Annotations[policy.DefaultPropagationAnnotation] != "" {
		t.Errorf("the object being deleted was stamped: %+v", live.ObjectMeta)
	}
}

// TestUnstampDefault: uninstall's unstamp removes the finalizer the annotation records and the
// annotation, and nothing else: a user's own finalizers stay in place, a user's orphan or
// foregroundDeletion finalizer the annotation does not record stays, an object without the
// annotation, being deleted or replaced is not written to. The first patch is planned on the
// listed object (no GET) at its resourceVersion.
func TestUnstampDefault(t *testing.T) {
	now := metav1.Now()
	for _, tt := range []struct {
		name       string
		finalizers []string
		stamped    string
		deleting   bool
		uid        string
		wantPatch  string // "" none
		wantFins   []string
	}{
		{
			name: "stamped Orphan, among a user's finalizers", finalizers: []string{"example.com/a", "orphan", "example.com/b"}, stamped: "Orphan",
			wantPatch: `{"metadata":{"resourceVersion":"7","finalizers":["example.com/a","example.com/b"],"annotations":{"cascade.dev/default-propagation":null}}}`,
			wantFins:  []string{"example.com/a", "example.com/b"},
		},
		{
			name: "recorded Foreground, but the orphan finalizer is the user's", finalizers: []string{"orphan"}, stamped: "Foreground",
			wantPatch: `{"metadata":{"resourceVersion":"7","finalizers":["orphan"],"annotations":{"cascade.dev/default-propagation":null}}}`,
			wantFins:  []string{"orphan"},
		},
		{
			name: "opted out (finalizer removed by hand): only the annotation goes", finalizers: []string{"example.com/a"}, stamped: "Orphan",
			wantPatch: `{"metadata":{"resourceVersion":"7","finalizers":["example.com/a"],"annotations":{"cascade.dev/default-propagation":null}}}`,
			wantFins:  []string{"example.com/a"},
		},
		{name: "not stamped: a user's orphan finalizer untouched", finalizers: []string{"orphan"}, wantFins: []string{"orphan"}},
		{name: "being deleted: untouched", finalizers: []string{"orphan"}, stamped: "Orphan", deleting: true, wantFins: []string{"orphan"}},
		{name: "another object at the name: untouched", finalizers: []string{"orphan"}, stamped: "Orphan", uid: "other", wantFins: []string{"orphan"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			uid := "w-uid"
			if tt.uid != "" {
				uid = tt.uid
			}
			w := widget("ns1", "w", types.UID(uid), "7")
			w.Finalizers = slices.Clone(tt.finalizers)
			w.Annotations = map[string]string{"keep": "me"}
			if tt.stamped != "" {
				w.Annotations[policy.DefaultPropagationAnnotation] = tt.stamped
			}
			if tt.deleting {
				w.DeletionTimestamp = &now
			}
			fake := clienttest.NewFake(w.DeepCopy())
			plan, err := UnstampDefault(context.Background(), New(fake), Target{GVR: widgets, Namespace: "ns1", Name: "w", UID: "w-uid"}, w)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			if tt.wantPatch != "" {
				want = append(want, "PATCH widgets.v1.example.com ns1/w merge "+tt.wantPatch)
			}
			if got := clienttest.Actions(fake); !slices.Equal(got, want) {
				t.Errorf("actions:\n%q\nwant\n%q", got, want)
			}
			if plan.Change != (tt.wantPatch != "") {
				t.Errorf("plan %+v, want a change: %t", plan, tt.wantPatch != "")
			}
			live, err := clienttest.Live(fake, widgets, "ns1", "w")
			if err != nil {
				t.Fatal(err)
			}
			wantAnno := tt.stamped
			if tt.wantPatch != "" {
				wantAnno = ""
			}
			if !slices.Equal(live.Finalizers, tt.wantFins) || live.Annotations["keep"] != "me" || live.Annotations[policy.DefaultPropagationAnnotation] != wantAnno {
				t.Errorf("after: finalizers %q annotations %v; want finalizers %q stamp %q", live.Finalizers, live.Annotations, tt.wantFins, wantAnno)
			}
		})
	}
}

// TestUnstampDefaultConflict: the listed object is stale (the user added a finalizer since):
// the patch at the listed resourceVersion fails with 409, the live object is read, and the
// retry keeps the user's new finalizer.
func TestUnstampDefaultConflict(t *testing.T) {
	listed := widget("ns1", "w", "w-uid", "7")
	listed.Finalizers = []string{"orphan"}
	listed.Annotations = map[string]string{policy.DefaultPropagationAnnotation: "Orphan"}
	live := listed.DeepCopy()
	live.Finalizers = []string{"orphan", "example.com/new"}
	live.ResourceVersion = "8"
	fake := clienttest.NewFake(live)
	fake.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if strings.Contains(string(a.(clienttesting.PatchAction).GetPatch()), `"resourceVersion":"7"`) {
			return true, nil, apierrors.NewConflict(widgets.GroupResource(), "w", nil)
		}
		return false, nil, nil
	})
	plan, err := UnstampDefault(context.Background(), New(fake), Target{GVR: widgets, Namespace: "ns1", Name: "w", UID: "w-uid"}, listed)
	if err != nil || !plan.Change || plan.Removed != "orphan" {
		t.Fatalf("UnstampDefault = %+v, %v; want the orphan finalizer removed", plan, err)
	}
	got, _ := clienttest.Live(fake, widgets, "ns1", "w")
	if !slices.Equal(got.Finalizers, []string{"example.com/new"}) || got.Annotations[policy.DefaultPropagationAnnotation] != "" {
		t.Errorf("after the retry: %+v", got.ObjectMeta)
	}
}
