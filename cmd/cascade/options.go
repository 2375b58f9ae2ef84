package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/cascade-gc/cascade/finalizers/orphanrecord"
	"github.com/cascade-gc/cascade/finalizers/stamp"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/fleet"
	"github.com/cascade-gc/cascade/policy"
	"github.com/cascade-gc/cascade/policy/watch"
)

// Options are cascade's process flags. GC policy does not live here: it comes from the policy
// ConfigMap (--policy-configmap, package policy/watch).
type Options struct {
	// Logs are component-base's logging options (--logging-format, -v, --vmodule).
	Logs       *logsapi.LoggingConfiguration
	Kubeconfig string
	// QPS and Burst are the client-side budget for every request cascade makes. QPS 0 (the
	// default) means no client-side limit: the Workers bound what is in flight, and
	// kube-apiserver's API Priority and Fairness protects the server (docs/how-it-works.md, "Throughput").
	QPS   float32
	Burst int
	// Workers is the number of concurrent collection workers.
	Workers int
	// DiscoveryPeriod is how often the set of deletable resources is re-discovered.
	DiscoveryPeriod time.Duration
	// OwnerReverifyPeriod is how often owners cascade never observed but found present are
	// checked again.
	OwnerReverifyPeriod time.Duration
	// StuckAfter is how long an owner may wait on its GC finalizer before cascade says what
	// holds it.
	StuckAfter time.Duration
	// SyncTimeout bounds the wait for the initial lists before cascade proceeds with the
	// resources that synced.
	SyncTimeout time.Duration
	// IgnoredResources are never watched nor collected ("resource.group", "events" for core).
	IgnoredResources []string
	// AbsentOwnerCacheSize bounds the LRU of owners verified absent.
	AbsentOwnerCacheSize int
	// FinalizerResyncPeriod is how often every owner being deleted with a GC finalizer is
	// re-checked, whatever events arrived.
	FinalizerResyncPeriod time.Duration
	// StartupTimeout bounds the first contact with the API server.
	StartupTimeout time.Duration

	// MetricsBindAddress serves /metrics, /debug/graph and /debug/pprof (with EnableProfiling).
	MetricsBindAddress string
	// MetricsSecure serves the metrics address over TLS with every request authenticated
	// (TokenReview) and authorized (SubjectAccessReview on its path) by the API server; false
	// serves plain HTTP to anyone, for local runs only (`make run`).
	MetricsSecure bool
	// TLSCertFile and TLSPrivateKeyFile are the metrics address's serving certificate, reloaded
	// when the files change; both empty: a self-signed certificate made at start.
	TLSCertFile       string
	TLSPrivateKeyFile string
	// HealthProbeBindAddress serves /healthz and /readyz, plain and to anyone: they reveal
	// nothing but whether cascade is up and synced.
	HealthProbeBindAddress string
	// EnableProfiling serves /debug/pprof on the metrics address.
	EnableProfiling bool
	// Mode is client.ModeCollector (cascade is the garbage collector) or client.ModeCompanion
	// (beside kube-controller-manager's collector, which collects: docs/modes.md).
	Mode string
	// DryRun decides everything and writes nothing (shadow mode).
	DryRun bool
	// DryRunDivergenceAfter is how long after a would-be write its object is read again to
	// see whether another collector did the same.
	DryRunDivergenceAfter time.Duration
	// PolicyConfigMap is the policy ConfigMap, NAMESPACE/NAME (key policy.yaml); empty: the
	// built-in policy.
	PolicyConfigMap string
	// OrphanRecordConfigMap is the orphan record, NAMESPACE/NAME: owners whose orphan finalizer
	// cascade removed, for a process that did not see them (orphanrecord); empty: none.
	OrphanRecordConfigMap string
	// OrphanRecordTTL is how long an entry of the orphan record is kept at least.
	OrphanRecordTTL time.Duration
	// DefaultPropagationRate bounds the objects per second the policy's defaultPropagation pass
	// stamps or unstamps.
	DefaultPropagationRate float64
	// DefaultPropagationPeriod is how often the pass runs when the policy does not change: on a
	// server without a MutatingAdmissionPolicy, the most an object waits for its stamp.
	DefaultPropagationPeriod time.Duration

	// Fleet mode (fleet.go): the cluster cascade runs in is the host, and it collects in every
	// member one provider lists. At most one provider; none: the single cluster.
	//
	// FleetSecretsNamespace: Secrets in it matching FleetSecretsSelector, each a member's
	// kubeconfig under the key "kubeconfig" (multicluster-runtime's kubeconfig provider).
	FleetSecretsNamespace string
	FleetSecretsSelector  string
	// FleetClusterAPINamespace: Cluster API's kubeconfig Secrets (type cluster.x-k8s.io/secret,
	// named CLUSTER-kubeconfig, key "value") in it.
	FleetClusterAPINamespace string
	// FleetKubeconfigDir: each file in it a member's kubeconfig, named after the file.
	FleetKubeconfigDir string
	// FleetMemberPolicyConfigMap is a member's own policy ConfigMap in the member, NAMESPACE/NAME;
	// absent there, the host's --policy-configmap is in force.
	FleetMemberPolicyConfigMap string
	// FleetMemberQPS and FleetMemberBurst are each member's client budget against its own API
	// server; FleetMemberWorkers each member's workers per queue.
	FleetMemberQPS     float32
	FleetMemberBurst   int
	FleetMemberWorkers int
	// FleetMemberDiscoveryPeriod is each member's discovery safety net: a member's CRD and
	// APIService watches ask for its rounds (gc's apiwatch), so the period only catches what
	// they cannot see (built-in APIs changed by an upgrade of its API server).
	FleetMemberDiscoveryPeriod time.Duration
	// FleetShards splits the fleet's members over the replicas (internal/shard): each member is
	// in one of FleetShards shards, each held through the Lease NAME-shard-I of
	// --leader-elect-resource-name/-namespace, and a replica collects in the members of the
	// shards it holds. 1: one replica collects in every member (leader election as usual).
	FleetShards int
	// FleetInsecureKubeconfigExec is the exec credential plugins a member's kubeconfig may run
	// (its command exactly; none by default: a kubeconfig is a tenant's data, and exec runs
	// code in cascade's pod); FleetInsecureKubeconfigTLS lets a member's kubeconfig skip TLS
	// verification or name an http:// server (internal/fleet: RESTConfig).
	FleetInsecureKubeconfigExec []string
	FleetInsecureKubeconfigTLS  bool
	// FleetMemberRequestTimeout bounds each of a member's requests but its watches
	// (internal/fleet: DefaultRequestTimeout says why 30 s).
	FleetMemberRequestTimeout time.Duration

	// Leader election: one replica collects; standbys keep their graph warm.
	LeaderElect                  bool
	LeaseDuration                time.Duration
	RenewDeadline                time.Duration
	RetryPeriod                  time.Duration
	LeaderElectResourceName      string
	LeaderElectResourceNamespace string
}

