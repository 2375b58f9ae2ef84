package client

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/cascade-gc/cascade/internal/leader"
)

// MaxHeldEvents bounds the Events a standby holds for when it leads; the oldest go first.
const MaxHeldEvents = 1000

// HeldRecorder is cascade's one Event recorder: an Event is sent at once while this replica
// leads, and held until it does otherwise (at most MaxHeldEvents, the oldest dropped; an
// Event identical to one held is held once), so replicas do not repeat each other and the
// new leader reports what its warm graph and policy found as a standby. Run sends the held
// Events once the gate opens. It is safe for concurrent use.
type HeldRecorder struct {
	rec  record.EventRecorder
	gate *leader.Gate

	mu   sync.Mutex
	sent bool                // guarded by mu: the gate opened and what was held went out
	held []heldEvent         // guarded by mu
	keys map[string]struct{} // guarded by mu: the keys of held
}

type heldEvent struct {
	obj              runtime.Object
	annotations      map[string]string
	typ, reason, msg string
	key              string // what the Event says about which object, to tell duplicates
}

var _ record.EventRecorder = (*HeldRecorder)(nil)

// NewHeldRecorder returns a recorder that sends through rec once gate is open.
func NewHeldRecorder(rec record.EventRecorder, gate *leader.Gate) *HeldRecorder {
	return &HeldRecorder{rec: rec, gate: gate, keys: map[string]struct{}{}}
}

// Run waits for the gate, then sends what was held. It returns nil when that is done or ctx
// ends.
func (h *HeldRecorder) Run(ctx context.Context) error {
	if !h.gate.Wait(ctx) {
		return nil
	}
	h.mu.Lock()
	held := h.held
	h.held, h.keys, h.sent = nil, nil, true
	h.mu.Unlock()
	for _, e := range held {
		h.rec.AnnotatedEventf(e.obj, e.annotations, e.typ, e.reason, "%s", e.msg)
	}
	return nil
}

// Held returns how many Events wait for the gate.
func (h *HeldRecorder) Held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

func (h *HeldRecorder) Event(obj runtime.Object, typ, reason, msg string) {
	h.AnnotatedEventf(obj, nil, typ, reason, "%s", msg)
}

func (h *HeldRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	h.AnnotatedEventf(obj, nil, typ, reason, format, args...)
}

func (h *HeldRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, typ, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.mu.Lock()
	if h.sent {
		h.mu.Unlock()
		h.rec.AnnotatedEventf(obj, annotations, typ, reason, "%s", msg)
		return
	}
	defer h.mu.Unlock()
	e := heldEvent{obj: obj, annotations: annotations, typ: typ, reason: reason, msg: msg}
	if m, err := meta.Accessor(obj); err == nil {
		e.key = m.GetNamespace() + "/" + m.GetName() + "/" + string(m.GetUID())
	}
	e.key += "\x00" + typ + "\x00" + reason + "\x00" + msg
	if _, dup := h.keys[e.key]; dup {
		return
	}
	if len(h.held) == MaxHeldEvents {
		delete(h.keys, h.held[0].key)
		h.held = h.held[1:]
	}
	h.held = append(h.held, e)
	h.keys[e.key] = struct{}{}
}
