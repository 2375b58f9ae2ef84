package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The JSON Schema of the policy document: docs/policy.schema.json (Schema), and the chart's
// inline policy value in deploy/chart/values.schema.json (ValuesSchema), both written by `make
// generate` and checked by `make verify`. The structure (every field, its JSON name and type,
// which ones are lists or maps) comes from the Go types by reflection; what the types cannot
// say (each field's description, which zero value Validate refuses, formats, enums and the
// rules between fields) is stated once, in schemaFields. Generation fails when a field of the
// types has no entry there or an entry names no field, so the two cannot drift apart.
//
// The schema refuses nothing that Validate accepts: null, which the decoder reads as the zero
// value, is allowed wherever the zero value is valid. Validate refuses more (schemaCannot).

// schemaDraft is the draft of Schema: draft-07, the newest one editors' YAML support
// (yaml-language-server) implements in full. Helm's validator (santhosh-tekuri/jsonschema)
// reads every draft, and each keyword used here means the same in 2020-12, the draft of the
// chart's values.schema.json, where ValuesSchema is embedded.
const schemaDraft = "http://json-schema.org/draft-07/schema#"

// schemaCannot lists what Validate and `cascade policy validate` refuse and no JSON Schema can
// express.
const schemaCannot = "a key given twice; a document over 1 MiB; an After delay under 1s or beyond a Go duration's range; " +
	"a rule that could never apply (its resource is in ignoredResources, or an earlier rule of the same kind selects every " +
	"namespace of its resource); a defaultPropagation rule for a resource cascade does not watch (--ignored-resources, events by default)"

