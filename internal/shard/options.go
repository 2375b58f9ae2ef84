package shard

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/internal/leader"
)

// Options configure a Manager.
type Options struct {
	// Leases is the client of the Lease API group in the host cluster. Required.
	Leases coordinationv1.CoordinationV1Interface
	// Namespace holds every Lease of the fleet. Required.
	Namespace string
	// Prefix names the Leases: PREFIX-shard-I, one per shard, and PREFIX-replica-ID, one per
	// replica (its presence). It is also the value of their labels, so that two fleets sharing
	// a namespace never see each other's Leases. Required.
	Prefix string
	// Shards is how many shards the members are spread over (see Of). At least 1; every
	// replica of a fleet must agree on it.
	Shards int
	// Identity is this replica's, unique among the replicas and the restarts of one replica
	// (internal/leader uses the host name and a random suffix). Required.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader election timings:
	// a shard whose Lease was not renewed for RenewDeadline is stopped; another replica takes
	// it only once it saw the Lease unchanged for LeaseDuration; every loop runs each
	// RetryPeriod. RetryPeriod < RenewDeadline < LeaseDuration, and LeaseDuration is at least
	// a second (a Lease counts whole seconds).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Clock is the clock of every deadline. Nil means the real clock; tests pass a fake.
	Clock clock.WithTicker
	// Start is called, in a goroutine of its own, when this replica means to take shard
	// `shard`, before it holds it: the callee starts the shard's members with their writers
	// waiting on gate (their graphs warm up meanwhile). The Manager opens gate once it holds
	// the shard's Lease. ctx ends when the shard is not taken after all, is lost, or is given
	// up; Start must return only once every writer of the shard has stopped. Required.
	Start func(ctx context.Context, shard int, gate *leader.Gate)
}

// Validate returns every problem of o (fld names o's place in the caller's configuration).
func (o *Options) Validate(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if o.Leases == nil {
		errs = append(errs, field.Required(fld.Child("Leases"), "the Lease client"))
	}
	if o.Namespace == "" {
		errs = append(errs, field.Required(fld.Child("Namespace"), "the Leases' namespace"))
	}
	for _, msg := range validation.IsValidLabelValue(o.Prefix) {
		errs = append(errs, field.Invalid(fld.Child("Prefix"), o.Prefix, msg))
	}
	if o.Prefix == "" {
		errs = append(errs, field.Required(fld.Child("Prefix"), "the Leases' name prefix"))
	} else {
		// The longest shard Lease name and the replica Lease name must be valid names.
		for _, name := range []string{shardLeaseName(o.Prefix, max(o.Shards-1, 0)), replicaLeaseName(o.Prefix, o.Identity)} {
			for _, msg := range validation.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(fld.Child("Prefix"), o.Prefix, fmt.Sprintf("Lease name %q: %s", name, msg)))
			}
		}
	}
	if o.Shards < 1 {
		errs = append(errs, field.Invalid(fld.Child("Shards"), o.Shards, "must be at least 1"))
	}
	if o.Identity == "" {
		errs = append(errs, field.Required(fld.Child("Identity"), "this replica's unique identity"))
	}
	if o.LeaseDuration < time.Second {
		errs = append(errs, field.Invalid(fld.Child("LeaseDuration"), o.LeaseDuration.String(), "must be at least 1s"))
	}
	if o.RenewDeadline >= o.LeaseDuration {
		errs = append(errs, field.Invalid(fld.Child("RenewDeadline"), o.RenewDeadline.String(), "must be less than LeaseDuration: a replica stops its writers before another may take the shard"))
	}
	if o.RetryPeriod <= 0 || o.RetryPeriod >= o.RenewDeadline {
		errs = append(errs, field.Invalid(fld.Child("RetryPeriod"), o.RetryPeriod.String(), "must be positive and less than RenewDeadline"))
	}
	if o.Start == nil {
		errs = append(errs, field.Required(fld.Child("Start"), "what starts a shard's members"))
	}
	return errs
}
