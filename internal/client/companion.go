package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/policy"
)

// The modes of --mode.
const (
	// ModeCollector: cascade is the cluster's garbage collector (kube-controller-manager runs
	// with --controllers=*,-garbage-collector-controller, or not at all).
	ModeCollector = "collector"
	// ModeCompanion: kube-controller-manager's collector stays on and collects; cascade applies
	// default propagation, diagnoses stuck deletions, explains and exports metrics, and never
	// deletes an object, removes an owner reference or finishes a GC finalizer (Edge.Companion).
	ModeCompanion = "companion"
)

// Companion actions: the writes companion mode refuses (labels of
// cascade_companion_refused_writes_total), besides the dry-run actions of the same names.
const (
	// ActionStamp is the default-propagation stamp (StampDefault), the one object write
	// companion mode sends.
	ActionStamp = "stamp"
)

// ErrCompanion is the error of every write companion mode refuses: nothing was sent.
var ErrCompanion = errors.New("refused in companion mode: kube-controller-manager's garbage collector deletes objects, removes owner references and finishes GC finalizers, never cascade")

// companionMemory bounds the objects whose last read is remembered, so that a stamp's patch is
// checked against the read it was planned on without a second GET.
const companionMemory = 4096

// Companion returns the Edge of companion mode (--mode=companion): the one place where it is
// decided what cascade may write beside kube-controller-manager's garbage collector.
//
// Objects sends reads, and of the object writes only the default-propagation stamp (a JSON
// merge patch of the finalizer list and policy.DefaultPropagationAnnotation at a
// resourceVersion, StampDefault's), and only to an object that is not being deleted at that
// resourceVersion: a GC finalizer added to, or taken back from, a live object changes what its
// future delete does, never finishes one. Every other object write (a DELETE, an ownerReference
// removal or unblocking, a finalizer removal, cascade's collect bookkeeping annotation, a patch
// of any other shape) is refused with ErrCompanion, counted in
// cascade_companion_refused_writes_total{action} and logged as an error (the collector's
// workers do not run in this mode, so a refusal means a caller forgot it). ConfigMaps (the
// orphan record, which only a collector writes) refuses its writes the same way; Admission and
// Events go through.
func (e Edge) Companion(reg prometheus.Registerer) Edge {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "cascade",
		Name:      "companion_refused_writes_total",
		Help:      "Writes refused in --mode=companion (delete, remove_owner_refs, unblock_owner_refs, remove_finalizer, annotate, patch, stamp on an object being deleted, write_configmap): none is expected; each is a bug, logged as an error.",
	}, []string{"action"})
	reg.MustRegister(refused)
	reads, err := lru.New[string, readState](companionMemory)
	if err != nil {
		panic(fmt.Sprintf("companion memory: %v", err)) // the size is a positive constant
	}
	c := &companionObjects{c: e.Objects, refused: refused, reads: reads}
	return Edge{
		Objects:    c,
		Admission:  e.Admission,
		ConfigMaps: func(ns string) ConfigMaps { return companionConfigMaps{c: c, read: e.ConfigMaps(ns), ns: ns} },
		Events:     e.Events,
	}
}

// readState is what companion mode remembers of an object's last read: enough to tell whether
// a patch at a resourceVersion meets it being deleted.
type readState struct {
	uid      types.UID
	rv       string
	deleting bool
	// finalizers and stamped (its policy.DefaultPropagationAnnotation, "" when absent) are what
	// a stamp may change: checked against the patch (stampChangesOnly).
	finalizers []string
	stamped    string
}

func stateOf(live *metav1.PartialObjectMetadata) readState {
	return readState{uid: live.UID, rv: live.ResourceVersion, deleting: live.DeletionTimestamp != nil,
		finalizers: slices.Clone(live.Finalizers), stamped: live.Annotations[policy.DefaultPropagationAnnotation]}
}

// companionObjects is Objects in companion mode. It is safe for concurrent use.
type companionObjects struct {
	c       Interface
	refused *prometheus.CounterVec
	reads   *lru.Cache[string, readState]
}

var _ Interface = (*companionObjects)(nil)

func objectKey(gvr schema.GroupVersionResource, namespace, name string) string {
	return gvr.String() + " " + namespace + "/" + name
}

// Get reads the live object and remembers its state.
func (c *companionObjects) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	live, err := c.c.Get(ctx, gvr, namespace, name)
	if err == nil {
		c.reads.Add(objectKey(gvr, namespace, name), stateOf(live))
	}
	return live, err
}

// Delete is refused.
func (c *companionObjects) Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions) error {
	var uid types.UID
	if opts.Preconditions != nil && opts.Preconditions.UID != nil {
		uid = *opts.Preconditions.UID
	}
	return c.refuse(ctx, ActionDelete, Target{GVR: gvr, Namespace: namespace, Name: name, UID: uid})
}

