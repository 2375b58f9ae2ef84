package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/policy"
)

// The policy's JSON Schema, docs/policy.schema.json, and its copy in the chart's
// values.schema.json are checked here with santhosh-tekuri/jsonschema at the version Helm
// (tools/helm) validates values.schema.json with, against the same documents as `cascade policy
// validate`: every document the schema refuses, validate refuses, at the same place; validate
// refuses more, what no schema can express (TestPolicyValidateRefusesMore).

const (
	policySchemaFile = "docs/policy.schema.json"
	chartSchemaFile  = "deploy/chart/values.schema.json"
)

// TestPolicySchema: docs/policy.schema.json is what package policy generates, and so is the
// policy property of the chart's values.schema.json (make generate rewrites both; the rest of
// values.schema.json is left as it is).
func TestPolicySchema(t *testing.T) {
	doc, err := policy.Schema()
	if err != nil {
		t.Fatal(err)
	}
	generated(t, policySchemaFile, string(doc))

	values, err := policy.ValuesSchema()
	if err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile("../../" + chartSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := spliceProperty(chart, "policy", values)
	if err != nil {
		t.Fatalf("%s: %v", chartSchemaFile, err)
	}
	generated(t, chartSchemaFile, string(want))
}

// spliceProperty returns the JSON schema file with the value of properties.NAME replaced by
// value, indented as the key's line is; every other byte of the file stays.
func spliceProperty(file []byte, name string, value []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(file))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object (%v)", err)
	}
	// into reads the keys of the object just opened until key, and returns false when the
	// object ends first.
	into := func(key string) (bool, error) {
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return false, err
			}
			if tok == key {
				return true, nil
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	if ok, err := into("properties"); err != nil || !ok {
		return nil, fmt.Errorf("no properties (%v)", err)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("properties is not an object (%v)", err)
	}
	if ok, err := into(name); err != nil || !ok {
		return nil, fmt.Errorf("no properties.%s (%v)", name, err)
	}
	var old json.RawMessage
	if err := dec.Decode(&old); err != nil {
		return nil, err
	}
	end := int(dec.InputOffset())
	start := end - len(old)
	line := bytes.LastIndexByte(file[:start], '\n') + 1
	prefix := file[line : line+len(file[line:start])-len(bytes.TrimLeft(file[line:start], " "))]
	var b bytes.Buffer
	if err := json.Indent(&b, value, string(prefix), "  "); err != nil {
		return nil, err
	}
	return slices.Concat(file[:start], b.Bytes(), file[end:]), nil
}

// compileSchema compiles a schema file of the repository (a path from its root) as Helm does.
func compileSchema(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("../../" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	c := jsonschema.NewCompiler()
	url := "file:///" + file
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url) // also checks the schema against its draft's metaschema
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s
}

// schemaChecker checks policy documents against docs/policy.schema.json and, as the chart's
// policy value, against the chart's values.schema.json.
type schemaChecker struct {
	doc, chart *jsonschema.Schema
	values     map[string]any // the chart's values.yaml
}

