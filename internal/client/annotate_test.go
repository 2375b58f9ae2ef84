package client

import (
	"context"
	"slices"
	"testing"

	"github.com/cascade-gc/cascade/internal/client/clienttest"
)

// TestSetAnnotation: the strategic merge patch sets one annotation with the UID precondition
// and keeps the others; on 415 a merge patch with the live resourceVersion does, unless the
// live object already carries the value.
func TestSetAnnotation(t *testing.T) {
	const (
		smp = `PATCH widgets.v1.example.com ns1/dep strategic {"metadata":{"uid":"dep-uid","annotations":{"cascade.dev/orphaned-at":"v"}}}`
		get = "GET widgets.v1.example.com ns1/dep"
		jmp = `PATCH widgets.v1.example.com ns1/dep merge {"metadata":{"resourceVersion":"7","annotations":{"cascade.dev/orphaned-at":"v"}}}`
	)
	for _, tt := range []struct {
		name    string
		current string // the annotation's value before ("" none)
		no415   bool
		want    []string
	}{
		{name: "strategic merge patch", no415: true, want: []string{smp}},
		{name: "415: merge patch at the live resourceVersion", want: []string{smp, get, jmp}},
		{name: "415: already set, nothing sent", current: "v", want: []string{smp, get}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dep := widget("ns1", "dep", "dep-uid", "7")
			dep.Annotations = map[string]string{"keep": "me"}
			if tt.current != "" {
				dep.Annotations["cascade.dev/orphaned-at"] = tt.current
			}
			fake := clienttest.NewFake(dep)
			if !tt.no415 {
				clienttest.UnsupportSMP(fake)
			}
			err := SetAnnotation(context.Background(), New(fake), Target{GVR: widgets, Namespace: "ns1", Name: "dep", UID: "dep-uid"}, "cascade.dev/orphaned-at", "v")
			if err != nil {
				t.Fatal(err)
			}
			if got := clienttest.Actions(fake); !slices.Equal(got, tt.want) {
				t.Errorf("actions:\n%q\nwant\n%q", got, tt.want)
			}
			live, err := clienttest.Live(fake, widgets, "ns1", "dep")
			if err != nil {
				t.Fatal(err)
			}
			if live.Annotations["keep"] != "me" || live.Annotations["cascade.dev/orphaned-at"] != "v" {
				t.Errorf("annotations after: %v", live.Annotations)
			}
		})
	}
}
