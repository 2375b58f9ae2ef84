package gc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// A watch event's fast decode (issue 41). In protobuf, one frame of a metadata watch is a
// WatchEvent (unwrapped: the stream's raw serializer), whose object is an envelope ("k8s\0"
// and a runtime.Unknown) holding a PartialObjectMetadata. apimachinery's decoder builds every field of the
// object's ObjectMeta, managedFields included: on a typical object that is most of its bytes
// and most of the allocations, and the graph never reads it. decodeEventFast reads the same
// bytes into the same PartialObjectMetadata except ManagedFields, which it leaves empty.
//
// It understands exactly what a kube-apiserver writes: the field numbers and wire types of
// meta/v1's generated.proto for ObjectMeta, OwnerReference, Time (seconds only, as
// apimachinery reads it), PartialObjectMetadata, WatchEvent and runtime's Unknown and
// RawExtension, each singular field at most once, no content type or encoding in the
// envelope, and an object kind PartialObjectMetadata of meta.k8s.io/v1. On anything else (an ERROR event's Status, an unknown field, a field given
// twice, a wire type or length that does not fit) it answers false and the caller decodes the
// frame with apimachinery's decoder, as before: so a frame it reads is one whose full decode
// gives the same object, ManagedFields aside (TestFastDecodeEqualsFullDecode,
// FuzzFastDecode, and the e2e suites with CASCADE_WATCH_DECODE_CHECK).

// protobufMagic starts every protobuf envelope of the Kubernetes API.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// decodeEventFast decodes one protobuf watch frame; ok is false for anything it does not
// understand, and then nothing it returns is to be used.
func decodeEventFast(frame []byte) (watch.EventType, *metav1.PartialObjectMetadata, bool) {
	evType, objRaw, ok := readWatchEvent(frame)
	if !ok {
		return "", nil, false
	}
	switch watch.EventType(evType) {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
	default:
		return "", nil, false // ERROR (a Status) and anything unknown: the full decoder's
	}
	apiVersion, kind, raw, ok := unwrapEnvelope(objRaw)
	if !ok || apiVersion != "meta.k8s.io/v1" || kind != "PartialObjectMetadata" {
		return "", nil, false
	}
	m := &metav1.PartialObjectMetadata{}
	if !readPartialObjectMetadata(raw, m) {
		return "", nil, false
	}
	return watch.EventType(evType), m, true
}

// protoField reads one field's number, wire type and length of its tag; n <= 0 on a bad tag.
func protoField(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num < 1 {
		return 0, 0, -1
	}
	return num, typ, n
}

// bytesField reads a length-delimited field's value after its tag.
func bytesField(b []byte, typ protowire.Type) ([]byte, int) {
	if typ != protowire.BytesType {
		return nil, -1
	}
	return protowire.ConsumeBytes(b)
}

// varintField reads a varint field's value after its tag.
func varintField(b []byte, typ protowire.Type) (uint64, int) {
	if typ != protowire.VarintType {
		return 0, -1
	}
	return protowire.ConsumeVarint(b)
}

