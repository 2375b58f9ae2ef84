package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/gc"
)

var statusNow = time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)

// statusLease is cascade's Lease held by holder, renewed renewedAgo before statusNow, with
// annotations.
func statusLease(ns, holder string, renewedAgo time.Duration, annotations map[string]string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cascade", Annotations: annotations},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			LeaseTransitions: ptr.To[int32](2), RenewTime: ptr.To(metav1.NewMicroTime(statusNow.Add(-renewedAgo)))},
	}
}

// published is what a leader publishes (leaderStatus), with unsynced resources.
func published(t *testing.T, unsynced int) map[string]string {
	t.Helper()
	oldVersion := version
	t.Cleanup(func() { version = oldVersion })
	version = "v1.2.3"
	var u []gc.Unsynced
	for i := range unsynced {
		u = append(u, gc.Unsynced{Resource: gc.Resource{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: fmt.Sprintf("r%02d", i)}}})
	}
	return leaderStatus("companion",
		func() (int, string) { return 3, "ConfigMap cascade-system/cascade-policy, resourceVersion 4711" },
		func() bool { return true },
		func() []gc.Unsynced { return u },
		func() string { return "admission_policy=v1 list=watch_list" })()
}

// TestStatus: cascade status reads the leader, its mode, the policy in force, the sync state
// and the feature levels from the Lease (what leaderStatus publishes), and says honestly when
// there is no Lease, nobody holds it, it expired, or its holder publishes nothing.
func TestStatus(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lease *coordinationv1.Lease
		want  []string
		check func(t *testing.T, s cascadeStatus)
	}{
		{
			name:  "led",
			lease: statusLease("cascade-system", "cascade-7d9f-x2x9z_1a2b3c4d", 3*time.Second, published(t, 0)),
			want: []string{
				"Leader:    cascade-7d9f-x2x9z (identity cascade-7d9f-x2x9z_1a2b3c4d), renewed 3s ago (2026-01-01T00:00:27Z), lease 15s, 2 transitions\n",
				"Version:   v1.2.3\n", "Mode:      companion\n",
				"Policy:    generation 3, ConfigMap cascade-system/cascade-policy, resourceVersion 4711\n",
				"Sync:      synced\n", "Features:  admission_policy=v1 list=watch_list\n",
			},
			check: func(t *testing.T, s cascadeStatus) {
				li := s.Leader
				if li == nil || !li.Published || li.Pod != "cascade-7d9f-x2x9z" || li.Mode != "companion" || li.Policy != (policyInForce{3, "ConfigMap cascade-system/cascade-policy, resourceVersion 4711"}) ||
					!li.Synced || len(li.UnsyncedResources) != 0 || li.FeatureLevels["admission_policy"] != "v1" || li.FeatureLevels["list"] != "watch_list" || s.Lease.Expired {
					t.Errorf("status %+v, leader %+v", s, li)
				}
			},
		},
		{
			name:  "unsynced resources, more than it names",
			lease: statusLease("cascade-system", "cascade-7d9f-x2x9z_1a2b3c4d", time.Second, published(t, 23)),
			want:  []string{"Sync:      synced; 23 resources unsynced, decisions that need them wait: r00.example.com, r01.example.com,", "r19.example.com and 3 more\n"},
			check: func(t *testing.T, s cascadeStatus) {
				if li := s.Leader; len(li.UnsyncedResources) != maxUnsyncedNamed || li.UnsyncedMore != 3 {
					t.Errorf("unsynced %v and %d more", li.UnsyncedResources, li.UnsyncedMore)
				}
			},
		},
		{
			name: "no Lease",
			want: []string{"Lease:     cascade-system/cascade: not found (no Lease)\n", "without leader election"},
			check: func(t *testing.T, s cascadeStatus) {
				if s.Lease.Found || s.Leader != nil {
					t.Errorf("status %+v", s)
				}
			},
		},
		{
			name:  "released",
			lease: statusLease("cascade-system", "", time.Second, nil),
			want:  []string{"held by nobody (released; renewed 1s ago", "no cascade leads"},
			check: func(t *testing.T, s cascadeStatus) {
				if !s.Lease.Found || s.Leader != nil {
					t.Errorf("status %+v", s)
				}
			},
		},
		{
			name:  "expired",
			lease: statusLease("cascade-system", "cascade-7d9f-x2x9z_1a2b3c4d", 2*time.Minute, published(t, 0)),
			want:  []string{"expired: last held by cascade-7d9f-x2x9z, renewed 2m0s ago", "no cascade leads now; what it last published:", "Mode:      companion\n"},
			check: func(t *testing.T, s cascadeStatus) {
				if !s.Lease.Expired || s.Leader == nil || !s.Leader.Published {
					t.Errorf("status %+v", s)
				}
			},
		},
		{
			name:  "a holder that publishes nothing",
			lease: statusLease("cascade-system", "cascade-old_1", time.Second, nil),
			want:  []string{"Leader:    cascade-old", "The leader publishes no status on its Lease"},
			check: func(t *testing.T, s cascadeStatus) {
				if s.Leader == nil || s.Leader.Published {
					t.Errorf("status %+v", s)
				}
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.lease != nil {
				objs = append(objs, tt.lease)
			}
			s, err := readStatus(context.Background(), fake.NewClientset(objs...), "cascade-system", "cascade", statusNow)
			if err != nil {
				t.Fatal(err)
			}
			text := s.text()
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("text lacks %q:\n%s", w, text)
				}
			}
			tt.check(t, s)
			// The document round-trips: what -o json prints is what the fields say.
			j, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var back cascadeStatus
			if err := json.Unmarshal(j, &back); err != nil || (back.Leader == nil) != (s.Leader == nil) || back.Lease.Found != s.Lease.Found {
				t.Errorf("-o json round trip: %v\n%s", err, j)
			}
		})
	}
}

