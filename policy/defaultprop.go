package policy

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The policy's defaultPropagation rules. kube-apiserver honours an orphan or foregroundDeletion
// finalizer already on an object when a delete names no propagation policy, and an explicit
// policy replaces it; so a default of Orphan or Foreground is applied by putting that finalizer
// on the owner ("stamping"): at creation by the MutatingAdmissionPolicy Admission renders, and on
// objects that existed before by cascade's stamping pass. Both record what they stamped in
// DefaultPropagationAnnotation, so that a rule that changes or goes away undoes exactly that
// (PlanStamp).

// DefaultPropagationAnnotation records the default cascade stamped on an object: its value is
// the propagation (Orphan or Foreground) whose finalizer cascade added. Cascade removes that
// finalizer, and only it, when the rule in force for the object no longer asks for it. Removing
// the finalizer by hand while keeping the annotation opts the object out: it is not stamped
// again while the rule stays the same.
const DefaultPropagationAnnotation = "cascade.dev/default-propagation"

// GC finalizers kube-apiserver acts on.
const (
	FinalizerOrphan     = metav1.FinalizerOrphanDependents
	FinalizerForeground = metav1.FinalizerDeleteDependents
)

// StampFinalizer is the finalizer that applies default propagation p: "orphan" for Orphan,
// "foregroundDeletion" for Foreground, "" for anything else (Background needs no finalizer).
func StampFinalizer(p metav1.DeletionPropagation) string {
	switch p {
	case metav1.DeletePropagationOrphan:
		return FinalizerOrphan
	case metav1.DeletePropagationForeground:
		return FinalizerForeground
	default:
		return ""
	}
}

// defaultRule is a compiled defaultPropagation rule.
type defaultRule struct {
	DefaultRule
	selector selector              // nil: every object, cluster-scoped ones included
	ls       *metav1.LabelSelector // the rule's selector as written (Admission renders it)
}

// HasDefaults reports whether some defaultPropagation rule names gr.
func (c *Compiled) HasDefaults(gr GroupResource) bool {
	if c == nil {
		return false
	}
	_, ok := c.defaultsOf[gr]
	return ok
}

// NeedDefaultNamespaceLabels reports whether DefaultFor needs the labels of the namespace of an
// object of gr: one of gr's defaultPropagation rules has a namespace selector.
func (c *Compiled) NeedDefaultNamespaceLabels(gr GroupResource) bool {
	if c == nil {
		return false
	}
	for _, i := range c.defaultsOf[gr] {
		if c.defaultRules[i].selector != nil {
			return true
		}
	}
	return false
}

// DefaultFor returns the defaultPropagation rule in force for an object of gr in namespace (""
// for a cluster-scoped object) whose labels are nsLabels: the first rule that selects it. False
// when none does (kube-apiserver's built-in default applies). A rule with a namespace selector
// never selects a cluster-scoped object.
func (c *Compiled) DefaultFor(gr GroupResource, namespace string, nsLabels map[string]string) (DefaultRule, bool) {
	if c == nil {
		return DefaultRule{}, false
	}
	for _, i := range c.defaultsOf[gr] {
		r := &c.defaultRules[i]
		if r.selector != nil && (namespace == "" || !r.selector.matches(nsLabels)) {
			continue
		}
		return r.DefaultRule, true
	}
	return DefaultRule{}, false
}

// StampState is what PlanStamp needs of a live object.
type StampState struct {
	Finalizers []string
	// Stamped is the object's DefaultPropagationAnnotation ("" when absent).
	Stamped string
	// Deleting is metadata.deletionTimestamp != nil.
	Deleting bool
}

// StampPlan is PlanStamp's answer. When Change is false nothing is to be written; otherwise the
// object's finalizers become Finalizers and its DefaultPropagationAnnotation becomes Annotation
// ("" removes it).
type StampPlan struct {
	Change     bool
	Finalizers []string
	Annotation string
	// Added and Removed are the finalizers the change adds and removes ("" for none), for logs
	// and metrics.
	Added, Removed string
}

// PlanStamp says how to bring an object to the default propagation want ("" or Background:
// none to stamp). It never touches an object being deleted (its finalizers are the delete's
// now), never removes a finalizer cascade did not record stamping, and never adds one next to
// an orphan or foregroundDeletion finalizer the object already carries. An object whose
// annotation already records want is left alone, even if its finalizer was removed by hand
// (that is how an object opts out).
func PlanStamp(s StampState, want metav1.DeletionPropagation) StampPlan {
	wantFin := StampFinalizer(want)
	if s.Deleting || s.Stamped == string(want) && wantFin != "" {
		return StampPlan{}
	}
	if s.Stamped == "" && wantFin == "" {
		return StampPlan{}
	}
	fins := slices.Clone(s.Finalizers)
	plan := StampPlan{}
	if s.Stamped != "" {
		// Undo the recorded stamp: its finalizer (when the value names one and it is still there)
		// and the annotation.
		if old := StampFinalizer(metav1.DeletionPropagation(s.Stamped)); old != "" {
			if i := slices.Index(fins, old); i >= 0 {
				fins = slices.Delete(fins, i, i+1)
				plan.Removed = old
			}
		}
		plan.Change = true
	}
	if wantFin != "" && !slices.Contains(fins, FinalizerOrphan) && !slices.Contains(fins, FinalizerForeground) {
		fins = append(fins, wantFin)
		plan.Added = wantFin
		plan.Annotation = string(want)
		plan.Change = true
	}
	if !plan.Change {
		return StampPlan{}
	}
	plan.Finalizers = fins
	return plan
}