// once marks field num seen in *seen; false if it was already (a singular field given twice,
// which the generated code would merge: left to it).
func once(seen *uint32, num protowire.Number) bool {
	bit := uint32(1) << uint(num)
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// unwrapEnvelope reads "k8s\0" and a runtime.Unknown without content type or encoding.
func unwrapEnvelope(b []byte) (apiVersion, kind string, raw []byte, ok bool) {
	if len(b) < len(protobufMagic) || string(b[:len(protobufMagic)]) != string(protobufMagic) {
		return "", "", nil, false
	}
	b = b[len(protobufMagic):]
	var seen uint32
	for len(b) > 0 {
		num, typ, n := protoField(b)
		if n < 0 || num > 4 || !once(&seen, num) {
			return "", "", nil, false
		}
		b = b[n:]
		v, m := bytesField(b, typ)
		if m < 0 {
			return "", "", nil, false
		}
		b = b[m:]
		switch num {
		case 1: // typeMeta
			if apiVersion, kind, ok = readTypeMeta(v); !ok {
				return "", "", nil, false
			}
		case 2: // raw
			raw = v
		case 3, 4: // contentEncoding, contentType
			if len(v) != 0 {
				return "", "", nil, false
			}
		}
	}
	return apiVersion, kind, raw, true
}

// readTypeMeta reads a TypeMeta: apiVersion = 1, kind = 2.
func readTypeMeta(b []byte) (apiVersion, kind string, ok bool) { return readStringPair(b) }

// readStringPair reads a message of two string fields, 1 and 2, each at most once (absent ones
// empty): a TypeMeta, or an entry of a map<string, string> (key, value).
func readStringPair(b []byte) (first, second string, ok bool) {
	var seen uint32
	for len(b) > 0 {
		num, typ, n := protoField(b)
		if n < 0 || num > 2 || !once(&seen, num) {
			return "", "", false
		}
		b = b[n:]
		v, l := bytesField(b, typ)
		if l < 0 {
			return "", "", false
		}
		b = b[l:]
		if num == 1 {
			first = string(v)
		} else {
			second = string(v)
		}
	}
	return first, second, true
}

// readWatchEvent reads a WatchEvent: its type and its RawExtension's bytes.
func readWatchEvent(b []byte) (evType string, raw []byte, ok bool) {
	var seen uint32
	for len(b) > 0 {
		num, typ, n := protoField(b)
		if n < 0 || num > 2 || !once(&seen, num) {
			return "", nil, false
		}
		b = b[n:]
		v, m := bytesField(b, typ)
		if m < 0 {
			return "", nil, false
		}
		b = b[m:]
		if num == 1 {
			evType = string(v)
			continue
		}
		// The object, a RawExtension: its one field is the raw bytes (1).
		var rseen uint32
		for len(v) > 0 {
			rnum, rtyp, rn := protoField(v)
			if rn < 0 || rnum != 1 || !once(&rseen, rnum) {
				return "", nil, false
			}
			v = v[rn:]
			rv, rm := bytesField(v, rtyp)
			if rm < 0 {
				return "", nil, false
			}
			v = v[rm:]
			raw = rv
		}
	}
	return evType, raw, true
}

func readPartialObjectMetadata(b []byte, m *metav1.PartialObjectMetadata) bool {
	var seen uint32
	for len(b) > 0 {
		num, typ, n := protoField(b)
		if n < 0 || num != 1 || !once(&seen, num) {
			return false
		}
		b = b[n:]
		v, l := bytesField(b, typ)
		if l < 0 || !readObjectMeta(v, &m.ObjectMeta) {
			return false
		}
		b = b[l:]
	}
	return true
}

// readObjectMeta reads every field of ObjectMeta but managedFields (17), which it skips.
func readObjectMeta(b []byte, o *metav1.ObjectMeta) bool {
	var seen uint32
	for len(b) > 0 {
		num, typ, n := protoField(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch num {
		case 1, 2, 3, 4, 5, 6, 8, 9: // singular strings and Times
			if !once(&seen, num) {
				return false
			}
			v, l := bytesField(b, typ)
			if l < 0 {
				return false
			}
			b = b[l:]
			switch num {
			case 1:
				o.Name = string(v)
			case 2:
				o.GenerateName = string(v)
			case 3:
				o.Namespace = string(v)
			case 4:
				o.SelfLink = string(v) //nolint:staticcheck // deprecated, but the full decode reads it: so does this one
			case 5:
				o.UID = types.UID(v)
			case 6:
				o.ResourceVersion = string(v)
			case 8:
				t, ok := readTime(v)
				if !ok {
					return false
				}
				o.CreationTimestamp = t
			case 9:
				t, ok := readTime(v)
				if !ok {
					return false
				}
				o.DeletionTimestamp = &t
			}
		case 7, 10: // generation, deletionGracePeriodSeconds
			if !once(&seen, num) {
				return false
			}
			v, l := varintField(b, typ)
			if l < 0 {
				return false
			}
			b = b[l:]
			if num == 7 {
				o.Generation = int64(v)
			} else {
				s := int64(v)
				o.DeletionGracePeriodSeconds = &s
			}
		case 11, 12: // labels, annotations: repeated map entries
			v, l := bytesField(b, typ)
			if l < 0 {
				return false
			}
			b = b[l:]
			k, val, ok := readStringPair(v) // a map entry: key, value
			if !ok {
				return false
			}
			if num == 11 {
				if o.Labels == nil {
					o.Labels = map[string]string{}
				}
				o.Labels[k] = val
			} else {
				if o.Annotations == nil {
					o.Annotations = map[string]string{}
				}
				o.Annotations[k] = val
			}
		case 13: // ownerReferences
			v, l := bytesField(b, typ)
			if l < 0 {
				return false
			}
			b = b[l:]
			var ref metav1.OwnerReference
			if !readOwnerReference(v, &ref) {
				return false
			}
			o.OwnerReferences = append(o.OwnerReferences, ref)
		case 14: // finalizers
			v, l := bytesField(b, typ)
			if l < 0 {
				return false
			}
			b = b[l:]
			o.Finalizers = append(o.Finalizers, string(v))
		case 17: // managedFields: checked as the full decode would read them, not kept
			v, l := bytesField(b, typ)
			if l < 0 || !validManagedFieldsEntry(v) {
				return false
			}
			b = b[l:]
		default:
			return false
		}
	}
	return true
}

// validManagedFieldsEntry reports whether b is a ManagedFieldsEntry the full decode reads
// without error and with no field it does not know: manager = 1, operation = 2, apiVersion = 3,
// time = 4, fieldsType = 6, fieldsV1 = 7 (a FieldsV1: raw = 1), subresource = 8.
func validManagedFieldsEntry(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := protoField(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		v, l := bytesField(b, typ)
		if l < 0 {
			return false
		}
		b = b[l:]
		switch num {
		case 1, 2, 3, 6, 8:
		case 4:
			if _, ok := readTime(v); !ok {
				return false
			}
		case 7:
			for len(v) > 0 {
				fnum, ftyp, fn := protoField(v)
				if fn < 0 || fnum != 1 {
					return false
				}
				v = v[fn:]
				_, fl := bytesField(v, ftyp)
				if fl < 0 {
					return false
				}
				v = v[fl:]
			}
		default:
			return false
		}
	}
	return true
}

// readTime reads a meta/v1 Time (Timestamp: seconds = 1, nanos = 2) as apimachinery does:
// seconds only, in the local zone; an empty message is the zero Time.
func readTime(b []byte) (metav1.Time, bool) {
	if len(b) == 0 {
		return metav1.Time{}, true
	}
	var seconds int64
	var seen uint32
	for len(b) > 0 {
		num, typ, n := protoField(b)
		if n < 0 || num > 2 || !once(&seen, num) {
			return metav1.Time{}, false
		}
		b = b[n:]
		v, l := varintField(b, typ)
		if l < 0 {
			return metav1.Time{}, false
		}
		b = b[l:]
		if num == 1 {
			seconds = int64(v)
		}
	}
	return metav1.Time{Time: time.Unix(seconds, 0).Local()}, true
}

// readOwnerReference reads kind = 1, name = 3, uid = 4, apiVersion = 5, controller = 6 and
// blockOwnerDeletion = 7.
func readOwnerReference(b []byte, r *metav1.OwnerReference) bool {
	var seen uint32
	for len(b) > 0 {
		num, typ, n := protoField(b)
		if n < 0 || !once(&seen, num) {
			return false
		}
		b = b[n:]
		switch num {
		case 1, 3, 4, 5:
			v, l := bytesField(b, typ)
			if l < 0 {
				return false
			}
			b = b[l:]
			switch num {
			case 1:
				r.Kind = string(v)
			case 3:
				r.Name = string(v)
			case 4:
				r.UID = types.UID(v)
			case 5:
				r.APIVersion = string(v)
			}
		case 6, 7:
			v, l := varintField(b, typ)
			if l < 0 {
				return false
			}
			b = b[l:]
			flag := v != 0
			if num == 6 {
				r.Controller = &flag
			} else {
				r.BlockOwnerDeletion = &flag
			}
		default:
			return false
		}
	}
	return true
}

// frameStream is a protobuf watch read frame by frame: each event goes through decodeEventFast,
// or through apimachinery's decoders (what restwatch.Decoder does, on the same bytes) when that
// leaves it. Frames are length-delimited (4 bytes, big-endian, then the frame), as
// apimachinery's framer reads them, and bounded as its streaming decoder bounds them: an event
// above 16 MiB ends the stream with ErrObjectTooLarge. Where that decoder keeps a buffer per
// watch (1 KiB, doubled to the largest event seen), a frame here is read into a buffer from a
// pool only once its length has arrived, and handed back once decoded (the decoded object keeps
// copies, never the buffer): an idle watch, waiting for its next length, holds none. A frame
// larger than that buffer grows it as its bytes arrive, as the streaming decoder does, never
// on the announced length alone.
type frameStream struct {
	body    io.ReadCloser
	length  [4]byte
	err     error           // once set (an event too large), every next call answers it
	events  runtime.Decoder // a WatchEvent's
	objects runtime.Decoder // the object's inside it
}

// maxFrameBytes is apimachinery's streaming decoder's bound on one event.
const maxFrameBytes = 16 << 20

// maxPooledFrame: buffers up to this size go back to the pool; a larger event's is dropped.
const maxPooledFrame = 64 << 10

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func newFrameStream(body io.ReadCloser, events, objects runtime.Decoder) *frameStream {
	return &frameStream{body: body, events: events, objects: objects}
}

func (s *frameStream) close() { _ = s.body.Close() }

// next waits for the next event's length, then reads and decodes the event (frame). An idle
// watch waits here: this frame and readFull's are all it keeps on the stack above HTTP/2's read
// (watchloop.go says why that matters).
func (s *frameStream) next() (watch.EventType, runtime.Object, error) {
	if s.err != nil {
		return "", nil, s.err
	}
	if err := readFull(s.body, s.length[:]); err != nil {
		return "", nil, err // io.EOF where the server ended the watch between events
	}
	return s.frame()
}

// readFull is io.ReadFull in a smaller frame (io.ReadFull and io.ReadAtLeast take 150 bytes).
//
//go:noinline
func readFull(r io.Reader, b []byte) error {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		switch {
		case n == len(b):
			return nil
		case err == io.EOF && n > 0:
			return io.ErrUnexpectedEOF
		case err != nil:
			return err
		}
	}
	return nil
}

// frame reads and decodes the event whose length next read.
//
//go:noinline
func (s *frameStream) frame() (watch.EventType, runtime.Object, error) {
	n := binary.BigEndian.Uint32(s.length[:])
	if n > maxFrameBytes {
		s.err = streaming.ErrObjectTooLarge
		return "", nil, s.err
	}
	bp := framePool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledFrame {
			framePool.Put(bp)
		}
	}()
	var frame []byte
	if int(n) <= cap(*bp) {
		frame = (*bp)[:n]
		if _, err := io.ReadFull(s.body, frame); err != nil {
			return "", nil, unexpectedEOF(err)
		}
	} else {
		// Larger than the pooled buffer: grown as the bytes arrive, never on the length alone
		// (a member's server that announces 16 MiB and sends nothing costs nothing).
		buf := bytes.NewBuffer((*bp)[:0])
		got, err := io.CopyN(buf, s.body, int64(n))
		if err != nil || got != int64(n) {
			return "", nil, unexpectedEOF(err)
		}
		frame = buf.Bytes()
		*bp = frame[:0]
	}
	if t, m, ok := decodeEventFast(frame); ok {
		if decodeCheck != nil {
			decodeCheck.verify(frame, t, m, s.events, s.objects)
		}
		return t, m, nil
	}
	return decodeEventFull(frame, s.events, s.objects)
}