// TestStatusPublishedKeys: every key the leader publishes is written at every renewal, empty
// when it has nothing to say, so that a renewal replaces the one before (an unsynced list that
// emptied, cleared).
func TestStatusPublishedKeys(t *testing.T) {
	withUnsynced, without := published(t, 2), published(t, 0)
	if withUnsynced[annotationUnsynced] != "r00.example.com,r01.example.com" {
		t.Errorf("unsynced published as %q", withUnsynced[annotationUnsynced])
	}
	for k := range withUnsynced {
		if _, ok := without[k]; !ok {
			t.Errorf("%s is published with unsynced resources and not without", k)
		}
	}
	if v, ok := without[annotationUnsynced]; !ok || v != "" {
		t.Errorf("no unsynced resource: %s = %q, %t; want an empty value", annotationUnsynced, v, ok)
	}
	if s := leaderStatus("collector", nil, func() bool { return false }, func() []gc.Unsynced { return nil }, func() string { return "" })(); s[annotationPolicySource] != "built-in: no --policy-configmap" || s[annotationPolicyGeneration] != "0" || s[annotationSynced] != "false" {
		t.Errorf("without --policy-configmap: %v", s)
	}
}

// TestStatusCommand: `cascade status` reads the Lease through the kubeconfig's cluster, in -n's
// namespace (not the context's), and -o yaml prints the document; a Lease it may not read is a
// failure.
func TestStatusCommand(t *testing.T) {
	lease := statusLease("gc", "cascade-7d9f-x2x9z_1a2b3c4d", time.Second, published(t, 0))
	lease.APIVersion, lease.Kind = "coordination.k8s.io/v1", "Lease"
	var paths []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		switch r.URL.Path {
		case "/apis/coordination.k8s.io/v1/namespaces/gc/leases/cascade":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(lease)
		case "/apis/coordination.k8s.io/v1/leases": // every namespace's, by name
			list := coordinationv1.LeaseList{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "LeaseList"}}
			if r.URL.Query().Get("fieldSelector") == "metadata.name=cascade" {
				list.Items = append(list.Items, *lease)
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(list)
		case "/apis/coordination.k8s.io/v1/namespaces/private/leases/cascade":
			writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, `leases.coordination.k8s.io "cascade" is forbidden`)
		default:
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "not found")
		}
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	body := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + srv.URL + "\", insecure-skip-tls-verify: true}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u, namespace: shop}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kubeconfig, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)

	c := runCLI(t, nil, "status", "-n", "gc", "-o", "yaml")
	var s cascadeStatus
	if err := yaml.UnmarshalStrict([]byte(c.stdout), &s); c.code != 0 || err != nil || s.Leader == nil || s.Leader.Mode != "companion" || s.Lease.Namespace != "gc" {
		t.Errorf("status -n gc -o yaml: exit %d, %v, %+v\n%s%s", c.code, err, s, c.stdout, c.stderr)
	}
	// Without -n: cascade-system (not the context's shop), else the one namespace with the Lease.
	paths = nil
	c = runCLI(t, nil, "status")
	if c.code != 0 || !strings.Contains(c.stdout, "Lease:     gc/cascade: expired") || !slices.Equal(paths, []string{
		"/apis/coordination.k8s.io/v1/namespaces/cascade-system/leases/cascade", "/apis/coordination.k8s.io/v1/leases", "/apis/coordination.k8s.io/v1/namespaces/gc/leases/cascade",
	}) {
		t.Errorf("status (the context's namespace is shop): exit %d, paths %q\n%s%s", c.code, paths, c.stdout, c.stderr)
	}
	c = runCLI(t, nil, "status", "--lease", "other")
	if c.code != 0 || !strings.Contains(c.stdout, "cascade-system/other: not found (no Lease); none in any other namespace either") {
		t.Errorf("status --lease other: exit %d\n%s%s", c.code, c.stdout, c.stderr)
	}
	c = runCLI(t, nil, "status", "--lease", "private/cascade")
	if c.code != exitFailure || !strings.Contains(c.lastLine(), "cannot read cascade's Lease private/cascade") || !strings.Contains(c.lastLine(), "the Role cascade-explain-port-forward in private grants it") {
		t.Errorf("a Lease it may not read: exit %d, %q", c.code, c.lastLine())
	}
	if c := runCLI(t, nil, "status", "-n", "gc", "--lease", "other/cascade"); c.code != exitUsage {
		t.Errorf("-n and --lease in two namespaces: exit %d, want %d", c.code, exitUsage)
	}
}

// TestParseLease: status's --lease is [NAMESPACE/]NAME; the namespace is -n's when it names
// none ("" when neither does: cascade-system, else any); -n and a --lease in another namespace
// is a usage error.
func TestParseLease(t *testing.T) {
	for _, tt := range []struct {
		lease, ns, wantNS, wantName string
		ok                          bool
	}{
		{"cascade", "", "", "cascade", true},
		{"cascade", "gc", "gc", "cascade", true},
		{"gc/cascade", "", "gc", "cascade", true},
		{"gc/cascade", "gc", "gc", "cascade", true},
		{"gc/cascade", "other", "", "", false},
		{"gc/", "", "", "", false},
		{"Cascade", "", "", "", false},
	} {
		ns, name, err := parseLease(tt.lease, tt.ns)
		if (err == nil) != tt.ok || ns != tt.wantNS || name != tt.wantName {
			t.Errorf("parseLease(%q, -n %q) = %s, %s, %v", tt.lease, tt.ns, ns, name, err)
		}
	}
}