func newSchemaChecker(t *testing.T) *schemaChecker {
	t.Helper()
	values, err := yamlInstance(readRepoFile(t, "deploy/chart/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return &schemaChecker{doc: compileSchema(t, policySchemaFile), chart: compileSchema(t, chartSchemaFile), values: values.(map[string]any)}
}

func readRepoFile(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlInstance reads YAML as cascade's decoder does (sigs.k8s.io/yaml), into the values the
// validator takes.
func yamlInstance(doc string) (any, error) {
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(js))
}

// check returns the schema's error for doc, nil when it is valid, and the chart schema's for
// the same document as the chart's policy value (nil too when the document is not one the
// chart can render: not a mapping, or without cascade's apiVersion and kind, which the chart
// adds).
func (c *schemaChecker) check(doc string) (docErr, chartErr error) {
	inst, err := yamlInstance(doc)
	if err != nil {
		return err, nil
	}
	docErr = c.doc.Validate(inst)
	m, ok := inst.(map[string]any)
	if !ok || m["apiVersion"] != policy.APIVersion || m["kind"] != policy.Kind {
		return docErr, nil
	}
	// helm merges the given policy over values.yaml's (ignoredResources: [], rules: []).
	body := map[string]any{}
	for k, v := range c.values["policy"].(map[string]any) {
		body[k] = v
	}
	for k, v := range m {
		if k != "apiVersion" && k != "kind" {
			body[k] = v
		}
	}
	values := map[string]any{}
	for k, v := range c.values {
		values[k] = v
	}
	values["policy"] = body
	return docErr, c.chart.Validate(values)
}

// validate runs `cascade policy validate -f FILE` with its default flags, and returns its
// output and whether it refused the document.
func validate(t *testing.T, doc string) (out string, refused bool) {
	t.Helper()
	var b strings.Builder
	err := runPolicy([]string{"validate", "-f", writeFile(t, doc)}, &b)
	return b.String(), err != nil
}

const policyHead = "apiVersion: cascade.dev/v1alpha1\nkind: Policy\n"

// ruleDoc is a document of one rule, given as the YAML lines under "- ".
func ruleDoc(lines ...string) string {
	return policyHead + "rules:\n- " + strings.Join(lines, "\n  ") + "\n"
}

func manyItems(n int, item func(i int) string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("- " + item(i) + "\n")
	}
	return b.String()
}

// TestPolicySchemaRefusals: each document the schema refuses (at the place in the schema's
// error, the place a chart install's error names under /policy), cascade policy validate
// refuses too, naming the same place as a field path.
func TestPolicySchemaRefusals(t *testing.T) {
	c := newSchemaChecker(t)
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name string
		doc  string
		at   string // the JSON pointer the schema's error names
		path string // the field path validate names
	}{
		{"not a mapping", "- a\n- b\n", "", "policy.yaml: Invalid value"},
		{"empty document", "", "", "apiVersion: Required"},
		{"no apiVersion", "kind: Policy\n", "", "apiVersion: Required"},
		{"another apiVersion", "apiVersion: cascade.dev/v1\nkind: Policy\n", "/apiVersion", "apiVersion: Unsupported value"},
		{"null apiVersion", "apiVersion: null\nkind: Policy\n", "/apiVersion", "apiVersion: Required"},
		{"another kind", "apiVersion: cascade.dev/v1alpha1\nkind: Policies\n", "/kind", "kind: Unsupported value"},
		{"unknown field", policyHead + "metadata: {name: x}\n", "", "metadata: Forbidden"},
		{"ignoredResources not a list", policyHead + "ignoredResources: podtemplates\n", "/ignoredResources", "ignoredResources: Invalid value"},
		{"ignored kind", policyHead + "ignoredResources: [PodTemplate]\n", "/ignoredResources/0", "ignoredResources[0]: Invalid value"},
		{"ignored twice", policyHead + "ignoredResources: [podtemplates, podtemplates]\n", "/ignoredResources", "ignoredResources[1]: Duplicate value"},
		{"ignored with a version", policyHead + "ignoredResources: [deployments.v1.apps]\n", "/ignoredResources/0", "ignoredResources[0]: Invalid value"},
		{"ignored with a beta version", policyHead + "ignoredResources: [widgets.v1beta2]\n", "/ignoredResources/0", "ignoredResources[0]: Invalid value"},
		{"ignored empty", policyHead + "ignoredResources: [\"\"]\n", "/ignoredResources/0", "ignoredResources[0]: Required"},
		{"ignored null", policyHead + "ignoredResources: [null]\n", "/ignoredResources/0", "ignoredResources[0]: Required"},
		{"ignored with a trailing dot", policyHead + "ignoredResources: [configmaps.]\n", "/ignoredResources/0", "ignoredResources[0]: Invalid value"},
		{"ignored resource too long", policyHead + "ignoredResources: [" + long + "]\n", "/ignoredResources/0", "ignoredResources[0]: Invalid value"},
		{"ignored group too long", policyHead + "ignoredResources: [widgets." + strings.Repeat("a.", 126) + "io]\n", "/ignoredResources/0", "ignoredResources[0]: Invalid value"},
		{"too many ignored", policyHead + "ignoredResources:\n" + manyItems(policy.MaxIgnoredResources+1, func(i int) string { return fmt.Sprintf("r%d", i) }), "/ignoredResources", "ignoredResources: Too many"},
		{"rules not a list", policyHead + "rules: {resource: configmaps, collect: Never}\n", "/rules", "rules: Invalid value"},
		{"null rule", policyHead + "rules: [null]\n", "/rules/0", "rules[0].resource: Required"},
		{"a rule that sets nothing", ruleDoc("resource: configmaps"), "/rules/0", "rules[0]: Required value: a rule sets collect"},
		{"a rule that sets empty values", ruleDoc("resource: configmaps", `collect: ""`, `defaultPropagation: ""`), "/rules/0", "rules[0]: Required value"},
		{"a rule without resource", ruleDoc("collect: Never"), "/rules/0", "rules[0].resource: Required"},
		{"a kind for a resource", ruleDoc("resource: ReplicaSet", "collect: Never"), "/rules/0/resource", "rules[0].resource: Invalid value"},
		{"a resource with a version", ruleDoc("resource: replicasets.v1.apps", "collect: Never"), "/rules/0/resource", "rules[0].resource: Invalid value"},
		{"a resource with a slash", ruleDoc("resource: apps/replicasets", "collect: Never"), "/rules/0/resource", "rules[0].resource: Invalid value"},
		{"a number for a resource", ruleDoc("resource: 12", "collect: Never"), "/rules/0/resource", "rules.resource: Invalid value: must be a string"},
		{"collect bogus", ruleDoc("resource: configmaps", "collect: bogus"), "/rules/0/collect", "rules[0].collect: Invalid value"},
		{"collect lowercase", ruleDoc("resource: configmaps", "collect: never"), "/rules/0/collect", "rules[0].collect: Invalid value"},
		{"collect After without a unit", ruleDoc("resource: configmaps", "collect: After 10"), "/rules/0/collect", "rules[0].collect: Invalid value"},
		{"collect After negative", ruleDoc("resource: configmaps", "collect: After -10m"), "/rules/0/collect", "rules[0].collect: Invalid value"},
		{"collect After two spaces", ruleDoc("resource: configmaps", `collect: "After  10m"`), "/rules/0/collect", "rules[0].collect: Invalid value"},
		{"collect After days", ruleDoc("resource: configmaps", "collect: After 1d"), "/rules/0/collect", "rules[0].collect: Invalid value"},
		{"collect a bare duration", ruleDoc("resource: configmaps", "collect: 10m"), "/rules/0/collect", "rules[0].collect: Invalid value"},
		{"collect a trailing space", ruleDoc("resource: configmaps", `collect: "Never "`), "/rules/0/collect", "rules[0].collect: Invalid value"},
		{"collect a number", ruleDoc("resource: configmaps", "collect: 600"), "/rules/0/collect", "rules.collect: Invalid value: must be a string"},
		{"defaultPropagation lowercase", ruleDoc("resource: configmaps", "defaultPropagation: orphan"), "/rules/0/defaultPropagation", "rules[0].defaultPropagation: Unsupported value"},
		{"Background for jobs", ruleDoc("resource: jobs.batch", "defaultPropagation: Background"), "/rules/0/defaultPropagation", "rules[0].defaultPropagation: Invalid value"},
		{"Background for RCs", ruleDoc("resource: replicationcontrollers", "defaultPropagation: Background"), "/rules/0/defaultPropagation", "rules[0].defaultPropagation: Invalid value"},
		{"unknown rule field", ruleDoc("resource: configmaps", "defaultPropagation: Orphan", "colect: Never"), "/rules/0", "rules[0].colect: Forbidden"},
		{"a field in the wrong case", ruleDoc("resource: configmaps", "Collect: Never"), "/rules/0", "rules[0].Collect: Forbidden"},
		{"selector a list", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: [team]"), "/rules/0/namespaceSelector", "rules.namespaceSelector: Invalid value: must be a mapping"},
		{"unknown selector field", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchLabel: {team: a}}"), "/rules/0/namespaceSelector", "rules[0].namespaceSelector.matchLabel: Forbidden"},
		{"label key with a space", ruleDoc("resource: configmaps", "collect: Never", `namespaceSelector: {matchLabels: {"team a": x}}`), "/rules/0/namespaceSelector/matchLabels", "rules[0].namespaceSelector.matchLabels: Invalid value: \"team a\""},
		{"label key with an uppercase prefix", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchLabels: {Example.com/team: x}}"), "/rules/0/namespaceSelector/matchLabels", "rules[0].namespaceSelector.matchLabels: Invalid value"},
		{"label key with two slashes", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchLabels: {a/b/c: x}}"), "/rules/0/namespaceSelector/matchLabels", "rules[0].namespaceSelector.matchLabels: Invalid value"},
		{"label key name too long", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchLabels: {example.com/"+long+": x}}"), "/rules/0/namespaceSelector/matchLabels", "rules[0].namespaceSelector.matchLabels: Invalid value"},
		{"label key prefix too long", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchLabels: {"+strings.Repeat("a.", 127)+"io/team: x}}"), "/rules/0/namespaceSelector/matchLabels/" + strings.Repeat("a.", 127) + "io~1team", "rules[0].namespaceSelector.matchLabels: Invalid value"},
		{"label value with a space", ruleDoc("resource: configmaps", "collect: Never", `namespaceSelector: {matchLabels: {team: "a b"}}`), "/rules/0/namespaceSelector/matchLabels/team", "rules[0].namespaceSelector.matchLabels: Invalid value: \"a b\""},
		{"label value too long", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchLabels: {team: "+long+"}}"), "/rules/0/namespaceSelector/matchLabels/team", "rules[0].namespaceSelector.matchLabels: Invalid value"},
		{"label value a number", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchLabels: {team: 1}}"), "/rules/0/namespaceSelector/matchLabels/team", "rules.namespaceSelector.matchLabels: Invalid value: must be a string"},
		{"In without values", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchExpressions: [{key: team, operator: In}]}"), "/rules/0/namespaceSelector/matchExpressions/0", "rules[0].namespaceSelector.matchExpressions[0].values: Required"},
		{"NotIn with no value", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchExpressions: [{key: team, operator: NotIn, values: []}]}"), "/rules/0/namespaceSelector/matchExpressions/0/values", "rules[0].namespaceSelector.matchExpressions[0].values: Required"},
		{"In with null values", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchExpressions: [{key: team, operator: In, values: null}]}"), "/rules/0/namespaceSelector/matchExpressions/0/values", "rules[0].namespaceSelector.matchExpressions[0].values: Required"},
		{"Exists with values", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchExpressions: [{key: team, operator: Exists, values: [a]}]}"), "/rules/0/namespaceSelector/matchExpressions/0/values", "rules[0].namespaceSelector.matchExpressions[0].values: Forbidden"},
		{"an unknown operator", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchExpressions: [{key: team, operator: Equals, values: [a]}]}"), "/rules/0/namespaceSelector/matchExpressions/0/operator", "rules[0].namespaceSelector.matchExpressions[0].operator: Invalid value"},
		{"an expression without key", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchExpressions: [{operator: Exists}]}"), "/rules/0/namespaceSelector/matchExpressions/0", "rules[0].namespaceSelector.matchExpressions[0].key: Invalid value"},
		{"a null expression", ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: {matchExpressions: [null]}"), "/rules/0/namespaceSelector/matchExpressions/0", "rules[0].namespaceSelector.matchExpressions[0].key: Invalid value"},
		{"a bad expression value", ruleDoc("resource: configmaps", "collect: Never", `namespaceSelector: {matchExpressions: [{key: team, operator: In, values: ["a b"]}]}`), "/rules/0/namespaceSelector/matchExpressions/0/values/0", "rules[0].namespaceSelector.matchExpressions[0].values[0]: Invalid value"},
		{"too many rules", policyHead + "rules:\n" + manyItems(policy.MaxRules+1, func(i int) string { return fmt.Sprintf("{resource: r%d, collect: Never}", i) }), "/rules", "rules: Too many"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docErr, chartErr := c.check(tc.doc)
			switch {
			case docErr == nil:
				t.Errorf("%s accepts it", policySchemaFile)
			case !strings.Contains(docErr.Error(), "at '"+tc.at+"'"):
				t.Errorf("%s refuses it, but not at %q: %v", policySchemaFile, tc.at, docErr)
			}
			if m, _ := yamlInstance(tc.doc); isRenderable(m) {
				// The chart's schema refuses the document as the chart's policy value, at the
				// same place under /policy (Helm prints that error).
				switch {
				case chartErr == nil:
					t.Errorf("%s accepts it as the policy value", chartSchemaFile)
				case !strings.Contains(chartErr.Error(), "at '/policy"+tc.at+"'"):
					t.Errorf("%s refuses it, but not at /policy%s: %v", chartSchemaFile, tc.at, chartErr)
				}
			}
			out, refused := validate(t, tc.doc)
			if !refused {
				t.Errorf("cascade policy validate accepts it:\n%s", out)
			}
			if !strings.Contains(out, "error: "+tc.path) {
				t.Errorf("cascade policy validate does not name %q:\n%s", tc.path, out)
			}
		})
	}
}

// isRenderable: the chart can render doc (a mapping with cascade's apiVersion and kind) from its
// policy value.
func isRenderable(doc any) bool {
	m, ok := doc.(map[string]any)
	return ok && m["apiVersion"] == policy.APIVersion && m["kind"] == policy.Kind
}

// TestPolicyValidateRefusesMore: what cascade policy validate refuses and no JSON Schema can
// express (the schema's description lists it): the schema accepts each of these documents.
func TestPolicyValidateRefusesMore(t *testing.T) {
	c := newSchemaChecker(t)
	for _, tc := range []struct {
		name string
		doc  string
		path string // the field path validate names
	}{
		// The YAML is read into JSON before a validator sees it: the last value wins.
		{"a key given twice", ruleDoc("resource: configmaps", "collect: Never", "collect: After 1m"), "policy.yaml: Invalid value"},
		// A ConfigMap holds 1 MiB; the comment disappears from the JSON.
		{"a document over 1 MiB", policyHead + "# " + strings.Repeat("x", policy.MaxDocumentSize) + "\n", "policy.yaml: Too long"},
		// A pattern checks a duration's grammar, not its value.
		{"After under 1s", ruleDoc("resource: configmaps", "collect: After 500ms"), "rules[0].collect: Invalid value"},
		{"After beyond a duration's range", ruleDoc("resource: configmaps", "collect: After 9999999999h"), "rules[0].collect: Invalid value"},
		// Rules compared with each other or with ignoredResources.
		{"a rule for an ignored resource", policyHead + "ignoredResources: [configmaps]\nrules:\n- resource: configmaps\n  collect: Never\n", "rules[0].resource: Invalid value"},
		{"a rule after one for every namespace", policyHead + "rules:\n- resource: configmaps\n  collect: Never\n- resource: configmaps\n  namespaceSelector: {matchLabels: {team: a}}\n  collect: After 1m\n", "rules[1].collect: Invalid value"},
		// --ignored-resources (events by default) is the process's, not the document's.
		{"defaultPropagation for a resource cascade does not watch", ruleDoc("resource: events", "defaultPropagation: Foreground"), "rules[0].resource: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docErr, chartErr := c.check(tc.doc)
			if docErr != nil || chartErr != nil {
				t.Errorf("the schema refuses it (change the table: it belongs to TestPolicySchemaRefusals): %v %v", docErr, chartErr)
			}
			out, refused := validate(t, tc.doc)
			if !refused || !strings.Contains(out, "error: "+tc.path) {
				t.Errorf("cascade policy validate does not refuse it naming %q:\n%s", tc.path, out)
			}
		})
	}
}

