package gc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	goruntime "runtime"
	"testing"
	"time"

	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// protobufDecoders are the decoders Streams.open negotiates for a protobuf watch.
func protobufDecoders(t testing.TB) (events, objects runtime.Decoder, framer runtime.Framer) {
	t.Helper()
	neg := runtime.NewClientNegotiator(metainternalversionscheme.Codecs.WithoutConversion(), schema.GroupVersion{})
	objects, events, framer, err := neg.StreamDecoder(runtime.ContentTypeProtobuf, nil)
	if err != nil {
		t.Fatal(err)
	}
	return events, objects, framer
}

// encodeEvent writes one watch event as kube-apiserver does in protobuf: the object in an
// envelope of its own (meta.k8s.io/v1 PartialObjectMetadata), inside a WatchEvent in another.
func encodeEvent(t testing.TB, typ watch.EventType, obj runtime.Object) []byte {
	t.Helper()
	codecs := metainternalversionscheme.Codecs
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok || info.StreamSerializer == nil {
		t.Fatal("no protobuf stream serializer")
	}
	gv := schema.GroupVersion{Group: "meta.k8s.io", Version: "v1"}
	var objBuf bytes.Buffer
	if err := codecs.EncoderForVersion(info.Serializer, gv).Encode(obj, &objBuf); err != nil {
		t.Fatal(err)
	}
	var evBuf bytes.Buffer
	ev := &metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: objBuf.Bytes()}}
	if err := codecs.EncoderForVersion(info.StreamSerializer.Serializer, gv).Encode(ev, &evBuf); err != nil {
		t.Fatal(err)
	}
	return evBuf.Bytes()
}

// decodeCases are objects the way the API server sends them: every field of ObjectMeta the
// fast decode reads, and managedFields, which it skips.
func decodeCases() map[string]runtime.Object {
	created := metav1.NewTime(time.Unix(1700000000, 0))
	deleting := metav1.NewTime(time.Unix(1700000100, 0))
	full := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "cm-1", GenerateName: "cm-", Namespace: "ns-1", SelfLink: "/api/v1/x", //nolint:staticcheck // the server no longer sets it; the decode reads it still
			UID:             types.UID("7d4c1e0e-0c2c-4e59-9f5e-0d7e7e3f8a11"),
			ResourceVersion: "12345", Generation: 3, CreationTimestamp: created, DeletionTimestamp: &deleting,
			DeletionGracePeriodSeconds: ptr.To(int64(30)),
			Labels:                     map[string]string{"app": "a", "tier": ""},
			Annotations:                map[string]string{"cascade.io/default-propagation": "Foreground", "k": "v"},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u-1", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u-2", Controller: ptr.To(false)},
				{APIVersion: "example.com/v1", Kind: "Gadget", Name: "g", UID: "u-3"},
			},
			Finalizers: []string{"orphan", "foregroundDeletion", "example.com/keep"},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &created,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:a":{}}}`),
			}},
		},
	}
	return map[string]runtime.Object{
		"every field":   full,
		"empty":         &metav1.PartialObjectMetadata{},
		"name only":     &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", ResourceVersion: "1"}},
		"zero deletion": &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", DeletionTimestamp: &metav1.Time{}}},
		"bookmark": &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "99",
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}},
	}
}

// TestFastDecodeEqualsFullDecode: on the objects above, for every event type, the fast decode
// reads the frame and gives what apimachinery's decoders give, ManagedFields aside; an ERROR
// event (a Status) is left to them.
func TestFastDecodeEqualsFullDecode(t *testing.T) {
	events, objects, _ := protobufDecoders(t)
	for name, obj := range decodeCases() {
		for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark} {
			frame := encodeEvent(t, typ, obj)
			ft, fm, ok := decodeEventFast(frame)
			if !ok {
				t.Errorf("%s %s: the fast decode did not read it", name, typ)
				continue
			}
			if same, diff := sameAsFull(frame, ft, fm, events, objects); !same {
				t.Errorf("%s %s:\n%s", name, typ, diff)
			}
			if name == "every field" && (len(fm.OwnerReferences) != 3 || fm.ManagedFields != nil || fm.DeletionTimestamp == nil) {
				t.Errorf("%s %s: %+v", name, typ, fm.ObjectMeta)
			}
		}
	}
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}
	if _, _, ok := decodeEventFast(encodeEvent(t, watch.Error, status)); ok {
		t.Error("the fast decode read an ERROR event")
	}
}

