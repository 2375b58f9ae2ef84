package policy

import (
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestSchemaFormats: the schema's patterns accept exactly the names Validate accepts (resources,
// label keys and values, as apimachinery validates them), and every collect Validate accepts;
// a collect they accept and Validate refuses has a delay under MinCollectAfter. The strings are
// edge cases and random ones, seeded.
func TestSchemaFormats(t *testing.T) {
	compiled := map[string]*regexp.Regexp{}
	match := func(p, s string) bool {
		if compiled[p] == nil {
			compiled[p] = regexp.MustCompile(p)
		}
		return compiled[p].MatchString(s)
	}
	resourceOK := func(s string) bool {
		return match(resourcePattern, s) && match(resourceLengthPattern, s) && !match(versionedPattern, s)
	}
	labelKeyOK := func(s string) bool { return match(labelKeyPattern, s) && !match(labelKeyLongPrefixPattern, s) }
	labelValueOK := func(s string) bool { return match(labelValuePattern, s) && len(s) <= validation.LabelValueMaxLength }

	rng := rand.New(rand.NewPCG(1, 2))
	// random joins pieces of alphabet into strings of up to n characters, often of valid shape.
	random := func(alphabet string, n int) string {
		var b strings.Builder
		for range rng.IntN(n + 1) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	rep := strings.Repeat
	edges := []string{"", ".", "/", "a", "a.", ".a", "a..b", "a.b", "a-b", "-a", "a-", "A", "a_b", "a b", "a/b", "a/b/c", "a.b/c", "/a", "a/",
		"v1", "a.v1", "a.v1.b", "a.v1beta2", "a.v1beta2.b", "a.v1b", "a.v1alpha", "a.v1alpha1x.b", "a.v", "a.vv1", "a.V1", "a.b.v1",
		"µ", "a\n", "\na", "a.b\n", "é.b", "A.b/c", "a.B/c", "a.b/C", "a.b/-c", "a.b/c_", "a.b/c.d_E-9",
		rep("a", 63), rep("a", 64), rep("a", 63) + ".b", rep("a", 64) + ".b", "a." + rep("b", 253), "a." + rep("b", 254),
		"a." + rep("b.", 126) + "c", "a." + rep("b.", 126) + "cc", rep("a", 253) + "/b", rep("a", 254) + "/b",
		rep("a.", 126) + "b/c", rep("a.", 126) + "bc/c", "a/" + rep("b", 63), "a/" + rep("b", 64), rep("x", 254) + "/" + rep("y", 64)}
	names := append([]string(nil), edges...)
	for range 20000 {
		switch rng.IntN(4) {
		case 0:
			names = append(names, random("ab.-", 8))
		case 1:
			names = append(names, random("aZ9._-/", 10))
		case 2:
			names = append(names, random("av1.", 8))
		default:
			names = append(names, random("a", 3)+"."+random("vab0123456789.", 12))
		}
	}
	for _, s := range names {
		_, err := ParseGroupResource(s)
		if got, want := resourceOK(s), err == nil; got != want {
			t.Errorf("resource %q: the schema's patterns say %v, ParseGroupResource %v", s, got, err)
		}
		if got, want := labelKeyOK(s), len(validation.IsQualifiedName(s)) == 0; got != want {
			t.Errorf("label key %q: the schema's patterns say %v, apimachinery %v", s, got, validation.IsQualifiedName(s))
		}
		if got, want := labelValueOK(s), len(validation.IsValidLabelValue(s)) == 0; got != want {
			t.Errorf("label value %q: the schema's patterns say %v, apimachinery %v", s, got, validation.IsValidLabelValue(s))
		}
	}

	collects := []string{"", "Never", "never", "Never ", " Never", "After", "After ", "After 1s", "After 1", "After 0", "After 0s", "After +1s",
		"After -1s", "After 1.5h", "After .5h", "After 1.h", "After .h", "After 1h30m", "After 1h 30m", "After  1s", "After1s", "after 1s",
		"After 1µs", "After 1μs", "After 1us", "After 1ns", "After 1ms", "After 1000ms", "After 999ms", "After 1d", "After 1H", "After 1e3s",
		"After 1s1", "After 1ss", "After 1hm", "After 1s\n", "10m"}
	for range 20000 {
		collects = append(collects, "After "+random("+-0123456789.hmsuµn ", 8))
	}
	for _, s := range collects {
		matched := match(collectPattern, s)
		_, err := ParseCollect(s)
		switch {
		case s == "":
			if !matched {
				t.Errorf("collect %q (as built in): the schema refuses it", s)
			}
		case err == nil && !matched:
			t.Errorf("collect %q: Validate accepts it, the schema refuses it", s)
		case err != nil && matched && !strings.Contains(err.Error(), "at least") && !overflows(strings.TrimPrefix(s, CollectAfterPrefix)):
			t.Errorf("collect %q: the schema accepts it, Validate refuses it for another reason than its delay or its range: %v", s, err)
		}
	}
}

// overflows reports whether a duration of durationFmt is beyond time.Duration's range.
func overflows(d string) bool {
	units := map[string]float64{"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
	var seconds float64
	for _, m := range regexp.MustCompile(`([0-9.]+)(ns|us|µs|μs|ms|s|m|h)`).FindAllStringSubmatch(d, -1) {
		n, _ := strconv.ParseFloat(m[1], 64)
		seconds += n * units[m[2]]
	}
	return seconds >= float64(math.MaxInt64)/1e9
}

// TestSchemaBuilds: every place of the document has its entry in schemaFields and every entry
// its place (buildSchema checks both), and the chart's part leaves out apiVersion and kind.
func TestSchemaBuilds(t *testing.T) {
	if _, err := Schema(); err != nil {
		t.Fatal(err)
	}
	v, err := ValuesSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"apiVersion"`, `"kind"`, `"$schema"`} {
		if strings.Contains(string(v), field) {
			t.Errorf("ValuesSchema has %s", field)
		}
	}
	schemaFields["rules[].nowhere"] = schemaField{doc: "x"}
	defer delete(schemaFields, "rules[].nowhere")
	if _, err := Schema(); err == nil || !strings.Contains(err.Error(), `schemaFields["rules[].nowhere"]: no such place`) {
		t.Errorf("an entry for no field: %v", err)
	}
}