// TestPolicySchemaGoodDocuments: the policies shipped and documented pass the schema (the
// chart's too, as its policy value) and cascade policy validate; so do documents that only look
// odd, where null or empty reads as absent, and values at their limits.
func TestPolicySchemaGoodDocuments(t *testing.T) {
	c := newSchemaChecker(t)
	docs := map[string]string{}

	// docs/policy.md's examples.
	md := readRepoFile(t, "docs/policy.md")
	for i, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(md, -1) {
		if strings.Contains(m[1], "kind: "+policy.Kind) && strings.Contains(m[1], "apiVersion: "+policy.APIVersion) {
			docs[fmt.Sprintf("docs/policy.md block %d", i)] = m[1]
		}
	}
	if len(docs) == 0 {
		t.Error("no policy document in docs/policy.md")
	}

	// deploy/base's ConfigMap, and its commented examples as rules.
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal([]byte(readRepoFile(t, "deploy/base/policy-configmap.yaml")), &cm); err != nil {
		t.Fatal(err)
	}
	base := cm.Data[policy.ConfigMapKey]
	docs["deploy/base/policy-configmap.yaml"] = base
	if i := strings.Index(base, "# - resource"); i >= 0 {
		var rules []string
		for _, line := range strings.Split(base[i:], "\n") {
			line = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(line), "#"), " ")
			if strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "#") {
				rules = append(rules, line)
			}
		}
		docs["deploy/base/policy-configmap.yaml's examples"] = policyHead + "rules:\n" + strings.Join(rules, "\n") + "\n"
	} else {
		t.Error("no examples in deploy/base/policy-configmap.yaml")
	}

	// The chart's default, as its template renders it.
	chartDefault, err := yaml.Marshal(map[string]any{"apiVersion": policy.APIVersion, "kind": policy.Kind,
		"ignoredResources": c.values["policy"].(map[string]any)["ignoredResources"], "rules": c.values["policy"].(map[string]any)["rules"]})
	if err != nil {
		t.Fatal(err)
	}
	docs["deploy/chart/values.yaml"] = string(chartDefault)
	if err := c.chart.Validate(c.values); err != nil {
		t.Errorf("%s refuses the chart's own values.yaml: %v", chartSchemaFile, err)
	}

	// Odd but valid.
	sel := func(s string) string {
		return ruleDoc("resource: configmaps", "collect: Never", "namespaceSelector: "+s)
	}
	for name, doc := range map[string]string{
		"JSON":                     `{"apiVersion": "cascade.dev/v1alpha1", "kind": "Policy", "rules": [{"resource": "configmaps", "collect": "Never"}]}`,
		"null lists":               policyHead + "ignoredResources:\nrules:\n",
		"empty lists":              policyHead + "ignoredResources: []\nrules: []\n",
		"collect empty":            ruleDoc("resource: widgets.example.com", `collect: ""`, "defaultPropagation: Orphan"),
		"collect null":             ruleDoc("resource: widgets.example.com", "collect: null", "defaultPropagation: Foreground"),
		"defaultPropagation empty": ruleDoc("resource: configmaps", `defaultPropagation: ""`, "collect: Never"),
		"defaultPropagation null":  ruleDoc("resource: configmaps", "defaultPropagation: ~", "collect: Never"),
		"After forms": policyHead + "rules:\n" + manyItems(6, func(i int) string {
			return fmt.Sprintf("{resource: r%d, collect: After %s}", i, []string{"1s", "1000ms", "+1h", "1.5h", ".5h", "1h30m10s"}[i])
		}),
		"Background for deployments":    ruleDoc("resource: deployments.apps", "defaultPropagation: Background"),
		"Orphan and Never for jobs":     ruleDoc("resource: jobs.batch", "defaultPropagation: Orphan", "collect: Never"),
		"selector null":                 sel("null"),
		"selector empty":                sel("{}"),
		"selector nulls":                sel("{matchLabels: null, matchExpressions: null}"),
		"label values null and empty":   sel(`{matchLabels: {team: null, tier: "", example.com/app.name_1: A-b.c_9}}`),
		"Exists with null values":       sel("{matchExpressions: [{key: team, operator: Exists, values: null}, {key: tier, operator: DoesNotExist, values: []}]}"),
		"In with empty and null values": sel(`{matchExpressions: [{key: team, operator: In, values: [a, "", null]}]}`),
		"names at their limits": policyHead + "ignoredResources: [" + strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + "." + strings.Repeat("e", 61) + "]\n" +
			"rules:\n- resource: x." + strings.Repeat("v1a.", 62) + "io\n  collect: Never\n" +
			"  namespaceSelector: {matchLabels: {" + strings.Repeat("p", 253) + "/" + strings.Repeat("N", 63) + ": " + strings.Repeat("v", 63) + "}}\n",
		"as many rules as allowed":   policyHead + "rules:\n" + manyItems(policy.MaxRules, func(i int) string { return fmt.Sprintf("{resource: r%d, collect: Never}", i) }),
		"as many ignored as allowed": policyHead + "ignoredResources:\n" + manyItems(policy.MaxIgnoredResources, func(i int) string { return fmt.Sprintf("r%d", i) }),
		"a version-like resource":    ruleDoc("resource: v1", "collect: Never"),
	} {
		docs[name] = doc
	}

	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			docErr, chartErr := c.check(doc)
			if docErr != nil {
				t.Errorf("%s refuses it: %v", policySchemaFile, docErr)
			}
			if chartErr != nil {
				t.Errorf("%s refuses it as the policy value: %v", chartSchemaFile, chartErr)
			}
			if out, refused := validate(t, doc); refused {
				t.Errorf("cascade policy validate refuses it:\n%s", out)
			}
		})
	}
}