// inClusterNamespaceFile holds the pod's namespace when cascade runs in a cluster.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func defaultLeaseNamespace() string {
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	return "kube-system"
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Logs:                         logsapi.NewLoggingConfiguration(),
		Mode:                         client.ModeCollector,
		QPS:                          0, // no client-side limit: see Options.QPS
		Burst:                        60,
		Workers:                      20,
		DiscoveryPeriod:              30 * time.Second,
		SyncTimeout:                  30 * time.Second,
		DryRunDivergenceAfter:        5 * time.Minute,
		StuckAfter:                   5 * time.Minute,
		OwnerReverifyPeriod:          30 * time.Second,
		IgnoredResources:             []string{"events", "events.events.k8s.io"},
		AbsentOwnerCacheSize:         10000,
		FinalizerResyncPeriod:        30 * time.Second,
		DefaultPropagationRate:       stamp.DefaultRate,
		DefaultPropagationPeriod:     stamp.DefaultPeriod,
		OrphanRecordConfigMap:        defaultLeaseNamespace() + "/" + orphanrecord.DefaultName,
		OrphanRecordTTL:              orphanrecord.DefaultTTL,
		StartupTimeout:               30 * time.Second,
		LeaseDuration:                15 * time.Second,
		RenewDeadline:                10 * time.Second,
		RetryPeriod:                  2 * time.Second,
		LeaderElectResourceName:      "cascade",
		LeaderElectResourceNamespace: defaultLeaseNamespace(),
		MetricsBindAddress:           ":8443",
		MetricsSecure:                true,
		HealthProbeBindAddress:       ":8081",
		FleetSecretsSelector:         defaultFleetSecretsSelector,
		FleetMemberPolicyConfigMap:   "cascade-system/cascade-policy",
		FleetMemberQPS:               20,
		FleetMemberBurst:             40,
		FleetMemberWorkers:           1,
		FleetMemberDiscoveryPeriod:   time.Hour,
		FleetShards:                  1,
		FleetMemberRequestTimeout:    fleet.DefaultRequestTimeout,
	}
}

