package client

import (
	"github.com/cascade-gc/cascade/internal/client/clienttest"

	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metadatafake "k8s.io/client-go/metadata/fake"
)

func boolPtr(b bool) *bool { return &b }

func TestDeleteOwnerRefsSMP(t *testing.T) {
	tests := []struct {
		name   string
		owners []types.UID
		want   string
	}{
		{
			name:   "one owner",
			owners: []types.UID{"o1"},
			want:   `{"metadata":{"uid":"dep","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
		},
		{
			name:   "several owners keep their order",
			owners: []types.UID{"o2", "o1"},
			want:   `{"metadata":{"uid":"dep","ownerReferences":[{"$patch":"delete","uid":"o2"},{"$patch":"delete","uid":"o1"}]}}`,
		},
		{
			name: "no owner is an empty list",
			want: `{"metadata":{"uid":"dep","ownerReferences":[]}}`,
		},
		{
			name:   "JSON special characters are escaped",
			owners: []types.UID{`a"b`},
			want:   `{"metadata":{"uid":"dep","ownerReferences":[{"$patch":"delete","uid":"a\"b"}]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(deleteOwnerRefsSMP("dep", "", tt.owners...)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestDeleteOwnerRefsJMP(t *testing.T) {
	ctrl := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "o1", Controller: boolPtr(true), BlockOwnerDeletion: boolPtr(true)}
	tests := []struct {
		name      string
		remaining []metav1.OwnerReference
		want      string
	}{
		{
			name:      "remaining references are written in full",
			remaining: []metav1.OwnerReference{ctrl, ownerRef("o2", nil)},
			want: `{"metadata":{"resourceVersion":"42","ownerReferences":[` +
				`{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"o1","controller":true,"blockOwnerDeletion":true},` +
				`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o2","uid":"o2"}]}}`,
		},
		{
			name: "no remaining reference is an empty list, not null",
			want: `{"metadata":{"resourceVersion":"42","ownerReferences":[]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(deleteOwnerRefsJMP("42", tt.remaining)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestUnblockOwnerRefsSMP(t *testing.T) {
	refs := []metav1.OwnerReference{ownerRef("o1", boolPtr(true)), ownerRef("o2", nil), ownerRef("o3", boolPtr(false)), ownerRef("o4", boolPtr(true))}
	want := `{"metadata":{"uid":"dep","resourceVersion":"7","ownerReferences":[` +
		`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o1","uid":"o1","blockOwnerDeletion":false},` +
		`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o4","uid":"o4","blockOwnerDeletion":false}]}}`
	if got := string(unblockOwnerRefsSMP("dep", "7", refs)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !*refs[0].BlockOwnerDeletion || !*refs[3].BlockOwnerDeletion {
		t.Error("unblockOwnerRefsSMP modified the caller's references")
	}
	if got, want := string(unblockOwnerRefsSMP("dep", "", refs[1:3])), `{"metadata":{"uid":"dep","ownerReferences":[]}}`; got != want {
		t.Errorf("without blocking refs: got %s, want %s", got, want)
	}
}

func TestUnblockOwnerRefsJMP(t *testing.T) {
	refs := []metav1.OwnerReference{ownerRef("o1", boolPtr(true)), ownerRef("o2", nil), ownerRef("o3", boolPtr(false))}
	want := `{"metadata":{"resourceVersion":"7","ownerReferences":[` +
		`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o1","uid":"o1","blockOwnerDeletion":false},` +
		`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o2","uid":"o2"},` +
		`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o3","uid":"o3","blockOwnerDeletion":false}]}}`
	if got := string(unblockOwnerRefsJMP("7", refs)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !*refs[0].BlockOwnerDeletion {
		t.Error("unblockOwnerRefsJMP modified the caller's references")
	}
	if got, want := string(unblockOwnerRefsJMP("7", nil)), `{"metadata":{"resourceVersion":"7","ownerReferences":[]}}`; got != want {
		t.Errorf("no refs: got %s, want %s", got, want)
	}
}

func TestRemoveFinalizerJMPBody(t *testing.T) {
	tests := []struct {
		name      string
		remaining []string
		want      string
	}{
		{name: "other finalizers are kept", remaining: []string{"example.com/cleanup", metav1.FinalizerOrphanDependents}, want: `{"metadata":{"resourceVersion":"9","finalizers":["example.com/cleanup","orphan"]}}`},
		{name: "nil is an empty list", remaining: nil, want: `{"metadata":{"resourceVersion":"9","finalizers":[]}}`},
		{name: "empty is an empty list", remaining: []string{}, want: `{"metadata":{"resourceVersion":"9","finalizers":[]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(removeFinalizerJMP("9", tt.remaining)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

var (
	widgets       = clienttest.Widgets
	clusterRoles  = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	widget        = clienttest.Widget
	newFakeClient = clienttest.NewFake
	unsupportSMP  = clienttest.UnsupportSMP
	rejectPatch   = clienttest.RejectPatch
	failGet       = clienttest.FailGet
	actions       = clienttest.Actions
	ownerRef      = clienttest.OwnerRef
)

func liveRefs(t *testing.T, c *metadatafake.FakeMetadataClient, gvr schema.GroupVersionResource, ns, name string) []types.UID {
	t.Helper()
	uids, err := clienttest.LiveOwners(c, gvr, ns, name)
	if err != nil {
		t.Fatalf("get %s/%s: %v", ns, name, err)
	}
	return uids
}

func TestRemoveOwnerRefs(t *testing.T) {
	const (
		smpType = "strategic"
		jmpType = "merge"
		res     = "widgets.v1.example.com"
	)
	three := []metav1.OwnerReference{ownerRef("o1", nil), ownerRef("o2", boolPtr(true)), ownerRef("o3", nil)}
	tests := []struct {
		name        string
		objs        []runtime.Object
		setup       func(*metadatafake.FakeMetadataClient)
		owners      []types.UID
		wantErr     func(error) bool
		wantActions []string
		wantRefs    []types.UID // nil: do not check
	}{
		{
			name:   "strategic merge patch removes the references",
			objs:   []runtime.Object{widget("ns1", "dep", "dep-uid", "7", three...)},
			owners: []types.UID{"o1", "o3"},
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"},{"$patch":"delete","uid":"o3"}]}}`,
			},
			wantRefs: []types.UID{"o2"},
		},
		{
			name:        "no owners to remove sends nothing",
			objs:        []runtime.Object{widget("ns1", "dep", "dep-uid", "7", three...)},
			wantActions: nil,
			wantRefs:    []types.UID{"o1", "o2", "o3"},
		},
		{
			name:   "object gone is done",
			owners: []types.UID{"o1"},
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
			},
		},
		{
			name:   "415 falls back to a merge patch carrying the live resourceVersion",
			objs:   []runtime.Object{widget("ns1", "dep", "dep-uid", "7", three...)},
			setup:  unsupportSMP,
			owners: []types.UID{"o2"},
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o2"}]}}`,
				"GET " + res + " ns1/dep",
				"PATCH " + res + " ns1/dep " + jmpType + ` {"metadata":{"resourceVersion":"7","ownerReferences":[` +
					`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o1","uid":"o1"},` +
					`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o3","uid":"o3"}]}}`,
			},
			wantRefs: []types.UID{"o1", "o3"},
		},
		{
			name:   "415 fallback removing the last reference writes an empty list",
			objs:   []runtime.Object{widget("ns1", "dep", "dep-uid", "7", ownerRef("o1", nil))},
			setup:  unsupportSMP,
			owners: []types.UID{"o1"},
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
				"GET " + res + " ns1/dep",
				"PATCH " + res + " ns1/dep " + jmpType + ` {"metadata":{"resourceVersion":"7","ownerReferences":[]}}`,
			},
			wantRefs: []types.UID{},
		},
		{
			name:   "415 and the name now holds another object: never touch it",
			objs:   []runtime.Object{widget("ns1", "dep", "other-uid", "8", three...)},
			setup:  unsupportSMP,
			owners: []types.UID{"o1"},
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
				"GET " + res + " ns1/dep",
			},
			wantRefs: []types.UID{"o1", "o2", "o3"},
		},
		{
			name:   "415 and the references are already gone: no merge patch",
			objs:   []runtime.Object{widget("ns1", "dep", "dep-uid", "8", ownerRef("o2", nil))},
			setup:  unsupportSMP,
			owners: []types.UID{"o1"},
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
				"GET " + res + " ns1/dep",
			},
			wantRefs: []types.UID{"o2"},
		},
		{
			name:   "415 and the object is gone by the GET: done",
			setup:  unsupportSMP,
			owners: []types.UID{"o1"},
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
				"GET " + res + " ns1/dep",
			},
		},
		{
			name: "415 and the GET fails: the error is returned",
			objs: []runtime.Object{widget("ns1", "dep", "dep-uid", "7", three...)},
			setup: func(c *metadatafake.FakeMetadataClient) {
				unsupportSMP(c)
				failGet(c, apierrors.NewServiceUnavailable("etcd"))
			},
			owners:  []types.UID{"o1"},
			wantErr: apierrors.IsServiceUnavailable,
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
				"GET " + res + " ns1/dep",
			},
		},
		{
			name: "415 and a conflict on the merge patch: the 409 is returned",
			objs: []runtime.Object{widget("ns1", "dep", "dep-uid", "7", three...)},
			setup: func(c *metadatafake.FakeMetadataClient) {
				unsupportSMP(c)
				rejectPatch(c, types.MergePatchType, apierrors.NewConflict(widgets.GroupResource(), "dep", fmt.Errorf("the object has been modified")))
			},
			owners:  []types.UID{"o1"},
			wantErr: apierrors.IsConflict,
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
				"GET " + res + " ns1/dep",
				"PATCH " + res + " ns1/dep " + jmpType + ` {"metadata":{"resourceVersion":"7","ownerReferences":[` +
					`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o2","uid":"o2","blockOwnerDeletion":true},` +
					`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o3","uid":"o3"}]}}`,
			},
			wantRefs: []types.UID{"o1", "o2", "o3"},
		},
		{
			name: "a UID mismatch rejected by the server (422) is returned, with no fallback",
			objs: []runtime.Object{widget("ns1", "dep", "other-uid", "7", three...)},
			setup: func(c *metadatafake.FakeMetadataClient) {
				rejectPatch(c, types.StrategicMergePatchType, apierrors.NewInvalid(schema.GroupKind{Group: "example.com", Kind: "Widget"}, "dep",
					field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "dep-uid", "field is immutable")}))
			},
			owners:  []types.UID{"o1"},
			wantErr: apierrors.IsInvalid,
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
			},
			wantRefs: []types.UID{"o1", "o2", "o3"},
		},
		{
			name: "other errors are returned",
			objs: []runtime.Object{widget("ns1", "dep", "dep-uid", "7", three...)},
			setup: func(c *metadatafake.FakeMetadataClient) {
				rejectPatch(c, types.StrategicMergePatchType, apierrors.NewForbidden(widgets.GroupResource(), "dep", fmt.Errorf("denied")))
			},
			owners:  []types.UID{"o1"},
			wantErr: apierrors.IsForbidden,
			wantActions: []string{
				"PATCH " + res + " ns1/dep " + smpType + ` {"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`,
			},
			wantRefs: []types.UID{"o1", "o2", "o3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeClient(tt.objs...)
			if tt.setup != nil {
				tt.setup(fake)
			}
			err := RemoveOwnerRefs(context.Background(), New(fake), Target{GVR: widgets, Namespace: "ns1", Name: "dep", UID: "dep-uid"}, tt.owners)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("RemoveOwnerRefs() = %v, want nil", err)
			case tt.wantErr != nil && !tt.wantErr(err):
				t.Fatalf("RemoveOwnerRefs() = %v, want a matching error", err)
			}
			if got := actions(fake); !slices.Equal(got, tt.wantActions) {
				t.Errorf("actions:\n%q\nwant\n%q", got, tt.wantActions)
			}
			if tt.wantRefs != nil {
				fake.ClearActions()
				got := liveRefs(t, fake, widgets, "ns1", "dep")
				if len(got) != len(tt.wantRefs) || (len(got) > 0 && !reflect.DeepEqual(got, tt.wantRefs)) {
					t.Errorf("owner refs after = %v, want %v", got, tt.wantRefs)
				}
			}
		})
	}
}

