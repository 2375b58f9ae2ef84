// Package clienttest holds the fakes the unit tests of packages client, gc and finalizers
// share: a metadata fake client that knows PartialObjectMetadata, ways to make it fail, the one
// rendering of its actions as strings ("DELETE widgets.v1.example.com ns1/w1 uid=u1 rv=3
// propagation=Background"), so tests assert the exact API calls, and the one drain of a fake
// Event recorder. It is for tests only.
package clienttest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// Widgets is the namespaced custom resource the tests use (kind Widget, example.com/v1).
var Widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// DeletedAt is the deletionTimestamp of objects built as being deleted.
var DeletedAt = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

// Widget returns a Widget's metadata.
func Widget(namespace, name string, uid types.UID, rv string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name, UID: uid, ResourceVersion: rv, OwnerReferences: refs,
		},
	}
}

// Deleting marks m as being deleted with finalizers and returns it.
func Deleting(m *metav1.PartialObjectMetadata, finalizers ...string) *metav1.PartialObjectMetadata {
	m.DeletionTimestamp = &DeletedAt
	m.Finalizers = finalizers
	return m
}

// OwnerRef is a reference to the Widget "w-<uid>".
func OwnerRef(uid types.UID, block *bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w-" + string(uid), UID: uid, BlockOwnerDeletion: block}
}

// NewFake returns a fake metadata client holding objs.
func NewFake(objs ...runtime.Object) *metadatafake.FakeMetadataClient {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		panic(err)
	}
	return metadatafake.NewSimpleMetadataClient(scheme, objs...)
}

// RejectPatch makes the fake answer every patch of type pt with err.
func RejectPatch(c *metadatafake.FakeMetadataClient, pt types.PatchType, err error) {
	c.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.PatchAction).GetPatchType() == pt {
			return true, nil, err
		}
		return false, nil, nil
	})
}

// UnsupportSMP makes the fake answer strategic merge patches with 415, as custom resources and
// aggregated APIs do.
func UnsupportSMP(c *metadatafake.FakeMetadataClient) {
	RejectPatch(c, types.StrategicMergePatchType, UnsupportedMediaType("dep"))
}

// FailGet makes the fake answer every get with err.
func FailGet(c *metadatafake.FakeMetadataClient, err error) { Fail(c, "get", err) }

// Fail makes the fake answer every call of verb (get, delete, patch) with err.
func Fail(c *metadatafake.FakeMetadataClient, verb string, err error) {
	c.PrependReactor(verb, "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, err
	})
}

// UnsupportedMediaType is the server's 415 for a strategic merge patch of name.
func UnsupportedMediaType(name string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", Widgets.GroupResource(), name, "", 0, false)
}

// Actions renders the client's actions (Action), in order; the fake keeps them.
func Actions(c *metadatafake.FakeMetadataClient) []string {
	var out []string
	for _, a := range c.Actions() {
		out = append(out, Action(a))
	}
	return out
}

// Action renders one API call: the verb in capitals, the resource as resource.version.group
// (configmaps.v1 for the core group), namespace/name (an empty namespace for a cluster-scoped
// object), then what the call carries: a patch's type (strategic, merge, or its media type)
// and body, a delete's preconditions and propagation policy.
//
//	GET configmaps.v1 ns/cm
//	GET things.v1.example.com /th
//	PATCH widgets.v1.example.com ns/dep strategic {"metadata":{...}}
//	DELETE widgets.v1.example.com ns/dep uid=u-dep rv=3 propagation=Background
func Action(a clienttesting.Action) string {
	r := a.GetResource()
	res := r.Resource + "." + r.Version
	if r.Group != "" {
		res += "." + r.Group
	}
	line := fmt.Sprintf("%s %s %s/", strings.ToUpper(a.GetVerb()), res, a.GetNamespace())
	switch a := a.(type) {
	case clienttesting.PatchAction: // before GetAction, which every action with a name satisfies
		pt := string(a.GetPatchType())
		if short, ok := patchTypeNames[a.GetPatchType()]; ok {
			pt = short
		}
		line += fmt.Sprintf("%s %s %s", a.GetName(), pt, a.GetPatch())
	case clienttesting.DeleteAction:
		line += a.GetName() + deleteOptions(a.GetDeleteOptions())
	case clienttesting.GetAction:
		line += a.GetName()
	}
	return line
}

// patchTypeNames are the short names of the patch types cascade sends; Action renders any
// other as its media type.
var patchTypeNames = map[types.PatchType]string{types.StrategicMergePatchType: "strategic", types.MergePatchType: "merge"}

func deleteOptions(o metav1.DeleteOptions) string {
	var s string
	if p := o.Preconditions; p != nil {
		if p.UID != nil {
			s += " uid=" + string(*p.UID)
		}
		if p.ResourceVersion != nil {
			s += " rv=" + *p.ResourceVersion
		}
	}
	if o.PropagationPolicy != nil {
		s += " propagation=" + string(*o.PropagationPolicy)
	}
	return s
}

// Events returns and consumes the Events rec holds, oldest first, without waiting for more.
func Events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Live reads one object from the fake without recording an action the caller asserts on
// (call it after checking Actions, or clear them).
func Live(c *metadatafake.FakeMetadataClient, gvr schema.GroupVersionResource, ns, name string) (*metav1.PartialObjectMetadata, error) {
	return c.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// LiveOwners returns the UIDs of the owner references of one object in the fake.
func LiveOwners(c *metadatafake.FakeMetadataClient, gvr schema.GroupVersionResource, ns, name string) ([]types.UID, error) {
	obj, err := Live(c, gvr, ns, name)
	if err != nil {
		return nil, err
	}
	var uids []types.UID
	for _, r := range obj.OwnerReferences {
		uids = append(uids, r.UID)
	}
	return uids, nil
}
