package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Dry-run actions, the label values of cascade_dry_run_actions_total.
const (
	ActionDelete           = "delete"
	ActionRemoveOwnerRefs  = "remove_owner_refs"
	ActionUnblockOwnerRefs = "unblock_owner_refs"
	ActionRemoveFinalizer  = "remove_finalizer"
	ActionAnnotate         = "annotate" // cascade's bookkeeping (policy.OrphanedAtAnnotation)
	ActionPatch            = "patch"    // a patch of another shape (none is built today)
)

// DefaultDivergenceAfter is how long after a would-be write its object is read again.
const DefaultDivergenceAfter = 5 * time.Minute

// dryRunMemory bounds the (action, object) pairs remembered so each is counted and logged once.
const dryRunMemory = 100000

// DryRun is an Interface that sends reads and keeps writes: a DELETE or PATCH is not sent but
// counted (cascade_dry_run_actions_total{action}) and logged at default verbosity, once per
// action and object, and answered as if it succeeded. It is cascade's shadow mode: decide
// everything, write nothing. It is safe for concurrent use.
type DryRun struct {
	c       Interface
	actions *prometheus.CounterVec
	seen    *lru.Cache[string, struct{}]
	div     *divergence
	after   time.Duration // divergence checked this long after a would-be write
}

var _ Interface = (*DryRun)(nil)

// NewDryRun wraps c and registers cascade_dry_run_actions_total on reg.
func NewDryRun(c Interface, reg prometheus.Registerer) *DryRun {
	actions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cascade",
		Name:      "dry_run_actions_total",
		Help:      "Writes cascade would have sent in --dry-run, by action (delete, remove_owner_refs, unblock_owner_refs, remove_finalizer, annotate, apply_admission, delete_admission, write_configmap, event), once per action and object.",
	}, []string{"action"})
	divergenceTotal := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cascade",
		Name:      "dry_run_divergence_total",
		Help:      "In --dry-run, would-be writes another collector did otherwise, checked --dry-run-divergence-after later: kept_by_other (cascade would have deleted it; it is still there), deleted_by_other (cascade would have kept it; it was deleted).",
	}, []string{"kind"})
	checked := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "cascade",
		Name:      "dry_run_checked_total",
		Help:      "In --dry-run, would-be deletes and reference removals read again --dry-run-divergence-after later to compare with what another collector did.",
	})
	reg.MustRegister(actions, divergenceTotal, checked)
	seen, err := lru.New[string, struct{}](dryRunMemory)
	if err != nil {
		panic(fmt.Sprintf("dry-run memory: %v", err)) // the size is a positive constant
	}
	return &DryRun{c: c, actions: actions, seen: seen, after: DefaultDivergenceAfter,
		div: &divergence{total: divergenceTotal, checked: checked, clock: clock.RealClock{}}}
}

// Get reads the live object.
func (d *DryRun) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	return d.c.Get(ctx, gvr, namespace, name)
}

// Delete records the DELETE it would send.
func (d *DryRun) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	var uid types.UID
	if opts.Preconditions != nil && opts.Preconditions.UID != nil {
		uid = *opts.Preconditions.UID
	}
	propagation := ""
	if opts.PropagationPolicy != nil {
		propagation = string(*opts.PropagationPolicy)
	}
	d.record(ctx, ActionDelete, Target{GVR: gvr, Namespace: namespace, Name: name, UID: uid}, "propagation", propagation)
	return nil
}

// Patch records the PATCH it would send, classified by what its body changes.
func (d *DryRun) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) (*metav1.PartialObjectMetadata, error) {
	action, uid := classifyPatch(data)
	d.record(ctx, action, Target{GVR: gvr, Namespace: namespace, Name: name, UID: uid}, "patchType", string(pt), "patch", string(data))
	return &metav1.PartialObjectMetadata{}, nil
}

func (d *DryRun) record(ctx context.Context, action string, t Target, kv ...any) {
	key := action + " " + t.GVR.String() + " " + t.Namespace + "/" + t.Name
	if ok, _ := d.seen.ContainsOrAdd(key, struct{}{}); ok {
		return
	}
	d.actions.WithLabelValues(action).Inc()
	d.div.add(action, t)
	klog.FromContext(ctx).Info("Dry run: not sent", append([]any{"action", action, "resource", t.GVR.String(), "namespace", t.Namespace, "name", t.Name, "uid", t.UID}, kv...)...)
}

// classifyPatch names what a patch built in patch.go changes, and the UID it is for when the
// patch carries one.
func classifyPatch(data []byte) (action string, uid types.UID) {
	var p struct {
		Metadata struct {
			UID             types.UID         `json:"uid"`
			Finalizers      *[]string         `json:"finalizers"`
			Annotations     map[string]string `json:"annotations"`
			OwnerReferences []json.RawMessage `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return ActionPatch, ""
	}
	m := p.Metadata
	switch {
	case m.Finalizers != nil:
		return ActionRemoveFinalizer, m.UID
	case m.Annotations != nil:
		return ActionAnnotate, m.UID
	case m.OwnerReferences == nil:
		return ActionPatch, m.UID
	}
	for _, r := range m.OwnerReferences {
		var dir deleteDirective
		if json.Unmarshal(r, &dir) == nil && dir.Patch == "delete" {
			return ActionRemoveOwnerRefs, m.UID
		}
	}
	if m.UID != "" {
		return ActionUnblockOwnerRefs, m.UID // the strategic merge patch names only blocking refs
	}
	return ActionPatch, m.UID // a JSON merge patch replacing the list: never sent first in dry-run
}