// TestFrameStream: a protobuf watch body read by frameStream gives the events in order, through
// the fast decode where it reads them and the full one where it does not (the ERROR event),
// objects that keep no part of the pooled buffer, then io.EOF; an event above 16 MiB ends it
// with ErrObjectTooLarge, as the streaming decoder, and a frame cut short with
// io.ErrUnexpectedEOF.
func TestFrameStream(t *testing.T) {
	events, objects, _ := protobufDecoders(t)
	var body bytes.Buffer
	frame := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		body.Write(n[:])
		body.Write(b)
	}
	cases := decodeCases()
	frame(encodeEvent(t, watch.Added, cases["every field"]))
	frame(encodeEvent(t, watch.Error, &metav1.Status{Status: metav1.StatusFailure, Code: 410}))
	frame(encodeEvent(t, watch.Deleted, cases["name only"]))
	s := newFrameStream(io.NopCloser(&body), events, objects)
	want := []watch.EventType{watch.Added, watch.Error, watch.Deleted}
	var got []runtime.Object
	for i, w := range want {
		typ, obj, err := s.next()
		if err != nil || typ != w {
			t.Fatalf("event %d: %s %T %v, want %s", i, typ, obj, err, w)
		}
		if _, isStatus := obj.(*metav1.Status); isStatus != (w == watch.Error) {
			t.Errorf("event %d: %T", i, obj)
		}
		got = append(got, obj)
	}
	// The frames' buffer went back to the pool and was read into again: the objects decoded
	// from it hold copies.
	if m := got[0].(*metav1.PartialObjectMetadata); m.Name != "cm-1" || m.OwnerReferences[0].Name != "rs" || m.Annotations["k"] != "v" {
		t.Errorf("the first event's object changed after the next frames were read: %+v", m.ObjectMeta)
	}
	if _, _, err := s.next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}

	// An event above 16 MiB: its length is enough (the stream ends before reading it).
	body.Reset()
	var length [4]byte
	binary.BigEndian.PutUint32(length[:], 16<<20+1)
	body.Write(length[:])
	body.Write(bytes.Repeat([]byte{0}, 1024))
	s = newFrameStream(io.NopCloser(&body), events, objects)
	if _, _, err := s.next(); !errors.Is(err, streaming.ErrObjectTooLarge) {
		t.Fatalf("the 17 MiB event: %v, want ErrObjectTooLarge", err)
	}
	if _, _, err := s.next(); !errors.Is(err, streaming.ErrObjectTooLarge) {
		t.Fatalf("after the 17 MiB event: %v, want ErrObjectTooLarge again (the stream is done)", err)
	}

	body.Reset()
	frame(encodeEvent(t, watch.Added, cases["name only"]))
	body.Truncate(body.Len() - 3)
	s = newFrameStream(io.NopCloser(&body), events, objects)
	if _, _, err := s.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a frame cut short: %v, want io.ErrUnexpectedEOF", err)
	}
}

// FuzzFastDecode: whatever the bytes, a frame the fast decode reads is one the full decode
// reads the same, ManagedFields aside (else it must leave it to the full decode). The seeds are
// the test's frames; CI runs the seeds (go test), make fuzz runs the fuzzer.
func FuzzFastDecode(f *testing.F) {
	for _, obj := range decodeCases() {
		for _, typ := range []watch.EventType{watch.Added, watch.Deleted, watch.Bookmark} {
			f.Add(encodeEvent(f, typ, obj))
		}
	}
	f.Add(encodeEvent(f, watch.Error, &metav1.Status{Status: metav1.StatusFailure}))
	events, objects, _ := protobufDecoders(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		typ, m, ok := decodeEventFast(frame)
		if !ok {
			return
		}
		if same, diff := sameAsFull(frame, typ, m, events, objects); !same {
			t.Fatalf("the fast decode read a frame the full decode reads otherwise:\n%s", diff)
		}
	})
}

// TestFrameStreamGrowsAsBytesArrive: a frame larger than the pooled buffer is read whole (an
// object with a 100 KiB annotation), and one whose announced length never arrives costs what
// arrived, not what was announced: a member's server that claims 16 MiB and sends 1 KiB makes
// the stream end with io.ErrUnexpectedEOF having allocated well under a MiB.
func TestFrameStreamGrowsAsBytesArrive(t *testing.T) {
	events, objects, _ := protobufDecoders(t)
	big := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "big", UID: "u", Annotations: map[string]string{"a": string(bytes.Repeat([]byte("x"), 100<<10))}}}
	payload := encodeEvent(t, watch.Added, big)
	var body bytes.Buffer
	var length [4]byte
	binary.BigEndian.PutUint32(length[:], uint32(len(payload)))
	body.Write(length[:])
	body.Write(payload)
	s := newFrameStream(io.NopCloser(&body), events, objects)
	typ, obj, err := s.next()
	if err != nil || typ != watch.Added {
		t.Fatalf("the 100 KiB event: %s %v", typ, err)
	}
	if m := obj.(*metav1.PartialObjectMetadata); m.Name != "big" || len(m.Annotations["a"]) != 100<<10 {
		t.Errorf("the 100 KiB event decoded as %q with a %d-byte annotation", m.Name, len(m.Annotations["a"]))
	}

	body.Reset()
	binary.BigEndian.PutUint32(length[:], maxFrameBytes)
	body.Write(length[:])
	body.Write(bytes.Repeat([]byte{0}, 1024))
	s = newFrameStream(io.NopCloser(&body), events, objects)
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	_, _, err = s.next()
	goruntime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("16 MiB announced, 1 KiB sent: %v, want io.ErrUnexpectedEOF", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("16 MiB announced, 1 KiB sent: %d bytes allocated", grew)
	}
}
