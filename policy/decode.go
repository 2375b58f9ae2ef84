package policy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// MaxDocumentSize bounds a policy document: a ConfigMap holds at most 1 MiB.
const MaxDocumentSize = 1 << 20

// documentPath names the whole document in errors that are not about one field (YAML syntax,
// a document that is not an object).
var documentPath = field.NewPath(ConfigMapKey)

// Decode reads a policy document (YAML or JSON) strictly: every unknown field is an error with
// its path ("rules[0].colect"), and so is a duplicate key. It reports every such error, not only
// the first, but does not validate values: see Validate, or Parse for both. The policy is nil
// only when the document cannot be read at all.
func Decode(data []byte) (*Policy, field.ErrorList) {
	if len(data) > MaxDocumentSize {
		return nil, field.ErrorList{field.TooLong(documentPath, "", MaxDocumentSize)}
	}
	// YAMLToJSONStrict rejects duplicate keys; sigs.k8s.io/json then reports unknown fields
	// with their full path, all of them (encoding/json's DisallowUnknownFields stops at the
	// first and names no path).
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(documentPath, field.OmitValueType{}, "not a valid YAML document: "+oneLine(err))}
	}
	p := &Policy{}
	strict, err := sigsjson.UnmarshalStrict(js, p)
	if err != nil {
		// A value of the wrong type (a number where a string goes, a list where an object
		// goes). The decoder names the first one only, and hides the unknown fields it found:
		// report it alone, rather than what a half-decoded document would fail validation for.
		return nil, field.ErrorList{typeError(err)}
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, strictError(e))
	}
	return p, errs
}

// typeErrorRE reads the decoder's type error: "json: cannot unmarshal number into Go struct
// field Rule.rules.collect of type string". Its path has no list indexes.
var typeErrorRE = regexp.MustCompile(`cannot unmarshal (\w+) into Go struct field \w+\.(\S+) of type (\S+)`)

func typeError(err error) *field.Error {
	m := typeErrorRE.FindStringSubmatch(err.Error())
	if m == nil {
		if strings.Contains(err.Error(), "into Go value of type") {
			return field.Invalid(documentPath, field.OmitValueType{}, "the document must be a YAML mapping (apiVersion: ..., kind: Policy, rules: ...)")
		}
		return field.Invalid(documentPath, field.OmitValueType{}, oneLine(err))
	}
	return &field.Error{Type: field.ErrorTypeInvalid, Field: m[2], BadValue: field.OmitValueType{},
		Detail: "must be " + jsonKind(m[3]) + ", not " + m[1] + " (the first such field; list indexes are not known)"}
}

// jsonKind names the YAML kind of value a Go type decodes from.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.Contains(goType, "."):
		if goType == "v1.DeletionPropagation" {
			return "a string"
		}
		return "a mapping"
	default:
		return "a " + goType
	}
}

// strictError turns one strict decoding error into a field error at its path.
func strictError(err error) *field.Error {
	var fe sigsjson.FieldError
	if !errors.As(err, &fe) {
		return field.Invalid(documentPath, field.OmitValueType{}, oneLine(err))
	}
	path := fe.FieldPath()
	if path == "" { // a top-level key with an empty name
		path = documentPath.String()
	}
	switch msg := err.Error(); {
	case strings.HasPrefix(msg, "unknown field"):
		return &field.Error{Type: field.ErrorTypeForbidden, Field: path, BadValue: field.OmitValueType{},
			Detail: "unknown field (check its spelling and indentation)"}
	case strings.HasPrefix(msg, "duplicate field"):
		return &field.Error{Type: field.ErrorTypeDuplicate, Field: path, BadValue: field.OmitValueType{}, Detail: "the field is given twice"}
	default:
		return &field.Error{Type: field.ErrorTypeInvalid, Field: path, BadValue: field.OmitValueType{}, Detail: oneLine(err)}
	}
}

// Parse decodes, validates and compiles a policy document. It returns every decoding and
// validation error; the policy is compiled only when there is none.
func Parse(data []byte) (*Compiled, *Policy, field.ErrorList) {
	p, errs := Decode(data)
	if p == nil {
		return nil, nil, errs
	}
	errs = append(errs, Validate(p, nil)...)
	if len(errs) > 0 {
		return nil, p, errs
	}
	return compile(p), p, nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(fmt.Sprint(err)), " ")
}
