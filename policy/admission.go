package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	admissionv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdmissionName names the MutatingAdmissionPolicy and its binding that apply the policy's
// defaultPropagation rules at creation. Cascade owns both: it creates, updates and deletes them,
// and labels them ManagedByLabel=ManagedByValue.
const AdmissionName = "cascade-default-propagation"

// ManagedByLabel and ManagedByValue mark the admission objects as cascade's.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "cascade"
)

// ManagedByCascade reports whether an object with labels is one of cascade's admission objects;
// cascade never updates nor deletes one that is not.
func ManagedByCascade(labels map[string]string) bool {
	return labels[ManagedByLabel] == ManagedByValue
}

// Admission renders the MutatingAdmissionPolicy and binding that stamp the default of the
// policy's defaultPropagation rules on objects as they are created: the rule's finalizer
// (StampFinalizer) and DefaultPropagationAnnotation. Both are nil when no rule stamps anything
// (no rule, or only Background defaults).
//
// One policy covers every rule: a CEL variable picks the first rule that selects the request's
// resource and namespace (the same order DefaultFor follows), and the mutation applies its
// default. Objects created with an orphan or foregroundDeletion finalizer are left alone (a
// match condition), so are deletes (never matched). The failure policy is Ignore: a broken or
// overloaded admission never blocks a create, and the stamping pass catches up with what it
// missed.
func (c *Compiled) Admission() (*admissionv1.MutatingAdmissionPolicy, *admissionv1.MutatingAdmissionPolicyBinding) {
	if c == nil {
		return nil, nil
	}
	// Resources with a stamping rule, in first-rule order.
	var stamped []GroupResource
	for _, r := range c.defaultRules {
		if StampFinalizer(r.Propagation) != "" && !slices.Contains(stamped, r.Resource) {
			stamped = append(stamped, r.Resource)
		}
	}
	if len(stamped) == 0 {
		return nil, nil
	}
	var rules []admissionv1.NamedRuleWithOperations
	for _, gr := range stamped {
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule: admissionv1.Rule{
				APIGroups:   []string{gr.Group},
				APIVersions: []string{"*"},
				Resources:   []string{gr.Resource},
			},
		}})
	}
	// The chain of rules: the first whose resource and namespace match gives the propagation.
	var chain strings.Builder
	for _, r := range c.defaultRules {
		chain.WriteString("(request.resource.group == " + celString(r.Resource.Group) +
			" && request.resource.resource == " + celString(r.Resource.Resource))
		if r.ls != nil {
			chain.WriteString(" && " + celSelector(r.ls))
		}
		chain.WriteString(") ? " + celString(string(r.Propagation)) + " :\n")
	}
	chain.WriteString("''")

	labels := map[string]string{ManagedByLabel: ManagedByValue}
	ignore := admissionv1.Ignore
	p := &admissionv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: AdmissionName, Labels: labels},
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: rules},
			MatchConditions: []admissionv1.MatchCondition{{
				Name: "no-gc-finalizer",
				Expression: "!has(object.metadata.finalizers) || !object.metadata.finalizers.exists(f, f == " +
					celString(FinalizerOrphan) + " || f == " + celString(FinalizerForeground) + ")",
			}},
			Variables: []admissionv1.Variable{{Name: "propagation", Expression: chain.String()}},
			Mutations: []admissionv1.Mutation{{
				PatchType: admissionv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: "variables.propagation == " +
					celString(string(metav1.DeletePropagationOrphan)) + " || variables.propagation == " +
					celString(string(metav1.DeletePropagationForeground)) + " ?\n" +
					"  Object{metadata: Object.metadata{\n" +
					"    finalizers: [variables.propagation == " + celString(string(metav1.DeletePropagationOrphan)) + " ? " +
					celString(FinalizerOrphan) + " : " + celString(FinalizerForeground) + "],\n" +
					"    annotations: {" + celString(DefaultPropagationAnnotation) + ": variables.propagation}}} :\n" +
					"  Object{}"},
			}},
			FailurePolicy:      &ignore,
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
		},
	}
	b := &admissionv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: AdmissionName, Labels: labels},
		Spec:       admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: AdmissionName},
	}
	return p, b
}

// celSelector renders a namespace selector Validate accepted as a CEL condition on the
// request's namespace: false for a cluster-scoped object (namespaceObject is null), as
// DefaultFor decides; an empty selector matches every namespace.
func celSelector(ls *metav1.LabelSelector) string {
	const labels = "namespaceObject.metadata.labels"
	has := func(key string) string {
		return "(has(" + labels + ") && " + celString(key) + " in " + labels + ")"
	}
	in := func(key string, values []string) string {
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = celString(v)
		}
		return "(" + has(key) + " && " + labels + "[" + celString(key) + "] in [" + strings.Join(quoted, ", ") + "])"
	}
	terms := []string{"namespaceObject != null"}
	keys := make([]string, 0, len(ls.MatchLabels))
	for k := range ls.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		terms = append(terms, in(k, []string{ls.MatchLabels[k]}))
	}
	for _, e := range ls.MatchExpressions {
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			terms = append(terms, in(e.Key, e.Values))
		case metav1.LabelSelectorOpNotIn:
			terms = append(terms, "!"+in(e.Key, e.Values))
		case metav1.LabelSelectorOpExists:
			terms = append(terms, has(e.Key))
		case metav1.LabelSelectorOpDoesNotExist:
			terms = append(terms, "!"+has(e.Key))
		default: // Validate rejects other operators; select nothing, as selector.matches does
			terms = append(terms, "false")
		}
	}
	return "(" + strings.Join(terms, " && ") + ")"
}

// celString quotes s as a CEL string literal.
func celString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// AdmissionV1beta1 is p and b at admissionregistration.k8s.io/v1beta1, for API servers that
// serve the MutatingAdmissionPolicy at that version only (Kubernetes 1.34 and 1.35 with it
// turned on). The two versions have the same fields: each object is carried over by its JSON,
// decoded strictly, so a field v1beta1 lacks is an error, never silently dropped. Nil in, nil
// out.
func AdmissionV1beta1(p *admissionv1.MutatingAdmissionPolicy, b *admissionv1.MutatingAdmissionPolicyBinding) (*admissionv1beta1.MutatingAdmissionPolicy, *admissionv1beta1.MutatingAdmissionPolicyBinding, error) {
	if p == nil || b == nil {
		return nil, nil, nil
	}
	var pb admissionv1beta1.MutatingAdmissionPolicy
	if err := convertStrict(p, &pb); err != nil {
		return nil, nil, fmt.Errorf("MutatingAdmissionPolicy at v1beta1: %w", err)
	}
	var bb admissionv1beta1.MutatingAdmissionPolicyBinding
	if err := convertStrict(b, &bb); err != nil {
		return nil, nil, fmt.Errorf("MutatingAdmissionPolicyBinding at v1beta1: %w", err)
	}
	pb.APIVersion, bb.APIVersion = admissionv1beta1.SchemeGroupVersion.String(), admissionv1beta1.SchemeGroupVersion.String()
	return &pb, &bb, nil
}

func convertStrict(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}