// unexpectedEOF is a frame's read error: the body ending inside a frame is io.ErrUnexpectedEOF.
func unexpectedEOF(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// decodeEventFull is restwatch.Decoder's decode of one event, from its frame.
func decodeEventFull(frame []byte, events, objects runtime.Decoder) (watch.EventType, runtime.Object, error) {
	var got metav1.WatchEvent
	res, _, err := events.Decode(frame, nil, &got)
	if err != nil {
		return "", nil, err
	}
	if res != &got {
		return "", nil, fmt.Errorf("unable to decode to metav1.WatchEvent")
	}
	switch watch.EventType(got.Type) {
	case watch.Added, watch.Modified, watch.Deleted, watch.Error, watch.Bookmark:
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %v", got.Type)
	}
	obj, err := runtime.Decode(objects, got.Object.Raw)
	if err != nil {
		return "", nil, fmt.Errorf("unable to decode watch event: %v", err)
	}
	return watch.EventType(got.Type), obj, nil
}

// sameAsFull reports whether the full decode of frame is the fast one's t and m, ManagedFields
// aside, and if not, how it differs.
func sameAsFull(frame []byte, t watch.EventType, m *metav1.PartialObjectMetadata, events, objects runtime.Decoder) (bool, string) {
	ft, fobj, err := decodeEventFull(frame, events, objects)
	if err != nil {
		return false, fmt.Sprintf("the full decode failed: %v", err)
	}
	fm, ok := fobj.(*metav1.PartialObjectMetadata)
	if !ok {
		return false, fmt.Sprintf("the full decode gave a %T", fobj)
	}
	cp := fm.DeepCopy()
	cp.ManagedFields = nil
	if ft != t || !reflect.DeepEqual(cp, m) {
		return false, fmt.Sprintf("full %s %#v\nfast %s %#v", ft, cp, t, m)
	}
	return true, ""
}

// decodeCheck, set by CASCADE_WATCH_DECODE_CHECK=DIR (the e2e suites set it), decodes every
// frame the fast decode read a second time with apimachinery's decoders and compares: a
// difference is logged and written to DIR/mismatch-PID, and DIR/checked-PID is created at the
// first frame compared, so that the suites can tell that the check ran and found nothing.
// Never set in production: it doubles the decoding.
var decodeCheck = newDecodeChecker(os.Getenv("CASCADE_WATCH_DECODE_CHECK"))

type decodeChecker struct {
	dir     string
	checked atomic.Bool
	mu      sync.Mutex
}

func newDecodeChecker(dir string) *decodeChecker {
	if dir == "" {
		return nil
	}
	return &decodeChecker{dir: dir}
}

func (c *decodeChecker) verify(frame []byte, t watch.EventType, m *metav1.PartialObjectMetadata, events, objects runtime.Decoder) {
	if !c.checked.Swap(true) {
		c.write("checked", "")
	}
	if ok, diff := sameAsFull(frame, t, m, events, objects); !ok {
		klog.Background().Error(nil, "The fast watch decode differs from the full decode", "diff", diff)
		c.write("mismatch", diff+"\n")
	}
}

func (c *decodeChecker) write(kind, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("%s-%d", kind, os.Getpid())), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		klog.Background().Error(err, "Writing the watch decode check")
		return
	}
	_, _ = f.WriteString(text)
	_ = f.Close()
}