// TestPolicySchemaRandom: on random documents made of valid and invalid parts, whatever the
// schema refuses cascade policy validate refuses (seeded: a failure names the document).
func TestPolicySchemaRandom(t *testing.T) {
	c := newSchemaChecker(t)
	rng := rand.New(rand.NewPCG(31, 7))
	pick := func(vs ...any) any { return vs[rng.IntN(len(vs))] }
	// either picks one of good most of the time, else one of bad.
	either := func(good, bad []any) any {
		if rng.IntN(12) > 0 {
			return pick(good...)
		}
		return pick(bad...)
	}
	resource := func() any {
		return either([]any{"configmaps", "replicasets.apps", "jobs.batch", "replicationcontrollers", "widgets.example.com", "events", "v1"},
			[]any{"ReplicaSet", "deployments.v1.apps", "", "a.", ".apps", "x-", strings.Repeat("r", 64), 3, nil})
	}
	labelKey := func() string {
		return either([]any{"team", "example.com/team", "a_b.c-d", "Team"},
			[]any{"team a", "-team", "/team", "example.com/", "Example.com/x", "a/b/c", strings.Repeat("k", 64), ""}).(string)
	}
	labelValue := func() any {
		return either([]any{"a", "", "A-b_c.9", nil}, []any{"a b", "-a", "a-", strings.Repeat("v", 64), 1})
	}
	var refusedBoth, acceptedBoth, validateOnly int
	for i := range 1000 {
		doc := map[string]any{}
		if rng.IntN(20) > 0 {
			doc["apiVersion"] = either([]any{policy.APIVersion}, []any{"cascade.dev/v1", nil})
		}
		if rng.IntN(20) > 0 {
			doc["kind"] = either([]any{policy.Kind}, []any{"Policies"})
		}
		if rng.IntN(3) == 0 {
			var ignored []any
			for range rng.IntN(3) {
				ignored = append(ignored, resource())
			}
			doc["ignoredResources"] = ignored
		}
		var rules []any
		for range rng.IntN(4) {
			r := map[string]any{}
			if rng.IntN(10) > 0 {
				r["resource"] = resource()
			}
			sets := rng.IntN(13) // 0-5: collect, 6-11: defaultPropagation, 3-8: both, 12: neither
			if sets < 9 {
				r["collect"] = either([]any{"Never", "After 10m", "After 1h30m", "After +2s", "After 500ms", "After 1.5h", "", nil},
					[]any{"never", "After 10", "After -1m", "bogus", 600})
			}
			if sets >= 3 && sets < 12 {
				r["defaultPropagation"] = either([]any{"Orphan", "Foreground", "Background", "", nil}, []any{"orphan", "Delete"})
			}
			if rng.IntN(3) == 0 {
				s := map[string]any{}
				if rng.IntN(2) == 0 {
					labels := map[string]any{}
					for range rng.IntN(3) {
						labels[labelKey()] = labelValue()
					}
					s["matchLabels"] = labels
				}
				if rng.IntN(2) == 0 {
					var exprs []any
					for range rng.IntN(3) {
						op := either([]any{"In", "NotIn", "Exists", "DoesNotExist"}, []any{"Equals", nil})
						e := map[string]any{"key": labelKey(), "operator": op}
						n := 0 // values: for In and NotIn mostly some, for the others mostly none
						if (op == "In" || op == "NotIn") == (rng.IntN(8) > 0) {
							n = 1 + rng.IntN(2)
						}
						if n > 0 || rng.IntN(2) == 0 {
							var values []any
							for range n {
								values = append(values, labelValue())
							}
							e["values"] = values
						}
						exprs = append(exprs, e)
					}
					s["matchExpressions"] = exprs
				}
				r["namespaceSelector"] = pick(s, s, s, nil)
			}
			if rng.IntN(30) == 0 {
				r["colect"] = "Never"
			}
			rules = append(rules, r)
		}
		if len(rules) > 0 || rng.IntN(2) == 0 {
			doc["rules"] = rules
		}
		js, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		docErr, chartErr := c.check(string(js))
		out, refused := validate(t, string(js))
		switch {
		case (docErr != nil || chartErr != nil) && !refused:
			t.Errorf("document %d: the schema refuses it (%v; the chart's: %v), cascade policy validate accepts it:\n%s\n%s", i, docErr, chartErr, js, out)
		case docErr != nil:
			refusedBoth++
		case refused:
			validateOnly++
		default:
			acceptedBoth++
		}
		if docErr == nil && chartErr != nil {
			t.Errorf("document %d: the chart's schema refuses what the document's accepts: %v\n%s", i, chartErr, js)
		}
	}
	t.Logf("refused by both: %d, accepted by both: %d, refused by validate alone: %d", refusedBoth, acceptedBoth, validateOnly)
	if refusedBoth < 200 || acceptedBoth < 200 {
		t.Errorf("the documents are too one-sided to compare the two (refused by both %d, accepted by both %d)", refusedBoth, acceptedBoth)
	}
}

// TestSchemaValidatorIsHelms: the tests above validate with the JSON Schema library, at the
// version, that the pinned helm (tools/helm) checks values.schema.json with.
func TestSchemaValidatorIsHelms(t *testing.T) {
	const module = "github.com/santhosh-tekuri/jsonschema/v6 "
	version := func(gomod string) string {
		for line := range strings.Lines(readRepoFile(t, gomod)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), module); ok {
				return strings.Fields(v)[0]
			}
		}
		t.Fatalf("%s does not require %s", gomod, module)
		return ""
	}
	if ours, helms := version("go.mod"), version("tools/helm/go.mod"); ours != helms {
		t.Errorf("go.mod requires %s%s, tools/helm/go.mod (helm's) %s: keep them equal", module, ours, helms)
	}
}