// defaultFleetSecretsSelector is the label of multicluster-runtime's kubeconfig provider.
const defaultFleetSecretsSelector = "sigs.k8s.io/multicluster-runtime-kubeconfig=true"

// Fleet reports whether a --fleet-* provider is set: fleet mode.
func (o *Options) Fleet() bool {
	return o.FleetSecretsNamespace != "" || o.FleetClusterAPINamespace != "" || o.FleetKubeconfigDir != ""
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig. Empty: use the in-cluster service account.")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "Client-side queries per second to the API server, for all of cascade's requests. 0 (the default) disables the client-side limit: --workers bounds the requests in flight and the API server's API Priority and Fairness protects it.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Client-side burst above --kube-api-qps (when it is set).")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Number of concurrent collection workers. Fleet mode: the workers every member shares, handed out in turn between the members that have work.")
	fs.DurationVar(&o.DiscoveryPeriod, "discovery-period", o.DiscoveryPeriod, "How often to re-discover deletable resources (new CRDs are watched within one period).")
	fs.StringSliceVar(&o.IgnoredResources, "ignored-resources", o.IgnoredResources, "Resources never watched nor collected, as resource.group (core group: just resource).")
	fs.IntVar(&o.AbsentOwnerCacheSize, "absent-owner-cache-size", o.AbsentOwnerCacheSize, "Entries in the cache of owners verified absent.")
	fs.DurationVar(&o.SyncTimeout, "sync-timeout", o.SyncTimeout, "How long to wait for every resource's initial list before proceeding with those that synced; the others are counted in /readyz, named in the metrics (cascade_resource_unsynced) and the log, and decisions that need them wait.")
	fs.DurationVar(&o.OwnerReverifyPeriod, "owner-reverify-period", o.OwnerReverifyPeriod, "How often an owner cascade never observes (ignored or unwatchable kind), once found present by a live GET, is checked again while dependents reference it; the interval doubles after each check up to 16 periods.")
	fs.DurationVar(&o.StuckAfter, "stuck-deletion-threshold", o.StuckAfter, "How long an owner may wait on its orphan or foregroundDeletion finalizer before a Warning Event names up to 5 dependents it waits for and what holds each (repeated at most as often).")
	fs.DurationVar(&o.FinalizerResyncPeriod, "finalizer-resync-period", o.FinalizerResyncPeriod, "How often every owner being deleted with the orphan or foregroundDeletion finalizer is re-checked, whatever events arrived.")
	fs.DurationVar(&o.StartupTimeout, "startup-timeout", o.StartupTimeout, "How long to try reaching the API server at start before giving up.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address for /metrics, /debug/graph and /debug/pprof (host:port, or 0 to disable); HTTPS with authentication and authorization unless --metrics-secure=false.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve --metrics-bind-address over TLS, every request authenticated by the API server (TokenReview of its bearer token) and authorized (SubjectAccessReview: verb get on the path, such as /metrics or /debug/graph), both answers cached 10s. false: plain HTTP with no authentication, for local runs only (make run uses it).")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM certificate (chain) served on --metrics-bind-address, reloaded when the file changes; with --tls-private-key-file. Empty: a self-signed certificate made at start, held in memory only.")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "PEM private key of --tls-cert-file.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Take a Lease before collecting, so that only one of several replicas acts (standbys keep their graph warm).")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a standby waits after the last renewal before taking over.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader keeps trying to renew before it gives up (and exits).")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often to try to take or renew the Lease.")
	fs.StringVar(&o.LeaderElectResourceName, "leader-elect-resource-name", o.LeaderElectResourceName, "Name of the Lease.")
	fs.StringVar(&o.LeaderElectResourceNamespace, "leader-elect-resource-namespace", o.LeaderElectResourceNamespace, "Namespace of the Lease (default: the pod's namespace in a cluster, else kube-system).")
	fs.StringVar(&o.PolicyConfigMap, "policy-configmap", o.PolicyConfigMap, "The policy ConfigMap, NAMESPACE/NAME (key policy.yaml), watched and reloaded without a restart; a rejected edit keeps the last good policy. Empty: the built-in policy. Check a policy with: cascade policy validate -f FILE.")
	fs.Float64Var(&o.DefaultPropagationRate, "default-propagation-rate", o.DefaultPropagationRate, "Objects per second the policy's defaultPropagation pass stamps or unstamps (objects that existed before a rule, or whose rule changed; each costs a GET and a PATCH). New objects are stamped at creation by the admission policy cascade maintains, where the API server serves one (docs/compatibility.md).")
	fs.DurationVar(&o.DefaultPropagationPeriod, "default-propagation-period", o.DefaultPropagationPeriod, "How often the defaultPropagation pass looks for objects to stamp or unstamp when the policy does not change. Where the API server serves no MutatingAdmissionPolicy (Kubernetes 1.34 and 1.35 by default), the pass alone stamps new objects: at most this long after their creation (docs/compatibility.md).")
	fs.StringVar(&o.OrphanRecordConfigMap, "orphan-record-configmap", o.OrphanRecordConfigMap, "ConfigMap, NAMESPACE/NAME (default: the pod's namespace in a cluster, else kube-system), where each owner deleted with the orphan policy is recorded before its orphan finalizer is removed; a leader loads it before collecting a dependent whose owner is absent (at most 20s while the load fails, then without it), so a dependent created just before the owner's deletion loses its reference, not its life, across a failover or restart. Empty: no record (such a dependent may then be collected, as in-tree).")
	fs.DurationVar(&o.OrphanRecordTTL, "orphan-record-ttl", o.OrphanRecordTTL, "How long an entry of --orphan-record-configmap is kept at least: it is pruned once older, by a leader whose graph has been synced for as long.")
	fs.StringVar(&o.Mode, "mode", o.Mode, "collector: cascade is the cluster's garbage collector (kube-controller-manager's must be off: --controllers=*,-garbage-collector-controller). companion: beside kube-controller-manager's collector, which stays on and collects (managed clusters): cascade applies the policy's defaultPropagation, diagnoses stuck deletions (DeletionStuck Events), explains and exports its metrics, and never deletes an object nor removes an ownerReference or a GC finalizer; the policy's collect rules are not enforced (cascade_policy_rules_unenforced). Not with --dry-run. See docs/modes.md.")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "Shadow mode: decide everything, write nothing (no DELETE, PATCH, Event or Lease); count and log every write cascade would have sent (cascade_dry_run_actions_total).")
	fs.DurationVar(&o.DryRunDivergenceAfter, "dry-run-divergence-after", o.DryRunDivergenceAfter, "With --dry-run: how long after a would-be write the object is read again; another collector that did otherwise counts in cascade_dry_run_divergence_total.")
	fs.BoolVar(&o.EnableProfiling, "enable-profiling", o.EnableProfiling, "Serve Go's /debug/pprof on --metrics-bind-address.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address for /healthz and /readyz (host:port, or 0 to disable).")
	fs.StringVar(&o.FleetSecretsNamespace, "fleet-secrets-namespace", o.FleetSecretsNamespace, "Fleet mode: collect in every member whose kubeconfig is a Secret in this namespace of the host (the cluster of --kubeconfig) matching --fleet-secrets-selector, under the key kubeconfig; the member is named after the Secret (multicluster-runtime's kubeconfig provider). docs/fleet.md.")
	fs.StringVar(&o.FleetSecretsSelector, "fleet-secrets-selector", o.FleetSecretsSelector, "Fleet mode: the label selector of --fleet-secrets-namespace's Secrets.")
	fs.StringVar(&o.FleetClusterAPINamespace, "fleet-cluster-api-namespace", o.FleetClusterAPINamespace, "Fleet mode: collect in every Cluster API cluster of this namespace of the host: Secrets of type cluster.x-k8s.io/secret named CLUSTER-kubeconfig, labelled cluster.x-k8s.io/cluster-name, kubeconfig under the key value; the member is named CLUSTER.")
	fs.StringVar(&o.FleetKubeconfigDir, "fleet-kubeconfig-dir", o.FleetKubeconfigDir, "Fleet mode: collect in every member whose kubeconfig (its current context) is a file of this directory, named after the file without its extension; the directory is read again every 2s.")
	fs.StringVar(&o.FleetMemberPolicyConfigMap, "fleet-member-policy-configmap", o.FleetMemberPolicyConfigMap, "Fleet mode: a member's own policy ConfigMap, NAMESPACE/NAME in the member; where it does not exist the host's --policy-configmap is in force (else the built-in policy). Empty: the host's for every member.")
	fs.Float32Var(&o.FleetMemberQPS, "fleet-member-qps", o.FleetMemberQPS, "Fleet mode: each member's client-side queries per second against its own API server.")
	fs.IntVar(&o.FleetMemberBurst, "fleet-member-burst", o.FleetMemberBurst, "Fleet mode: each member's client-side burst above --fleet-member-qps.")
	fs.IntVar(&o.FleetMemberWorkers, "fleet-member-workers", o.FleetMemberWorkers, "Fleet mode: each member's workers per queue (deletes, owner checks, finalizers); each of their items also takes one of the --workers every member shares.")
	fs.IntVar(&o.FleetShards, "fleet-shards", o.FleetShards, "Fleet mode: shards the members are split into, each held by one replica through its Lease (--leader-elect-resource-name-shard-I); every replica collects in the members of the shards it holds, at most its fair share. 1: the one leader collects in every member.")
	fs.StringSliceVar(&o.FleetInsecureKubeconfigExec, "fleet-insecure-kubeconfig-exec", o.FleetInsecureKubeconfigExec, "Fleet mode, insecure: the exec credential plugins a member's kubeconfig may run, by their command exactly as the kubeconfig writes it (comma-separated). Whoever writes a member's kubeconfig then runs that command, with the arguments and environment they choose, in cascade's pod. Empty (the default): a kubeconfig with exec is refused and the member is down (docs/security.md).")
	fs.DurationVar(&o.FleetMemberRequestTimeout, "fleet-member-request-timeout", o.FleetMemberRequestTimeout, "Fleet mode: how long each request to a member may take, its answer read (watches keep their own timeouts); a member that does not answer in time fails that request alone. Answers above 16 MiB are refused.")
	fs.BoolVar(&o.FleetInsecureKubeconfigTLS, "fleet-insecure-kubeconfig-tls", o.FleetInsecureKubeconfigTLS, "Fleet mode, insecure: accept member kubeconfigs with insecure-skip-tls-verify or an http:// server. Whoever is on the network path to such a member can then answer cascade's lists with forged objects, which it deletes for real. Off by default: such a kubeconfig is refused and the member is down (docs/security.md).")
	fs.DurationVar(&o.FleetMemberDiscoveryPeriod, "fleet-member-discovery-period", o.FleetMemberDiscoveryPeriod, "Fleet mode: how often each member re-discovers its resources whatever its watches say; a CustomResourceDefinition or APIService created, changed or deleted in a member asks for a round at once.")
}