// The formats of names in a policy, as regular expressions that Go's regexp (Helm's validator)
// and ECMA-262 (editors) read the same way: apimachinery's own, which it does not export.
// TestSchemaFormats checks them against apimachinery's validation functions.
const (
	dnsLabelFmt     = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	dnsSubdomainFmt = dnsLabelFmt + `(\.` + dnsLabelFmt + `)*`
	labelNameFmt    = `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
	// labelNameMaxLength is the longest name part of a label key (apimachinery's
	// labelKeyMaxLength); the longest label value is content.LabelValueMaxLength.
	labelNameMaxLength = 63
	// durationFmt is a non-negative time.ParseDuration ("10m", "1h30m", "1.5h"): Validate also
	// checks its range and MinCollectAfter.
	durationFmt = `\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+`
)

// The patterns the schema uses, built from the formats above.
var (
	resourcePattern = "^" + dnsSubdomainFmt + "$" // resource.group: DNS labels joined by dots
	// resourceLengthPattern bounds the resource (a DNS label) and the group (a DNS subdomain).
	resourceLengthPattern = fmt.Sprintf(`^[^.]{1,%d}(\..{1,%d})?$`, content.DNS1123LabelMaxLength, content.DNS1123SubdomainMaxLength)
	// versionedPattern is a group that starts with a version: resource.v1.group.
	versionedPattern = `^[^.]+\.` + versionFmt + `(\.|$)`
	// labelKeyPattern is a label key, its name's length included: [prefix/]name.
	labelKeyPattern = "^(" + dnsSubdomainFmt + "/)?" +
		fmt.Sprintf(`([A-Za-z0-9][-A-Za-z0-9_.]{0,%d})?[A-Za-z0-9]$`, labelNameMaxLength-2)
	// labelKeyLongPrefixPattern is a label key whose prefix is too long.
	labelKeyLongPrefixPattern = fmt.Sprintf(`^[^/]{%d,}/`, content.DNS1123SubdomainMaxLength+1)
	labelValuePattern         = "^(" + labelNameFmt + ")?$"
	// collectPattern is Rule.Collect: Never, After <duration>, or empty (as built in).
	collectPattern = "^(" + CollectNeverValue + "|" + regexp.QuoteMeta(CollectAfterPrefix) + durationFmt + ")?$"
)

// schemaField is what the schema says of one place of the document beyond its Go type.
type schemaField struct {
	doc string
	// required: Validate refuses the zero value, which absence and null decode to, so the
	// schema requires the field and refuses null. Otherwise null is allowed (it reads as absent).
	required bool
	// more adds the constraints the type does not say.
	more func(s *schemaObject)
	// keys, for the keys of a map ("{key}"), returns the map's patternProperties: the patterns
	// of valid keys, each with value, the schema of the map's values. (Not propertyNames:
	// Helm's validator reports a propertyNames error at a wrong place, santhosh-tekuri/jsonschema
	// issue 269; a key that matches no pattern is refused by additionalProperties, at the map.)
	keys func(value *schemaObject) *schemaObject
}

// schemaFields describes each place of the document, by path: "" is the document, a field is
// its JSON name after its parent's path and a dot, "[]" an item of a list, "{}" a value of a
// map and "{key}" a map's keys.
var schemaFields = map[string]schemaField{
	"": {
		required: true,
		doc: "A cascade policy document (docs/policy.md): the key " + ConfigMapKey + " of the policy ConfigMap (--policy-configmap). " +
			"cascade decodes it strictly and validates it; `cascade policy validate -f FILE` also refuses what this schema cannot express: " +
			schemaCannot + ".",
	},
	"apiVersion": {required: true, doc: APIVersion + ".", more: constant(APIVersion)},
	"kind":       {required: true, doc: Kind + ".", more: constant(Kind)},
	"ignoredResources": {
		doc:  "Resources cascade never watches nor collects, on top of its --ignored-resources (events by default), each once.",
		more: list(MaxIgnoredResources, true),
	},
	"ignoredResources[]": {required: true, doc: resourceDoc, more: resourceFormat},
	"rules": {
		doc: "Per resource, and optionally per namespace, how its dependents are collected (collect) and what a delete of one of its objects " +
			"that names no propagation policy does (defaultPropagation). For an object, the first rule that selects it decides each kind of rule.",
		more: list(MaxRules, false),
	},
	"rules[]": {
		required: true,
		doc:      "A rule: a resource, optionally a namespaceSelector, and collect, defaultPropagation or both.",
		more:     ruleConstraints,
	},
	"rules[].resource": {required: true, doc: resourceDoc, more: resourceFormat},
	"rules[].namespaceSelector": {
		doc: "Narrows the rule to objects in namespaces whose labels match (a label selector); such a rule never selects " +
			"cluster-scoped objects. Empty ({}): every namespace. Absent: every object.",
	},
	"rules[].namespaceSelector.matchLabels":        {doc: "Labels the namespace must have, with these values."},
	"rules[].namespaceSelector.matchLabels{key}":   {doc: "Each key is a label key: " + labelKeyFormatDoc, keys: labelKeys},
	"rules[].namespaceSelector.matchLabels{}":      {doc: labelValueDoc, more: labelValueFormat},
	"rules[].namespaceSelector.matchExpressions":   {doc: "Requirements on the namespace's labels, all of which must hold."},
	"rules[].namespaceSelector.matchExpressions[]": {required: true, doc: "A requirement on one label.", more: requirementConstraints},
	"rules[].namespaceSelector.matchExpressions[].key": {
		required: true,
		doc:      labelKeyDoc,
		more:     labelKeyFormat,
	},
	"rules[].namespaceSelector.matchExpressions[].operator": {
		required: true,
		doc:      "In and NotIn take values; Exists and DoesNotExist take none.",
		more: enum(string(metav1.LabelSelectorOpIn), string(metav1.LabelSelectorOpNotIn),
			string(metav1.LabelSelectorOpExists), string(metav1.LabelSelectorOpDoesNotExist)),
	},
	"rules[].namespaceSelector.matchExpressions[].values":   {doc: "The label values of In and NotIn (one at least)."},
	"rules[].namespaceSelector.matchExpressions[].values[]": {doc: labelValueDoc, more: labelValueFormat},
	"rules[].defaultPropagation": {
		doc: "For objects of the resource as owners: what a delete of one that names no propagation policy does to its dependents " +
			"(Orphan, Foreground or Background; empty: no rule). cascade applies Orphan and Foreground as the orphan or " +
			"foregroundDeletion finalizer on the object; an explicit policy on the delete always wins. Background is refused for " +
			strings.Join(builtinOrphanNames(), " and ") + ", whose built-in Orphan no finalizer can override.",
		more: enum(append(propagationNames(), "")...),
	},
	"rules[].collect": {
		doc: "For objects of the resource as dependents, once every owner is gone: Never (cascade removes the references to the " +
			"gone owners instead of deleting the object) or After <duration> such as After 10m (at least 1s; the object is kept " +
			"that long after cascade found its last owner gone, then collected). Empty: collected as built in.",
		more: pattern(collectPattern),
	},
}

const (
	resourceDoc = "A resource as resource.group, the group left out for the core group: configmaps, replicasets.apps, " +
		"widgets.example.com (the lowercase plural resource name, not the kind, and no version)."
	labelKeyDoc        = "A label key: " + labelKeyFormatDoc
	labelKeyFormatDoc  = "a name (at most 63 characters) with an optional DNS subdomain prefix and a slash, example.com/name."
	labelKeyLongPrefix = "the prefix of a label key is a DNS subdomain of at most 253 characters"
	labelValueDoc      = "A label value: empty, or at most 63 characters, alphanumeric at both ends, with - _ . inside."
)

// Schema returns docs/policy.schema.json: the JSON Schema (draft-07) of a policy document.
func Schema() ([]byte, error) {
	s, err := buildSchema()
	if err != nil {
		return nil, err
	}
	doc := newSchemaObject().
		set("$schema", schemaDraft).
		set("$comment", "Generated from package policy by make generate (policy/schema.go); do not edit.").
		set("title", "cascade policy ("+APIVersion+", kind "+Kind+")")
	for _, k := range s.keys {
		doc.set(k, s.vals[k])
	}
	b, err := marshalSchema(doc)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// ValuesSchema returns the schema of the chart's policy value (compact JSON): the document
// without apiVersion and kind, which the chart's template adds.
func ValuesSchema() ([]byte, error) {
	s, err := buildSchema()
	if err != nil {
		return nil, err
	}
	props := s.vals["properties"].(*schemaObject)
	props.remove("apiVersion").remove("kind")
	s.remove("required")
	s.set("description", "The policy document without apiVersion and kind, which the chart adds, rendered into the ConfigMap "+
		"cascade-policy (docs/policy.md). Generated from package policy by make generate, as docs/policy.schema.json; "+
		"`cascade policy validate` also refuses what the schema cannot express: "+schemaCannot+".")
	return marshalSchema(s)
}

func buildSchema() (*schemaObject, error) {
	g := &schemaGen{seen: map[string]bool{}}
	s := g.node(reflect.TypeFor[Policy](), "")
	for path := range schemaFields {
		if !g.seen[path] {
			g.errs = append(g.errs, fmt.Errorf("schemaFields[%q]: no such place in the document", path))
		}
	}
	if len(g.errs) > 0 {
		slices.SortFunc(g.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(g.errs...)
	}
	return s, nil
}

type schemaGen struct {
	seen map[string]bool
	errs []error
}

// node returns the schema of a value of type t at path.
func (g *schemaGen) node(t reflect.Type, path string) *schemaObject {
	f, ok := schemaFields[path]
	if !ok {
		g.errs = append(g.errs, fmt.Errorf("%s (%s): no entry in schemaFields", path, t))
	}
	g.seen[path] = true
	s := newSchemaObject()
	if f.doc != "" {
		s.set("description", f.doc)
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var typ string
	switch t.Kind() {
	case reflect.String:
		typ = "string"
	case reflect.Slice:
		typ = "array"
	case reflect.Map:
		typ = "object"
	case reflect.Struct:
		typ = "object"
	default:
		g.errs = append(g.errs, fmt.Errorf("%s: no JSON Schema type for %s", path, t))
	}
	if f.required {
		s.set("type", typ)
	} else {
		s.set("type", []string{typ, "null"})
	}
	// The constraints of an object come after its properties, those of a list or a string
	// before its items.
	if t.Kind() != reflect.Struct {
		g.constrain(s, f)
	}
	switch t.Kind() {
	case reflect.Slice:
		s.set("items", g.node(t.Elem(), path+"[]"))
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			g.errs = append(g.errs, fmt.Errorf("%s: a map whose keys are %s", path, t.Key()))
		}
		key, ok := schemaFields[path+"{key}"]
		g.seen[path+"{key}"] = true
		if !ok || key.keys == nil {
			g.errs = append(g.errs, fmt.Errorf("%s{key}: no entry with keys in schemaFields", path))
			break
		}
		if key.doc != "" {
			s.set("description", strings.TrimSpace(f.doc+" "+key.doc))
		}
		s.set("patternProperties", key.keys(g.node(t.Elem(), path+"{}")))
		s.set("additionalProperties", false) // a key that matches no pattern
	case reflect.Struct:
		var required []string
		props := newSchemaObject()
		for i := range t.NumField() {
			sf := t.Field(i)
			name := jsonName(sf)
			if name == "" {
				continue
			}
			child := name
			if path != "" {
				child = path + "." + name
			}
			props.set(name, g.node(sf.Type, child))
			if schemaFields[child].required {
				required = append(required, name)
			}
		}
		if len(required) > 0 {
			s.set("required", required)
		}
		s.set("additionalProperties", false) // decoded strictly: an unknown field is an error
		s.set("properties", props)
		g.constrain(s, f)
	}
	return s
}

// constrain adds f's constraints to s.
func (g *schemaGen) constrain(s *schemaObject, f schemaField) {
	if f.more != nil {
		f.more(s)
	}
	if e, ok := s.vals["enum"].([]any); ok && !f.required {
		s.set("enum", append(e, nil)) // null reads as absent
	}
}

// jsonName is the name of a struct field in JSON, "" for a field JSON leaves out.
func jsonName(sf reflect.StructField) string {
	if !sf.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return sf.Name
	}
	return name
}

// fieldName is the JSON name of T's field goName; it panics when T has no such field, so that
// a constraint naming a field cannot outlive it.
func fieldName[T any](goName string) string {
	sf, ok := reflect.TypeFor[T]().FieldByName(goName)
	if !ok || jsonName(sf) == "" {
		panic(fmt.Sprintf("%s has no JSON field %s", reflect.TypeFor[T](), goName))
	}
	return jsonName(sf)
}

func constant(v string) func(*schemaObject) {
	return func(s *schemaObject) { s.set("const", v) }
}

func enum(vs ...string) func(*schemaObject) {
	return func(s *schemaObject) {
		e := make([]any, len(vs))
		for i, v := range vs {
			e[i] = v
		}
		s.set("enum", e)
	}
}

func pattern(p string) func(*schemaObject) {
	return func(s *schemaObject) { s.set("pattern", p) }
}

func list(maxItems int, unique bool) func(*schemaObject) {
	return func(s *schemaObject) {
		s.set("maxItems", maxItems)
		if unique {
			s.set("uniqueItems", true)
		}
	}
}

func resourceFormat(s *schemaObject) {
	s.set("pattern", resourcePattern)
	s.set("allOf", []any{
		newSchemaObject().set("pattern", resourceLengthPattern),
		newSchemaObject().set("not", newSchemaObject().
			set("description", "no version in the group: resource.group, not resource.version.group").
			set("pattern", versionedPattern)),
	})
}

func labelKeyFormat(s *schemaObject) {
	s.set("pattern", labelKeyPattern)
	s.set("not", newSchemaObject().set("description", labelKeyLongPrefix).set("pattern", labelKeyLongPrefixPattern))
}

func labelKeys(value *schemaObject) *schemaObject {
	return newSchemaObject().
		set(labelKeyPattern, value).
		set(labelKeyLongPrefixPattern, newSchemaObject().set("description", labelKeyLongPrefix).set("not", newSchemaObject()))
}

func labelValueFormat(s *schemaObject) {
	s.set("maxLength", content.LabelValueMaxLength)
	s.set("pattern", labelValuePattern)
}

// ruleConstraints: a rule sets collect, defaultPropagation or both; Background is refused for
// the resources whose built-in default is Orphan.
func ruleConstraints(s *schemaObject) {
	collect, prop, resource := fieldName[Rule]("Collect"), fieldName[Rule]("DefaultPropagation"), fieldName[Rule]("Resource")
	set := func(field string) *schemaObject {
		return newSchemaObject().
			set("required", []string{field}).
			set("properties", newSchemaObject().set(field, newSchemaObject().set("type", "string").set("minLength", 1)))
	}
	s.set("anyOf", []any{set(collect), set(prop)})
	s.set("if", newSchemaObject().
		set("required", []string{resource}).
		set("properties", newSchemaObject().set(resource, newSchemaObject().set("enum", builtinOrphanNames()))))
	var allowed []any // every value of defaultPropagation but Background
	for _, p := range append(propagationNames(), "") {
		if p != string(metav1.DeletePropagationBackground) {
			allowed = append(allowed, p)
		}
	}
	s.set("then", newSchemaObject().
		set("properties", newSchemaObject().set(prop, newSchemaObject().
			set("description", "Not Background: kube-apiserver orphans the dependents of this resource when a delete names no "+
				"propagation policy, and no finalizer makes such a delete cascade in the background").
			set("enum", append(allowed, nil)))))
}

// requirementConstraints: In and NotIn take values, Exists and DoesNotExist none.
func requirementConstraints(s *schemaObject) {
	op, values := fieldName[metav1.LabelSelectorRequirement]("Operator"), fieldName[metav1.LabelSelectorRequirement]("Values")
	when := func(ops ...metav1.LabelSelectorOperator) *schemaObject {
		return newSchemaObject().
			set("required", []string{op}).
			set("properties", newSchemaObject().set(op, newSchemaObject().set("enum", ops)))
	}
	s.set("allOf", []any{
		newSchemaObject().
			set("if", when(metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn)).
			set("then", newSchemaObject().
				set("required", []string{values}).
				set("properties", newSchemaObject().set(values, newSchemaObject().set("type", "array").set("minItems", 1)))),
		newSchemaObject().
			set("if", when(metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist)).
			set("then", newSchemaObject().
				set("properties", newSchemaObject().set(values, newSchemaObject().set("maxItems", 0)))),
	})
}

func propagationNames() []string {
	out := make([]string, len(supportedPropagations))
	for i, p := range supportedPropagations {
		out[i] = string(p)
	}
	return out
}

func builtinOrphanNames() []string {
	out := make([]string, len(builtinOrphans))
	for i, gr := range builtinOrphans {
		out[i] = gr.String()
	}
	return out
}

// schemaObject is a JSON object that keeps its keys in the order they were first set, so that
// the generated schema reads top-down and is the same on every run.
type schemaObject struct {
	keys []string
	vals map[string]any
}

func newSchemaObject() *schemaObject { return &schemaObject{vals: map[string]any{}} }

func (o *schemaObject) set(key string, v any) *schemaObject {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
	return o
}

func (o *schemaObject) remove(key string) *schemaObject {
	if _, ok := o.vals[key]; ok {
		delete(o.vals, key)
		o.keys = slices.DeleteFunc(o.keys, func(k string) bool { return k == key })
	}
	return o
}

func (o *schemaObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := marshalSchema(k)
		if err != nil {
			return nil, err
		}
		val, err := marshalSchema(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalSchema is compact JSON without HTML escapes (patterns hold no <, > or &, but a
// description may).
func marshalSchema(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
