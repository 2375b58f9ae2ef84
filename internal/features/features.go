package features

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// Features (values of the feature label).
const (
	AdmissionPolicy = "admission_policy"
	List            = "list"
)

// Levels (values of the level label).
const (
	LevelV1        = "v1"
	LevelV1beta1   = "v1beta1"
	LevelNone      = "none"
	LevelWatchList = "watch_list"
	LevelPaged     = "paged"
)

// levels are every feature's levels, best first.
var levels = map[string][]string{
	AdmissionPolicy: {LevelV1, LevelV1beta1, LevelNone},
	List:            {LevelWatchList, LevelPaged},
}

// why says, for the log, what a level means.
var why = map[string]string{
	AdmissionPolicy + "/" + LevelV1:      "MutatingAdmissionPolicy admissionregistration.k8s.io/v1 stamps defaults at creation",
	AdmissionPolicy + "/" + LevelV1beta1: "MutatingAdmissionPolicy admissionregistration.k8s.io/v1beta1 stamps defaults at creation (v1 not served)",
	AdmissionPolicy + "/" + LevelNone: "no MutatingAdmissionPolicy served: the stamping pass alone applies defaults, at most one period after creation; " +
		"a delete of a new owner before the pass stamped it propagates as the request or the kind's default says, not as the policy says",
	List + "/" + LevelWatchList: "lists stream from the watch cache (watch with sendInitialEvents)",
	List + "/" + LevelPaged:     "the server refuses watch-lists for some resources: those are listed in pages",
}

// Set holds the levels in use and shows them. The zero value is not usable: New.
type Set struct {
	gauge *prometheus.GaugeVec

	mu    sync.Mutex
	inUse map[string][]string // feature → levels in use, in levels' order; absent: not known yet
}

// New returns a Set whose gauge is registered on reg; every level of every feature starts at 0
// (nothing known yet).
func New(reg prometheus.Registerer) *Set {
	s := &Set{
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "cascade",
			Name:      "feature_in_use",
			Help: "1 for each level of a version-dependent feature of the API server cascade uses, 0 for the others (docs/compatibility.md): " +
				"admission_policy v1, v1beta1 or none (the stamping pass alone); list watch_list or paged (both 1 when resources differ). All 0: not known yet.",
		}, []string{"feature", "level"}),
		inUse: map[string][]string{},
	}
	for f, ls := range levels {
		for _, l := range ls {
			s.gauge.WithLabelValues(f, l).Set(0)
		}
	}
	reg.MustRegister(s.gauge)
	return s
}

// Use records that feature is used at the given levels (one, or several for List), logs when
// that changes and updates the gauge. Levels not of the feature are ignored; no level at all
// means not known.
func (s *Set) Use(ctx context.Context, feature string, use ...string) {
	var known []string
	for _, l := range levels[feature] {
		if slices.Contains(use, l) {
			known = append(known, l)
		}
	}
	s.mu.Lock()
	before, had := s.inUse[feature]
	if had == (len(known) > 0) && slices.Equal(before, known) {
		s.mu.Unlock()
		return
	}
	if len(known) == 0 {
		delete(s.inUse, feature)
	} else {
		s.inUse[feature] = known
	}
	for _, l := range levels[feature] {
		v := 0.0
		if slices.Contains(known, l) {
			v = 1
		}
		s.gauge.WithLabelValues(feature, l).Set(v)
	}
	s.mu.Unlock()
	if len(known) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	msg := "Feature level chosen"
	if had {
		msg = "Feature level changed"
	}
	var meaning []string
	for _, l := range known {
		meaning = append(meaning, why[feature+"/"+l])
	}
	kv := []any{"feature", feature, "level", strings.Join(known, "+"), "meaning", strings.Join(meaning, "; ")}
	if had {
		kv = append(kv, "was", strings.Join(before, "+"))
	}
	logger.Info(msg, kv...)
}

// Level is the one level of feature in use: "" when not known, the worst when several are
// (List).
func (s *Set) Level(feature string) string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.inUse[feature]
	if len(in) == 0 {
		return ""
	}
	return in[len(in)-1]
}

// Summary is every feature's levels for /readyz, sorted by feature:
// "admission_policy=v1 list=watch_list", "unknown" for a level not known yet, and
// "watch_list+paged" for several. It names no resource.
func (s *Set) Summary() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, f := range slices.Sorted(maps.Keys(levels)) {
		l := "unknown"
		if in := s.inUse[f]; len(in) > 0 {
			l = strings.Join(in, "+")
		}
		out = append(out, f+"="+l)
	}
	return strings.Join(out, " ")
}
