package client

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/cascade-gc/cascade/internal/leader"
)

// TestHeldRecorder: a standby sends no Event; what it held (at most MaxHeldEvents, the newest,
// each once) goes out when the gate opens, and later Events go out at once.
func TestHeldRecorder(t *testing.T) {
	rec := record.NewFakeRecorder(2 * MaxHeldEvents)
	gate := &leader.Gate{}
	h := NewHeldRecorder(rec, gate)
	obj := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("cm-", i), UID: "u"}}
	}
	for i := range MaxHeldEvents + 10 {
		h.Eventf(obj(i), corev1.EventTypeWarning, "Test", "event %d", i)
		h.Event(obj(i), corev1.EventTypeWarning, "Test", fmt.Sprint("event ", i)) // identical: held once
	}
	if n := len(rec.Events); n != 0 {
		t.Fatalf("a standby sent %d Events", n)
	}
	if n := h.Held(); n != MaxHeldEvents {
		t.Fatalf("held %d, want %d", n, MaxHeldEvents)
	}
	gate.Open()
	if err := h.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Events); n != MaxHeldEvents {
		t.Fatalf("sent %d held Events, want %d", n, MaxHeldEvents)
	}
	if first := <-rec.Events; first != "Warning Test event 10" {
		t.Errorf("first held Event sent = %q, want the oldest kept (event 10)", first)
	}
	for len(rec.Events) > 0 {
		<-rec.Events
	}
	h.Event(obj(0), corev1.EventTypeNormal, "Now", "at once")
	if n := len(rec.Events); n != 1 || h.Held() != 0 {
		t.Errorf("a leader's Event: %d sent, %d held; want 1, 0", n, h.Held())
	}
}