// Validate checks every flag and returns all problems, before any client is built.
func (o *Options) Validate() field.ErrorList {
	errs := validateLogging(o.Logs)
	if o.Kubeconfig != "" {
		if st, err := os.Stat(o.Kubeconfig); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("--kubeconfig"), o.Kubeconfig, "cannot read the file: "+unwrapPathError(err)))
		} else if st.IsDir() {
			errs = append(errs, field.Invalid(field.NewPath("--kubeconfig"), o.Kubeconfig, "is a directory, not a kubeconfig file"))
		}
	}
	if o.QPS < 0 {
		errs = append(errs, field.Invalid(field.NewPath("--kube-api-qps"), o.QPS, "must be >= 0 (0 disables the client-side limit)"))
	}
	if o.QPS > 0 && o.Burst < 1 {
		errs = append(errs, field.Invalid(field.NewPath("--kube-api-burst"), o.Burst, "must be >= 1 when --kube-api-qps is set"))
	}
	if o.Workers < 1 || o.Workers > 1000 {
		errs = append(errs, field.Invalid(field.NewPath("--workers"), o.Workers, "must be between 1 and 1000"))
	}
	if o.DiscoveryPeriod < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("--discovery-period"), o.DiscoveryPeriod.String(), "must be at least 1s"))
	}
	if o.SyncTimeout < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("--sync-timeout"), o.SyncTimeout.String(), "must be at least 1s"))
	}
	if o.StuckAfter < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("--stuck-deletion-threshold"), o.StuckAfter.String(), "must be at least 1s"))
	}
	if o.OwnerReverifyPeriod < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("--owner-reverify-period"), o.OwnerReverifyPeriod.String(), "must be at least 1s"))
	}
	if o.AbsentOwnerCacheSize < 1 {
		errs = append(errs, field.Invalid(field.NewPath("--absent-owner-cache-size"), o.AbsentOwnerCacheSize, "must be at least 1"))
	}
	if o.FinalizerResyncPeriod < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("--finalizer-resync-period"), o.FinalizerResyncPeriod.String(), "must be at least 1s"))
	}
	if o.StartupTimeout <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("--startup-timeout"), o.StartupTimeout.String(), "must be positive"))
	}
	if o.PolicyConfigMap != "" {
		if _, _, err := watch.ParseName(o.PolicyConfigMap); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("--policy-configmap"), o.PolicyConfigMap, err.Error()))
		}
	}
	if o.OrphanRecordConfigMap != "" {
		if _, _, err := watch.ParseName(o.OrphanRecordConfigMap); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("--orphan-record-configmap"), o.OrphanRecordConfigMap, err.Error()))
		}
	}
	if o.OrphanRecordTTL < time.Minute {
		errs = append(errs, field.Invalid(field.NewPath("--orphan-record-ttl"), o.OrphanRecordTTL.String(), "must be at least 1m (longer than a watch takes to deliver an event)"))
	}
	if o.DefaultPropagationRate <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("--default-propagation-rate"), o.DefaultPropagationRate, "must be positive"))
	}
	if o.DefaultPropagationPeriod < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("--default-propagation-period"), o.DefaultPropagationPeriod.String(), "must be at least 1s"))
	}
	if o.DryRunDivergenceAfter < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("--dry-run-divergence-after"), o.DryRunDivergenceAfter.String(), "must be at least 1s"))
	}
	switch o.Mode {
	case client.ModeCollector:
	case client.ModeCompanion:
		if o.DryRun {
			errs = append(errs, field.Invalid(field.NewPath("--mode"), o.Mode, "--dry-run is the collector's shadow (it writes nothing, not even the companion's stamps and Events): use --mode=collector --dry-run to see what cascade would do as the collector, or --mode=companion alone"))
		}
	default:
		errs = append(errs, field.NotSupported(field.NewPath("--mode"), o.Mode, []string{client.ModeCollector, client.ModeCompanion}))
	}
	if o.DryRun && o.LeaderElect {
		errs = append(errs, field.Invalid(field.NewPath("--dry-run"), true, "writes nothing, not even a Lease: run one replica without --leader-elect"))
	}
	if o.LeaderElect {
		if o.LeaseDuration <= o.RenewDeadline {
			errs = append(errs, field.Invalid(field.NewPath("--leader-elect-lease-duration"), o.LeaseDuration.String(), "must be greater than --leader-elect-renew-deadline"))
		}
		if o.RenewDeadline <= o.RetryPeriod || o.RetryPeriod <= 0 {
			errs = append(errs, field.Invalid(field.NewPath("--leader-elect-renew-deadline"), o.RenewDeadline.String(), "must be greater than --leader-elect-retry-period, which must be positive"))
		}
		if o.LeaderElectResourceName == "" || o.LeaderElectResourceNamespace == "" {
			errs = append(errs, field.Required(field.NewPath("--leader-elect-resource-name"), "name and namespace of the Lease are required with --leader-elect"))
		}
	}
	for _, r := range o.IgnoredResources {
		if _, err := parseGroupResource(r); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("--ignored-resources"), r, err.Error()))
		}
	}
	for _, a := range []struct{ flag, addr string }{
		{"--metrics-bind-address", o.MetricsBindAddress},
		{"--health-probe-bind-address", o.HealthProbeBindAddress},
	} {
		if err := validateBindAddress(a.addr); err != nil {
			errs = append(errs, field.Invalid(field.NewPath(a.flag), a.addr, err.Error()))
		}
	}
	if (o.TLSCertFile == "") != (o.TLSPrivateKeyFile == "") {
		errs = append(errs, field.Required(field.NewPath("--tls-private-key-file"), "--tls-cert-file and --tls-private-key-file go together"))
	}
	if !o.MetricsSecure && (o.TLSCertFile != "" || o.TLSPrivateKeyFile != "") {
		errs = append(errs, field.Invalid(field.NewPath("--metrics-secure"), false, "serves plain HTTP: --tls-cert-file and --tls-private-key-file would not be used"))
	}
	for _, f := range []struct{ flag, path string }{{"--tls-cert-file", o.TLSCertFile}, {"--tls-private-key-file", o.TLSPrivateKeyFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, field.Invalid(field.NewPath(f.flag), f.path, "cannot read the file: "+unwrapPathError(err)))
		}
	}
	errs = append(errs, o.validateFleet()...)
	if o.MetricsBindAddress != "0" && o.MetricsBindAddress == o.HealthProbeBindAddress {
		errs = append(errs, field.Invalid(field.NewPath("--health-probe-bind-address"), o.HealthProbeBindAddress, "must differ from --metrics-bind-address"))
	}
	return errs
}

