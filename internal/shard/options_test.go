package shard

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cascade-gc/cascade/internal/leader"
)

func validOptions() Options {
	return Options{
		Leases: fake.NewClientset().CoordinationV1(), Namespace: "cascade", Prefix: "cascade", Shards: 6,
		Identity:      "host-1_0a1b2c3d",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Start: func(context.Context, int, *leader.Gate) {},
	}
}

// TestValidate: every problem is reported, each on its field.
func TestValidate(t *testing.T) {
	o := validOptions()
	if errs := o.Validate(field.NewPath("shard")); len(errs) > 0 {
		t.Fatalf("valid options: %v", errs)
	}
	bad := Options{Prefix: "Not_A/Name", Shards: 0, LeaseDuration: 500 * time.Millisecond, RenewDeadline: time.Second}
	errs := bad.Validate(field.NewPath("shard"))
	got := map[string]bool{}
	for _, e := range errs {
		got[e.Field] = true
	}
	for _, f := range []string{"Leases", "Namespace", "Prefix", "Shards", "Identity", "LeaseDuration", "RenewDeadline", "RetryPeriod", "Start"} {
		if !got["shard."+f] {
			t.Errorf("no error on %s; got %v", f, errs)
		}
	}
}

// TestReplicaLeaseName: identities that are not names (internal/leader's hold an
// underscore) still give valid, distinct Lease names.
func TestReplicaLeaseName(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"a", "cascade-replica-a"},
		{"host-1_0a1b2c3d", "cascade-replica-host-1-0a1b2c3d-"},
		{"Host-1", "cascade-replica-host-1-"},
	} {
		got := replicaLeaseName("cascade", tc.id)
		if !strings.HasPrefix(got, tc.want) || (got != tc.want && len(got) != len(tc.want)+8) {
			t.Errorf("replicaLeaseName(%q) = %q, want %q (and a hash when changed)", tc.id, got, tc.want)
		}
	}
	if replicaLeaseName("cascade", "x_1") == replicaLeaseName("cascade", "x-1") {
		t.Error("two identities share a replica Lease name")
	}
	long := replicaLeaseName("cascade", strings.Repeat("h", 300))
	if len(long) > 253 {
		t.Errorf("a long identity gives a %d-character name", len(long))
	}
	o := validOptions()
	o.Identity = strings.Repeat("h", 300)
	if errs := o.Validate(nil); len(errs) > 0 {
		t.Errorf("a long identity: %v", errs)
	}
}

// TestShardIndex: only this prefix's shard Lease names parse.
func TestShardIndex(t *testing.T) {
	for name, want := range map[string]int{"cascade-shard-0": 0, "cascade-shard-12": 12, "cascade-shard-01": -1,
		"cascade-shard-": -1, "cascade-shard--1": -1, "other-shard-1": -1, "cascade-replica-a": -1} {
		i, ok := shardIndex("cascade", name)
		if !ok {
			i = -1
		}
		if i != want {
			t.Errorf("shardIndex(%q) = %d, %v; want %d", name, i, ok, want)
		}
	}
}
