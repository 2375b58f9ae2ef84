package features

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// fakeDiscovery serves a discovery document per group-version; a group-version absent is
// answered 404, err (when set) for every one.
type fakeDiscovery struct {
	docs  map[string][]metav1.APIResource
	err   error
	asked []string
}

func (f *fakeDiscovery) ServerResourcesForGroupVersionWithContext(_ context.Context, gv string) (*metav1.APIResourceList, error) {
	f.asked = append(f.asked, gv)
	if f.err != nil {
		return nil, f.err
	}
	rs, ok := f.docs[gv]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, "")
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: rs}, nil
}

var allVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

func served(resources ...string) []metav1.APIResource {
	var out []metav1.APIResource
	for _, r := range resources {
		out = append(out, metav1.APIResource{Name: r, Verbs: allVerbs})
	}
	return out
}

// TestDetectAdmission: the level is the best version that serves both the policy and its
// binding, as each Kubernetes version serves them by default and with the beta turned on; a
// discovery failure is an error, never a level.
func TestDetectAdmission(t *testing.T) {
	vap := []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}
	both := append([]string{policiesResource, bindingsResource}, vap...)
	for _, tt := range []struct {
		name string
		docs map[string][]metav1.APIResource
		want Admission
	}{
		{"1.36 and later", map[string][]metav1.APIResource{admissionV1: served(both...), admissionV1beta1: served(vap...)}, Admission{V1: true}},
		{"1.34/1.35 by default", map[string][]metav1.APIResource{admissionV1: served(vap...)}, Admission{}},
		{"1.34/1.35 with v1beta1 on", map[string][]metav1.APIResource{admissionV1: served(vap...), admissionV1beta1: served(both...)}, Admission{V1beta1: true}},
		{"both served", map[string][]metav1.APIResource{admissionV1: served(both...), admissionV1beta1: served(both...)}, Admission{V1: true, V1beta1: true}},
		{"v1 policies without bindings", map[string][]metav1.APIResource{admissionV1: served(policiesResource), admissionV1beta1: served(both...)}, Admission{V1beta1: true}},
		{"v1 turned off by runtime config", map[string][]metav1.APIResource{admissionV1: served(vap...)}, Admission{}},
		{"read-only resources", map[string][]metav1.APIResource{admissionV1: {{Name: policiesResource, Verbs: metav1.Verbs{"get", "list"}}, {Name: bindingsResource, Verbs: allVerbs}}}, Admission{}},
		{"no group at all", nil, Admission{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DetectAdmission(context.Background(), &fakeDiscovery{docs: tt.docs})
			if err != nil || got != tt.want {
				t.Errorf("DetectAdmission = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	f := &fakeDiscovery{err: errors.New("connection refused")}
	if got, err := DetectAdmission(context.Background(), f); err == nil {
		t.Errorf("DetectAdmission with discovery down = %+v, want an error", got)
	}
	if got := (Admission{V1: true, V1beta1: true}).Level(); got != LevelV1 {
		t.Errorf("level with both = %q", got)
	}
	if got := (Admission{V1beta1: true}).Level(); got != LevelV1beta1 {
		t.Errorf("level with v1beta1 = %q", got)
	}
	if got := (Admission{}).Level(); got != LevelNone {
		t.Errorf("level with neither = %q", got)
	}
}

func gauge(s *Set, feature, level string) float64 {
	return testutil.ToFloat64(s.gauge.WithLabelValues(feature, level))
}

// logTo returns a context whose logger writes to buf.
func logTo(buf *bytes.Buffer) context.Context {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	cfg := textlogger.NewConfig(textlogger.Output(buf))
	cfg.AddFlags(fs)
	return klog.NewContext(context.Background(), textlogger.NewLogger(cfg))
}

// TestSetShowsLevels: the gauge is 1 for the levels in use and 0 for the others, all 0 until
// known; a log line when a level is chosen and when it changes, none when it stays; Level and
// Summary follow.
func TestSetShowsLevels(t *testing.T) {
	var log bytes.Buffer
	ctx := logTo(&log)
	s := New(prometheus.NewRegistry())
	for f, ls := range levels {
		for _, l := range ls {
			if v := gauge(s, f, l); v != 0 {
				t.Errorf("%s/%s = %v before anything is known", f, l, v)
			}
		}
	}
	if got, want := s.Summary(), "admission_policy=unknown list=unknown"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}

	s.Use(ctx, AdmissionPolicy, LevelNone)
	if gauge(s, AdmissionPolicy, LevelNone) != 1 || gauge(s, AdmissionPolicy, LevelV1) != 0 || s.Level(AdmissionPolicy) != LevelNone {
		t.Errorf("after none: gauge none=%v v1=%v level %q", gauge(s, AdmissionPolicy, LevelNone), gauge(s, AdmissionPolicy, LevelV1), s.Level(AdmissionPolicy))
	}
	if !strings.Contains(log.String(), `"Feature level chosen" feature="admission_policy" level="none"`) || !strings.Contains(log.String(), "not as the policy says") {
		t.Errorf("log after the first level: %s", log.String())
	}
	log.Reset()
	s.Use(ctx, AdmissionPolicy, LevelNone)
	if log.Len() != 0 {
		t.Errorf("a level that stays logs again: %s", log.String())
	}
	s.Use(ctx, AdmissionPolicy, LevelV1) // the server was upgraded
	if gauge(s, AdmissionPolicy, LevelNone) != 0 || gauge(s, AdmissionPolicy, LevelV1) != 1 || s.Level(AdmissionPolicy) != LevelV1 {
		t.Errorf("after the upgrade: gauge none=%v v1=%v", gauge(s, AdmissionPolicy, LevelNone), gauge(s, AdmissionPolicy, LevelV1))
	}
	if !strings.Contains(log.String(), `"Feature level changed" feature="admission_policy" level="v1"`) || !strings.Contains(log.String(), `was="none"`) {
		t.Errorf("log after the change: %s", log.String())
	}

	s.Use(ctx, List, LevelPaged, LevelWatchList, "bogus")
	if gauge(s, List, LevelPaged) != 1 || gauge(s, List, LevelWatchList) != 1 || s.Level(List) != LevelPaged {
		t.Errorf("mixed lists: watch_list=%v paged=%v level %q", gauge(s, List, LevelWatchList), gauge(s, List, LevelPaged), s.Level(List))
	}
	if got, want := s.Summary(), "admission_policy=v1 list=watch_list+paged"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	s.Use(ctx, List)
	if gauge(s, List, LevelPaged) != 0 || gauge(s, List, LevelWatchList) != 0 || s.Level(List) != "" {
		t.Errorf("lists unknown again: watch_list=%v paged=%v", gauge(s, List, LevelWatchList), gauge(s, List, LevelPaged))
	}
	var nilSet *Set
	if nilSet.Level(AdmissionPolicy) != "" || nilSet.Summary() != "" {
		t.Error("a nil Set knows something")
	}
}