// IgnoredPolicyResources returns --ignored-resources as the policy names resources (call after
// Validate).
func (o *Options) IgnoredPolicyResources() []policy.GroupResource {
	var out []policy.GroupResource
	for gr := range o.IgnoredGroupResources() {
		out = append(out, policy.GroupResource{Group: gr.Group, Resource: gr.Resource})
	}
	return out
}

// IgnoredGroupResources returns --ignored-resources parsed (call after Validate).
func (o *Options) IgnoredGroupResources() map[schema.GroupResource]struct{} {
	out := make(map[schema.GroupResource]struct{}, len(o.IgnoredResources))
	for _, r := range o.IgnoredResources {
		gr, _ := parseGroupResource(r)
		out[gr] = struct{}{}
	}
	return out
}

func parseGroupResource(s string) (schema.GroupResource, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return schema.GroupResource{}, fmt.Errorf("empty resource name")
	}
	gr := schema.ParseGroupResource(s)
	if strings.ContainsAny(gr.Resource, "/ ") || gr.Resource == "" {
		return schema.GroupResource{}, fmt.Errorf("want resource.group, for example deployments.apps or events")
	}
	return gr, nil
}

func validateBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port (for example :8080) or 0 to disable")
	}
	if host != "" && net.ParseIP(host) == nil && host != "localhost" {
		return fmt.Errorf("host %q is not an IP address or localhost", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number between 0 and 65535", port)
	}
	return nil
}