func TestRemoveOwnerRefsClusterScoped(t *testing.T) {
	role := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: "r", UID: "r-uid", OwnerReferences: []metav1.OwnerReference{ownerRef("o1", nil), ownerRef("o2", nil)}},
	}
	fake := newFakeClient(role)
	if err := RemoveOwnerRefs(context.Background(), New(fake), Target{GVR: clusterRoles, Name: "r", UID: "r-uid"}, []types.UID{"o1"}); err != nil {
		t.Fatal(err)
	}
	want := []string{`PATCH clusterroles.v1.rbac.authorization.k8s.io /r strategic {"metadata":{"uid":"r-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`}
	if got := actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}
	if got := liveRefs(t, fake, clusterRoles, "", "r"); !slices.Equal(got, []types.UID{"o2"}) {
		t.Errorf("owner refs after = %v, want [o2]", got)
	}
}

var depTarget = Target{GVR: widgets, Namespace: "ns1", Name: "dep", UID: "dep-uid"}

func TestUnblockOwnerRefs(t *testing.T) {
	refs := []metav1.OwnerReference{ownerRef("o1", boolPtr(true)), ownerRef("o2", nil)}
	blockingOf := func(t *testing.T, c *metadatafake.FakeMetadataClient) []bool {
		t.Helper()
		obj, err := c.Resource(widgets).Namespace("ns1").Get(context.Background(), "dep", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []bool
		for _, r := range obj.OwnerReferences {
			out = append(out, blocks(r))
		}
		return out
	}

	t.Run("strategic merge patch unblocks", func(t *testing.T) {
		fake := newFakeClient(widget("ns1", "dep", "dep-uid", "7", refs...))
		if err := UnblockOwnerRefs(context.Background(), New(fake), depTarget, "7", refs); err != nil {
			t.Fatal(err)
		}
		if got := len(fake.Actions()); got != 1 {
			t.Errorf("got %d actions, want 1: %q", got, actions(fake))
		}
		if got := blockingOf(t, fake); !slices.Equal(got, []bool{false, false}) {
			t.Errorf("blocking after = %v", got)
		}
	})

	t.Run("415 and a reference added after the decision: nothing sent, decide again", func(t *testing.T) {
		// The live object gained a blocking reference the decision did not see (issue 22, item
		// 2): a merge patch built from the live list would unblock it too, and a later
		// foreground delete of that owner would finish without waiting for dep.
		live := append(slices.Clone(refs), ownerRef("o3", boolPtr(true)))
		fake := newFakeClient(widget("ns1", "dep", "dep-uid", "8", live...))
		unsupportSMP(fake)
		err := UnblockOwnerRefs(context.Background(), New(fake), depTarget, "7", refs)
		if !errors.Is(err, ErrRefsChanged) {
			t.Fatalf("err = %v, want ErrRefsChanged", err)
		}
		if got := actions(fake); len(got) != 2 || !strings.HasPrefix(got[1], "GET ") {
			t.Errorf("actions = %q, want the strategic merge patch and the get only", got)
		}
		if got := blockingOf(t, fake); !slices.Equal(got, []bool{true, false, true}) {
			t.Errorf("blocking after = %v, want unchanged", got)
		}
	})

	t.Run("415 and a reference dropped after the decision: nothing sent", func(t *testing.T) {
		fake := newFakeClient(widget("ns1", "dep", "dep-uid", "8", refs[0]))
		unsupportSMP(fake)
		if err := UnblockOwnerRefs(context.Background(), New(fake), depTarget, "7", refs); !errors.Is(err, ErrRefsChanged) {
			t.Fatalf("err = %v, want ErrRefsChanged", err)
		}
		if got := blockingOf(t, fake); !slices.Equal(got, []bool{true}) {
			t.Errorf("blocking after = %v, want unchanged", got)
		}
	})

	t.Run("415 and the references the decision saw: merge patch at the live resourceVersion", func(t *testing.T) {
		// Only the resourceVersion moved on (a label changed); an explicit false flag and an
		// identical duplicate are the same references as the view's.
		live := []metav1.OwnerReference{refs[0], refs[0], refs[1]}
		live[2].BlockOwnerDeletion = boolPtr(false)
		fake := newFakeClient(widget("ns1", "dep", "dep-uid", "8", live...))
		unsupportSMP(fake)
		if err := UnblockOwnerRefs(context.Background(), New(fake), depTarget, "7", refs); err != nil {
			t.Fatal(err)
		}
		got := actions(fake)
		want := `PATCH widgets.v1.example.com ns1/dep merge {"metadata":{"resourceVersion":"8","ownerReferences":[` +
			`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o1","uid":"o1","blockOwnerDeletion":false},` +
			`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o1","uid":"o1","blockOwnerDeletion":false},` +
			`{"apiVersion":"example.com/v1","kind":"Widget","name":"w-o2","uid":"o2","blockOwnerDeletion":false}]}}`
		if len(got) != 3 || got[2] != want {
			t.Errorf("actions:\n%q\nwant last\n%q", got, want)
		}
		if got := blockingOf(t, fake); !slices.Equal(got, []bool{false, false, false}) {
			t.Errorf("blocking after = %v", got)
		}
	})

	t.Run("nothing blocking sends nothing", func(t *testing.T) {
		fake := newFakeClient(widget("ns1", "dep", "dep-uid", "7", refs[1]))
		if err := UnblockOwnerRefs(context.Background(), New(fake), depTarget, "7", refs[1:]); err != nil {
			t.Fatal(err)
		}
		if got := actions(fake); len(got) != 0 {
			t.Errorf("actions = %q, want none", got)
		}
	})

	t.Run("415 and a replaced object: never touch it", func(t *testing.T) {
		fake := newFakeClient(widget("ns1", "dep", "other-uid", "9", refs...))
		unsupportSMP(fake)
		if err := UnblockOwnerRefs(context.Background(), New(fake), depTarget, "7", refs); err != nil {
			t.Fatal(err)
		}
		if got := actions(fake); len(got) != 2 {
			t.Errorf("actions = %q, want the patch and the get only", got)
		}
		if got := blockingOf(t, fake); !slices.Equal(got, []bool{true, false}) {
			t.Errorf("blocking after = %v", got)
		}
	})
}

// TestRemoveStaleOwnerRefs: the stale references go only while the object still references an
// owner that kept it; otherwise nothing is sent and ErrKeepersGone says to decide again.
func TestRemoveStaleOwnerRefs(t *testing.T) {
	const res = "widgets.v1.example.com"
	smp := "PATCH " + res + ` ns1/dep strategic {"metadata":{"uid":"dep-uid","resourceVersion":"7","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`
	get := "GET " + res + " ns1/dep"
	conflict := func(c *metadatafake.FakeMetadataClient) {
		rejectPatch(c, types.StrategicMergePatchType, apierrors.NewConflict(widgets.GroupResource(), "dep", fmt.Errorf("the object has been modified")))
	}
	tests := []struct {
		name        string
		live        []metav1.OwnerReference
		setup       func(*metadatafake.FakeMetadataClient)
		wantErr     error
		wantActions []string
		wantRefs    []types.UID
	}{
		{
			name:        "the strategic merge patch carries the view's resourceVersion",
			live:        []metav1.OwnerReference{ownerRef("o1", nil), ownerRef("keeper", nil)},
			wantActions: []string{smp},
			wantRefs:    []types.UID{"keeper"},
		},
		{
			name:        "409 and the keeper is still referenced: merge patch at the live resourceVersion",
			live:        []metav1.OwnerReference{ownerRef("o1", nil), ownerRef("keeper", nil)},
			setup:       conflict,
			wantActions: []string{smp, get, "PATCH " + res + ` ns1/dep merge {"metadata":{"resourceVersion":"8","ownerReferences":[{"apiVersion":"example.com/v1","kind":"Widget","name":"w-keeper","uid":"keeper"}]}}`},
			wantRefs:    []types.UID{"keeper"},
		},
		{
			name:        "409 and the keeper's reference was dropped: nothing sent, decide again",
			live:        []metav1.OwnerReference{ownerRef("o1", nil)},
			setup:       conflict,
			wantErr:     ErrKeepersGone,
			wantActions: []string{smp, get},
			wantRefs:    []types.UID{"o1"},
		},
		{
			name:        "415 and the keeper's reference was dropped: nothing sent, decide again",
			live:        []metav1.OwnerReference{ownerRef("o1", nil), ownerRef("other", nil)},
			setup:       unsupportSMP,
			wantErr:     ErrKeepersGone,
			wantActions: []string{smp, get},
			wantRefs:    []types.UID{"o1", "other"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeClient(widget("ns1", "dep", "dep-uid", "8", tt.live...))
			if tt.setup != nil {
				tt.setup(fake)
			}
			err := RemoveStaleOwnerRefs(context.Background(), New(fake), Target{GVR: widgets, Namespace: "ns1", Name: "dep", UID: "dep-uid"},
				"7", []types.UID{"o1"}, []types.UID{"keeper"})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("RemoveStaleOwnerRefs() = %v, want %v", err, tt.wantErr)
			}
			if got := actions(fake); !slices.Equal(got, tt.wantActions) {
				t.Errorf("actions:\n%q\nwant\n%q", got, tt.wantActions)
			}
			fake.ClearActions()
			if got := liveRefs(t, fake, widgets, "ns1", "dep"); !reflect.DeepEqual(got, tt.wantRefs) {
				t.Errorf("owner refs after = %v, want %v", got, tt.wantRefs)
			}
		})
	}
}
