package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	clienttesting "k8s.io/client-go/testing"
)

func TestMetadataClient(t *testing.T) {
	ctx := context.Background()
	fake := newFakeClient(
		widget("ns1", "w1", "w1-uid", "3", ownerRef("o1", nil)),
		widget("ns2", "w1", "w1-other", "4"),
	)
	c := New(fake)

	got, err := c.Get(ctx, widgets, "ns1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != "w1-uid" || got.ResourceVersion != "3" {
		t.Errorf("Get() = %s@%s, want w1-uid@3", got.UID, got.ResourceVersion)
	}

	patched, err := c.Patch(ctx, widgets, "ns1", "w1", types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(patched.OwnerReferences) != 0 {
		t.Errorf("Patch() left owner refs %v", patched.OwnerReferences)
	}

	if err := Delete(ctx, c, Target{GVR: widgets, Namespace: "ns1", Name: "w1", UID: "w1-uid"}, "3", metav1.DeletePropagationBackground); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, widgets, "ns1", "w1"); !apierrors.IsNotFound(err) {
		t.Errorf("Get() after Delete = %v, want NotFound", err)
	}
	if _, err := c.Get(ctx, widgets, "ns2", "w1"); err != nil {
		t.Errorf("the same name in another namespace must survive: %v", err)
	}

	want := []string{
		"GET widgets.v1.example.com ns1/w1",
		`PATCH widgets.v1.example.com ns1/w1 merge {"metadata":{"ownerReferences":null}}`,
		"DELETE widgets.v1.example.com ns1/w1 uid=w1-uid rv=3 propagation=Background",
		"GET widgets.v1.example.com ns1/w1",
		"GET widgets.v1.example.com ns2/w1",
	}
	if got := actions(fake); !slices.Equal(got, want) {
		t.Errorf("actions:\n%q\nwant\n%q", got, want)
	}

	// The delete carries the options unchanged.
	del := fake.Actions()[2].(clienttesting.DeleteActionImpl)
	if p := del.DeleteOptions.Preconditions; p == nil || *p.UID != "w1-uid" || *p.ResourceVersion != "3" {
		t.Errorf("delete preconditions = %+v", p)
	}
	if pp := del.DeleteOptions.PropagationPolicy; pp == nil || *pp != metav1.DeletePropagationBackground {
		t.Errorf("delete propagation = %v", pp)
	}
}

// patchRecorder is a metadata client that only records patch options; the
// fake metadata client drops them.
type patchRecorder struct {
	metadata.ResourceInterface // nil: any other call panics
	opts                       *[]metav1.PatchOptions
}

func (r patchRecorder) Resource(schema.GroupVersionResource) metadata.Getter { return r }
func (r patchRecorder) Namespace(string) metadata.ResourceInterface          { return r }
func (r patchRecorder) Patch(_ context.Context, _ string, _ types.PatchType, _ []byte, opts metav1.PatchOptions, _ ...string) (*metav1.PartialObjectMetadata, error) {
	*r.opts = append(*r.opts, opts)
	return &metav1.PartialObjectMetadata{}, nil
}

func TestMetadataClientPatchNamesFieldManager(t *testing.T) {
	var opts []metav1.PatchOptions
	c := New(patchRecorder{opts: &opts})
	if _, err := c.Patch(context.Background(), widgets, "ns1", "w1", types.MergePatchType, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if len(opts) != 1 || opts[0].FieldManager != FieldManager {
		t.Errorf("patch options = %+v, want field manager %q", opts, FieldManager)
	}
}

// TestListReads: shadow mode's reads (NewListReads) answer as a GET would, from a list by name
// in the object's namespace: the object itself (not another of a name it prefixes, nor one of
// another namespace), and a NotFound naming the object when the list holds none, which the
// collector takes for absence. Every read is a LIST with fieldSelector metadata.name, never a
// GET: the shadow role holds no get on "*" (which would be get on nodes/proxy).
func TestListReads(t *testing.T) {
	ctx := context.Background()
	fake := newFakeClient(
		widget("ns1", "w1", "w1-uid", "3"),
		widget("ns1", "w10", "w10-uid", "5"),
		widget("ns2", "w2", "w2-uid", "4"),
	)
	c := NewListReads(fake)
	got, err := c.Get(ctx, widgets, "ns1", "w1")
	if err != nil || got.UID != "w1-uid" || got.ResourceVersion != "3" {
		t.Fatalf("Get(ns1/w1) = %v, %v; want w1-uid@3", got, err)
	}
	for _, name := range []string{"w2", "missing"} {
		_, err := c.Get(ctx, widgets, "ns1", name)
		var st apierrors.APIStatus
		if !apierrors.IsNotFound(err) || !errors.As(err, &st) || st.Status().Details == nil || st.Status().Details.Name != name {
			t.Errorf("Get(ns1/%s) = %v; want a NotFound naming %q", name, err, name)
		}
	}
	for _, a := range fake.Actions() {
		l, ok := a.(clienttesting.ListAction)
		if !ok {
			t.Errorf("a %s, want only lists", a.GetVerb())
			continue
		}
		if f := l.GetListRestrictions().Fields.String(); !strings.HasPrefix(f, "metadata.name=") || a.GetNamespace() != "ns1" {
			t.Errorf("list in %q with fieldSelector %q, want metadata.name=NAME in ns1", a.GetNamespace(), f)
		}
	}
}