// Patch sends a default-propagation stamp on an object not being deleted that changes nothing
// but cascade's own stamp, and refuses every other patch. What the patch changes is checked
// against the object as read at the patch's resourceVersion, not only its shape: a finalizer
// list that drops anything but the GC finalizer the object's annotation records cascade
// stamped, or adds anything but one GC finalizer that the new annotation records, is refused
// (issue 32.3: a patch shaped like a stamp could drop a foreign finalizer from a live object).
func (c *companionObjects) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte) (*metav1.PartialObjectMetadata, error) {
	t := Target{GVR: gvr, Namespace: namespace, Name: name}
	stamp, ok := stampPatch(pt, data)
	if !ok {
		action, uid := classifyPatch(data)
		t.UID = uid
		return nil, c.refuse(ctx, action, t)
	}
	// The patch is valid only at rv (the server answers 409 otherwise): the object as read at
	// rv must not be being deleted. The read the stamp was planned on is remembered; else read.
	key := objectKey(gvr, namespace, name)
	st, known := c.reads.Get(key)
	if !known || st.rv != stamp.rv {
		live, err := c.Get(ctx, gvr, namespace, name)
		if err != nil {
			return nil, err
		}
		if live.ResourceVersion != stamp.rv {
			return nil, apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("the object is at resourceVersion %s, not %s", live.ResourceVersion, stamp.rv))
		}
		st = stateOf(live)
	}
	t.UID = st.uid
	if st.deleting {
		return nil, c.refuse(ctx, ActionStamp, t)
	}
	if err := stampChangesOnly(st, stamp); err != nil {
		return nil, c.refuse(ctx, ActionStamp, t, err)
	}
	return c.c.Patch(ctx, gvr, namespace, name, pt, data)
}

// stampChangesOnly says why the stamp p, applied to the object as st read it, would change
// more than cascade's own stamp (nil when it changes only that): at most the one GC finalizer
// st's annotation records removed, at most one GC finalizer added, which p's annotation then
// records; every other finalizer kept, as many times as it was there.
func stampChangesOnly(st readState, p stampPatchData) error {
	count := map[string]int{}
	for _, f := range st.finalizers {
		count[f]++
	}
	for _, f := range p.finalizers {
		count[f]--
	}
	var added, removed []string
	for f, n := range count {
		for ; n > 0; n-- {
			removed = append(removed, f)
		}
		for ; n < 0; n++ {
			added = append(added, f)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	recorded := policy.StampFinalizer(metav1.DeletionPropagation(st.stamped))
	if len(removed) > 1 || len(removed) == 1 && (recorded == "" || removed[0] != recorded) {
		return fmt.Errorf("the patch removes finalizers %v, where cascade's stamp records %q", removed, recorded)
	}
	if len(added) > 1 || len(added) == 1 && (added[0] != policy.FinalizerOrphan && added[0] != policy.FinalizerForeground ||
		p.annotation == nil || policy.StampFinalizer(metav1.DeletionPropagation(*p.annotation)) != added[0]) {
		return fmt.Errorf("the patch adds finalizers %v that are not one GC finalizer its annotation records", added)
	}
	return nil
}

func (c *companionObjects) refuse(ctx context.Context, action string, t Target, why ...error) error {
	c.refused.WithLabelValues(action).Inc()
	err := fmt.Errorf("%s %s: %w", action, t, ErrCompanion)
	if len(why) > 0 {
		err = fmt.Errorf("%s %s: %w: %w", action, t, why[0], ErrCompanion)
	}
	klog.FromContext(ctx).Error(err, "Companion mode: write refused", "action", action, "resource", t.GVR.String(), "namespace", t.Namespace, "name", t.Name, "uid", t.UID)
	return err
}

// stampPatchData is what a default-propagation stamp patch sets: at resourceVersion rv, the
// finalizer list, and the stamp annotation (nil: removed).
type stampPatchData struct {
	rv         string
	finalizers []string
	annotation *string
}

// stampPatch reports whether data is shaped as a default-propagation stamp as stampJMP builds
// it: a JSON merge patch of metadata with a resourceVersion, the finalizer list and the stamp
// annotation alone, nothing else. What it changes is stampChangesOnly's to judge.
func stampPatch(pt types.PatchType, data []byte) (stampPatchData, bool) {
	var out stampPatchData
	if pt != types.MergePatchType {
		return out, false
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(data, &p) != nil || len(p) != 1 || p["metadata"] == nil {
		return out, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p["metadata"], &m) != nil || len(m) != 3 {
		return out, false
	}
	var ann map[string]*string
	if json.Unmarshal(m["resourceVersion"], &out.rv) != nil || out.rv == "" ||
		json.Unmarshal(m["finalizers"], &out.finalizers) != nil || m["finalizers"] == nil ||
		json.Unmarshal(m["annotations"], &ann) != nil || len(ann) != 1 {
		return out, false
	}
	v, ok := ann[policy.DefaultPropagationAnnotation]
	if !ok {
		return out, false
	}
	out.annotation = v
	return out, true
}

// companionConfigMaps is ConfigMaps in companion mode: reads go through, writes (the orphan
// record, a collector's) are refused.
type companionConfigMaps struct {
	c    *companionObjects
	read ConfigMaps
	ns   string
}

func (m companionConfigMaps) Get(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	return m.read.Get(ctx, name)
}

func (m companionConfigMaps) Create(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return nil, m.c.refuse(ctx, ActionWriteConfigMap, Target{GVR: gvrConfigMaps, Namespace: m.ns, Name: cm.Name})
}

func (m companionConfigMaps) MergePatch(ctx context.Context, name string, _ []byte) (*corev1.ConfigMap, error) {
	return nil, m.c.refuse(ctx, ActionWriteConfigMap, Target{GVR: gvrConfigMaps, Namespace: m.ns, Name: name})
}