func unwrapPathError(err error) string {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// oneLine renders a validation error list as a single line that names each flag.
func oneLine(errs field.ErrorList) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, fmt.Sprintf("invalid %s=%v: %s", e.Field, e.BadValue, e.Detail))
	}
	return strings.Join(parts, "; ")
}

// flagSet is every flag of the collector: its Options' and component-base's logging flags.
func flagSet(opts *Options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("cascade", pflag.ContinueOnError)
	opts.AddFlags(fs)
	logsapi.AddFlags(opts.Logs, fs)
	return fs
}

// validateFleet checks the --fleet-* flags.
func (o *Options) validateFleet() field.ErrorList {
	var errs field.ErrorList
	providers := 0
	for _, v := range []string{o.FleetSecretsNamespace, o.FleetClusterAPINamespace, o.FleetKubeconfigDir} {
		if v != "" {
			providers++
		}
	}
	if providers > 1 {
		errs = append(errs, field.Invalid(field.NewPath("--fleet-secrets-namespace"), o.FleetSecretsNamespace, "at most one of --fleet-secrets-namespace, --fleet-cluster-api-namespace and --fleet-kubeconfig-dir"))
	}
	if o.FleetSecretsNamespace != "" {
		if _, err := labels.Parse(o.FleetSecretsSelector); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("--fleet-secrets-selector"), o.FleetSecretsSelector, err.Error()))
		}
	}
	if o.FleetKubeconfigDir != "" {
		if st, err := os.Stat(o.FleetKubeconfigDir); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("--fleet-kubeconfig-dir"), o.FleetKubeconfigDir, "cannot read the directory: "+unwrapPathError(err)))
		} else if !st.IsDir() {
			errs = append(errs, field.Invalid(field.NewPath("--fleet-kubeconfig-dir"), o.FleetKubeconfigDir, "is not a directory"))
		}
	}
	if o.FleetMemberPolicyConfigMap != "" {
		if _, _, err := watch.ParseName(o.FleetMemberPolicyConfigMap); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("--fleet-member-policy-configmap"), o.FleetMemberPolicyConfigMap, err.Error()))
		}
	}
	if o.FleetMemberQPS <= 0 || o.FleetMemberBurst < 1 {
		errs = append(errs, field.Invalid(field.NewPath("--fleet-member-qps"), o.FleetMemberQPS, "must be positive, with --fleet-member-burst at least 1: each member's budget against its own API server"))
	}
	if o.FleetShards < 1 || o.FleetShards > 1000 {
		errs = append(errs, field.Invalid(field.NewPath("--fleet-shards"), o.FleetShards, "must be between 1 and 1000"))
	}
	if o.FleetMemberDiscoveryPeriod < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("--fleet-member-discovery-period"), o.FleetMemberDiscoveryPeriod.String(), "must be at least 1s"))
	}
	if o.FleetMemberWorkers < 1 || o.FleetMemberWorkers > 100 {
		errs = append(errs, field.Invalid(field.NewPath("--fleet-member-workers"), o.FleetMemberWorkers, "must be between 1 and 100"))
	}
	if o.FleetShards > 1 && !o.Fleet() {
		errs = append(errs, field.Invalid(field.NewPath("--fleet-shards"), o.FleetShards, "shards split a fleet's members: it needs a --fleet-* provider"))
	}
	for _, c := range o.FleetInsecureKubeconfigExec {
		if strings.TrimSpace(c) == "" {
			errs = append(errs, field.Invalid(field.NewPath("--fleet-insecure-kubeconfig-exec"), o.FleetInsecureKubeconfigExec, "an empty command"))
			break
		}
	}
	if o.FleetMemberRequestTimeout < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("--fleet-member-request-timeout"), o.FleetMemberRequestTimeout.String(), "must be at least 1s"))
	}
	if !o.Fleet() && (len(o.FleetInsecureKubeconfigExec) > 0 || o.FleetInsecureKubeconfigTLS) {
		errs = append(errs, field.Invalid(field.NewPath("--fleet-insecure-kubeconfig-exec"), o.FleetInsecureKubeconfigExec, "the --fleet-insecure-kubeconfig-* flags are about members' kubeconfigs: they need a --fleet-* provider"))
	}
	if o.Fleet() && (o.Mode != client.ModeCollector || o.DryRun) {
		errs = append(errs, field.Invalid(field.NewPath("--mode"), o.Mode, "fleet mode collects (--mode=collector, without --dry-run): its members are control planes without kube-controller-manager's collector"))
	}
	return errs
}
