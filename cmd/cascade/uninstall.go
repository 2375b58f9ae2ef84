package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/features"
	"github.com/cascade-gc/cascade/policy"
	"github.com/cascade-gc/cascade/policy/watch"
)

// Client budget of `cascade uninstall`: one list page per resource, then one PATCH per stamped
// object (a GET more on a conflict).
const (
	uninstallQPS   = 50
	uninstallBurst = 100
	listPage       = 500
)

// newUninstallCommand is `cascade uninstall`: removes what cascade wrote into the cluster at
// run time and would leave acting without it (docs/uninstall.md).
func newUninstallCommand() *cobra.Command {
	var (
		kf     kubeFlags
		dryRun bool
		force  bool
		lease  string
		stop   string
		wait   time.Duration
		format string
		member bool
	)
	cmd := &cobra.Command{
		Use:   "uninstall [--dry-run] [-o text|json|yaml] [--kubeconfig PATH] [--context NAME]",
		Short: "Remove cascade's admission objects and the finalizers and annotations its defaults stamped",
		Long: "Remove what cascade wrote into the cluster at run time and what would keep acting without it:\n" +
			"the MutatingAdmissionPolicy and binding " + policy.AdmissionName + " (only when labelled " + policy.ManagedByLabel + "=" + policy.ManagedByValue + ";\n" +
			"at admissionregistration.k8s.io/v1 and v1beta1, whichever the server serves),\n" +
			"then, on every object of every resource that supports list and patch and carries the\n" +
			"annotation " + policy.DefaultPropagationAnnotation + ", the finalizer that annotation records\n" +
			"(when still there) and the annotation. No other finalizer is ever removed; an object being\n" +
			"deleted is left alone (its finalizers belong to its deletion). Prints what it did, per resource\n" +
			"(-o json|yaml: one document, docs/cli.md). Stop cascade first (it would put them back); see\n" +
			"docs/uninstall.md.",
		Example: "  cascade uninstall --dry-run\n  cascade uninstall --context prod\n  cascade uninstall --fleet-member --kubeconfig member-a.kubeconfig",
		Args:    noArgs,
	}
	kf.add(cmd.Flags(), false)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "Read everything and print what would be done; change nothing.")
	cmd.Flags().StringVar(&lease, "lease", "cascade", "The Lease of cascade's leader election: NAME, looked for in every namespace, or NAMESPACE/NAME. While a holder renews it, cascade is running and uninstall refuses to start (with --wait, it waits for it to be released or to expire). No such Lease is an error too (fail closed: cascade may run without leader election), unless --stop-deployment stopped the Deployment first. Empty: no check.")
	cmd.Flags().BoolVar(&force, "force", false, "Run even while the Lease is held or when it is not found (a running cascade puts back what this removes).")
	cmd.Flags().StringVar(&stop, "stop-deployment", "", "NAMESPACE/NAME of cascade's Deployment to stop first: scaled to zero replicas, then uninstall waits (--wait) until none of its pods is left and its Lease is free. What the Helm chart's pre-delete hook runs.")
	cmd.Flags().BoolVar(&member, "fleet-member", false, "The cluster is a fleet member (docs/fleet.md): a fleet's Leases are in its host cluster, none in a member, so no Lease is looked for. Run it once the member has left the fleet (its Secret deleted or unlabelled, its file removed): a cascade still collecting in it puts back what this removes, which uninstall then reports as incomplete.")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "text, json or yaml.")
	cmd.Flags().DurationVar(&wait, "wait", 0, "How long to wait for cascade to stop (its pods gone, its Lease released or expired) before refusing. 0: do not wait (2m with --stop-deployment).")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !slices.Contains(outputFormats, format) {
			return &usageError{err: fmt.Errorf("invalid -o %q: text, json or yaml", format)}
		}
		if member {
			if cmd.Flags().Changed("lease") || stop != "" {
				return &usageError{err: errors.New("--fleet-member takes neither --lease nor --stop-deployment: a member has no Lease nor Deployment of cascade's (they are in the fleet's host)")}
			}
			lease = ""
		}
		var leaseNS, leaseName string
		switch {
		case lease == "":
		case !strings.Contains(lease, "/"):
			leaseName = lease // every namespace
		default:
			var err error
			if leaseNS, leaseName, err = watch.ParseName(lease); err != nil {
				return &usageError{err: fmt.Errorf("invalid --lease=%s: %v", lease, err)}
			}
		}
		var stopNS, stopName string
		if stop != "" {
			var err error
			if stopNS, stopName, err = watch.ParseName(stop); err != nil {
				return &usageError{err: fmt.Errorf("invalid --stop-deployment=%s: %v", stop, err)}
			}
			if wait == 0 {
				wait = 2 * time.Minute
			}
		}
		if wait < 0 {
			return &usageError{err: fmt.Errorf("invalid --wait=%s: must not be negative", wait)}
		}
		cfg, err := kf.restConfig()
		if err != nil {
			return err
		}
		cfg.UserAgent = userAgent + "-uninstall"
		cfg.QPS, cfg.Burst = uninstallQPS, uninstallBurst
		cfg.WarningHandler = rest.NoWarnings{} // listing deprecated resources (v1 Endpoints) warns
		cs, err := newClients(cfg)
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		u := newUninstaller(ctx, cs, client.NewEdge(cs.metadata, cs.kube))
		u.dryRun, u.leaseNamespace, u.leaseName, u.force = dryRun, leaseNS, leaseName, force
		u.stopNamespace, u.stopName, u.wait, u.format, u.fleetMember = stopNS, stopName, wait, format, member
		return u.run(ctx, cmd.OutOrStdout())
	}
	return cmd
}

// uninstaller is one run of `cascade uninstall`. Every write goes through edge (the dry-run
// Edge with --dry-run); lists and the Lease are reads.
type uninstaller struct {
	// resources is discovery's preferred resources (ServerPreferredResources).
	resources func() ([]*metav1.APIResourceList, error)
	// admission is which versions of the MutatingAdmissionPolicy the server serves
	// (features.DetectAdmission): cascade's objects are deleted at each.
	admission func() (features.Admission, error)
	meta      metadata.Interface
	kube      kubernetes.Interface
	edge      client.Edge

	dryRun bool
	// leaseName "": no check; leaseNamespace "": the Lease of that name in every namespace.
	leaseNamespace, leaseName string
	force                     bool
	// stopNamespace/stopName is the Deployment to stop first ("": none); stopped is set once
	// it has no pod left.
	stopNamespace, stopName string
	stopped                 bool
	// wait bounds the waits for cascade to stop; sleep waits between reads (tests fake it).
	wait  time.Duration
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time
	// format is -o: text ("" too) is printed as it goes, json and yaml once at the end.
	format string
	// fleetMember: the cluster is a fleet member (--fleet-member), which has no Lease.
	fleetMember bool
}

// newUninstaller is the uninstaller of the cluster of cs, writing through edge (`cascade
// uninstall`'s, or a fleet member's as it leaves the fleet: memberUnit.Leave), with no Lease
// check and no Deployment to stop until the caller sets them.
func newUninstaller(ctx context.Context, cs *clients, edge client.Edge) *uninstaller {
	return &uninstaller{
		resources: cs.disco.ServerPreferredResources, meta: cs.metadata, kube: cs.kube, edge: edge,
		admission: func() (features.Admission, error) { return features.DetectAdmission(ctx, cs.disco) },
		now:       time.Now, sleep: sleepCtx,
	}
}

// sleepCtx waits d, or less when ctx ends (its error then).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// resourceCounts is what uninstall found and did on one resource's stamped objects.
type resourceCounts struct {
	resource  string
	stamped   int // objects carrying the annotation
	unstamped int // annotation removed
	removed   map[string]int
	deleting  int // left alone: being deleted
	changed   int // gone, replaced or no longer stamped when written to
	failed    int
}

// uninstallResult is what `cascade uninstall` did, the document -o json|yaml prints
// (docs/cli.md): every field is always there (empty lists as []).
type uninstallResult struct {
	DryRun bool `json:"dryRun"`
	// Complete: nothing failed, every API group was looked at, and no cascade put the admission
	// objects back. The exit status is 1 otherwise.
	Complete bool `json:"complete"`
	// Notes are what uninstall said before it began (the Deployment it stopped, the Lease).
	Notes []string `json:"notes"`
	// AdmissionObjects is what became of cascade's admission objects, binding then policy, at
	// each version the server serves.
	AdmissionObjects []admissionResult `json:"admissionObjects"`
	// Resources counts the stamped objects of each resource that had any; Total adds them up.
	Resources []resourceResult `json:"resources"`
	Total     resourceResult   `json:"total"`
	// Problems are why it is not complete.
	Problems []string `json:"problems"`
}

// admissionResult is one of cascade's admission objects at one version.
type admissionResult struct {
	Kind       string `json:"kind"`       // MutatingAdmissionPolicy or MutatingAdmissionPolicyBinding
	APIVersion string `json:"apiVersion"` // admissionregistration.k8s.io/v1 or v1beta1; "" when none is served
	Name       string `json:"name"`
	// Result: deleted, wouldBeDeleted (--dry-run), notFound, leftAlone (not labelled as
	// cascade's), failed (Error says why), notServed (the server serves no
	// MutatingAdmissionPolicy).
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
}

// resourceResult is resourceCounts as -o json|yaml prints them.
type resourceResult struct {
	Resource                  string `json:"resource,omitempty"` // plural.group; "" for the total
	Stamped                   int    `json:"stamped"`
	Unstamped                 int    `json:"unstamped"`
	OrphanRemoved             int    `json:"orphanRemoved"`
	ForegroundDeletionRemoved int    `json:"foregroundDeletionRemoved"`
	BeingDeleted              int    `json:"beingDeleted"`
	ChangedMeanwhile          int    `json:"changedMeanwhile"`
	Failed                    int    `json:"failed"`
}

func (c *resourceCounts) result() resourceResult {
	return resourceResult{Resource: c.resource, Stamped: c.stamped, Unstamped: c.unstamped,
		OrphanRemoved: c.removed[policy.FinalizerOrphan], ForegroundDeletionRemoved: c.removed[policy.FinalizerForeground],
		BeingDeleted: c.deleting, ChangedMeanwhile: c.changed, Failed: c.failed}
}

func (u *uninstaller) run(ctx context.Context, out io.Writer) error {
	text := u.format == "" || u.format == "text"
	res := uninstallResult{DryRun: u.dryRun, Notes: []string{}, AdmissionObjects: []admissionResult{}, Resources: []resourceResult{}, Problems: []string{}}
	// What is said before the uninstall proper: printed as it goes, or kept as the notes.
	var notes strings.Builder
	say := out
	if !text {
		say = &notes
	}
	if u.dryRun {
		u.edge, _ = u.edge.DryRun(prometheus.NewRegistry(), time.Hour) // never Run: nothing to compare
		_, _ = fmt.Fprintln(say, "Dry run: nothing is changed; every line says what would be done.")
	}
	if u.fleetMember {
		_, _ = fmt.Fprintln(say, "Fleet member: no Lease looked for (a fleet's Leases are in its host); cascade must no longer collect in this member.")
	}
	if err := u.stopDeployment(ctx, say); err != nil {
		return err
	}
	if err := u.checkLease(ctx, say); err != nil {
		return err
	}
	for line := range strings.Lines(notes.String()) {
		res.Notes = append(res.Notes, strings.TrimSuffix(line, "\n"))
	}
	// The admission objects first: once they are gone, no create is stamped any more.
	adm, err := u.deleteAdmission(ctx)
	res.AdmissionObjects = append(res.AdmissionObjects, adm...)
	if text {
		_, _ = io.WriteString(out, admissionText(adm))
	}
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	counts, discoErr, err := u.unstampAll(ctx)
	if err != nil {
		return err
	}
	if discoErr != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("some API groups could not be discovered, their objects were not looked at: %v", discoErr))
	}
	total := resourceCounts{removed: map[string]int{}}
	for _, c := range counts {
		total.add(c)
		res.Resources = append(res.Resources, c.result())
	}
	res.Total = total.result()
	if text {
		u.report(out, counts, total)
	}
	if total.failed > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d stamped objects could not be unstamped (see the log above)", total.failed))
	}
	if !u.dryRun {
		// A cascade still running (without leader election, or with --force) puts them back.
		for _, v := range u.admissionVersions(ctx) {
			if obj, err := v.getPolicy(); err == nil && policy.ManagedByCascade(obj.GetLabels()) {
				res.Problems = append(res.Problems, "the MutatingAdmissionPolicy "+policy.AdmissionName+" is back: a cascade is still running; stop it and run uninstall again")
				break
			}
		}
	}
	res.Complete = len(res.Problems) == 0
	if !text {
		if err := printResult(out, u.format, res, nil); err != nil {
			return err
		}
	}
	if !res.Complete {
		return fmt.Errorf("uninstall incomplete: %s; run it again once fixed", strings.Join(res.Problems, "; "))
	}
	return nil
}

// stopDeployment scales cascade's Deployment (--stop-deployment) to zero replicas and waits, for
// at most u.wait, until none of its pods is left: from then on no replica of it can act, whatever
// its Lease says. With --dry-run it only says so.
func (u *uninstaller) stopDeployment(ctx context.Context, out io.Writer) error {
	if u.stopName == "" {
		return nil
	}
	deployments := u.kube.AppsV1().Deployments(u.stopNamespace)
	d, err := deployments.Get(ctx, u.stopName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("cannot read the Deployment %s/%s to stop it: %v", u.stopNamespace, u.stopName, err)
	}
	if u.dryRun {
		_, _ = fmt.Fprintf(out, "Would scale the Deployment %s/%s to zero replicas and wait for its pods to go.\n", u.stopNamespace, u.stopName)
		return nil
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		// Through the edge, as every write (a merge patch of the Deployment's replicas).
		if _, err := u.edge.Objects.Patch(ctx, appsv1.SchemeGroupVersion.WithResource("deployments"), u.stopNamespace, u.stopName, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`)); err != nil {
			return fmt.Errorf("cannot scale the Deployment %s/%s to zero: %v", u.stopNamespace, u.stopName, err)
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		return fmt.Errorf("the Deployment %s/%s has no usable pod selector (%v): cannot tell when it has stopped", u.stopNamespace, u.stopName, err)
	}
	deadline := u.now().Add(u.wait)
	for {
		pods, err := u.kube.CoreV1().Pods(u.stopNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return fmt.Errorf("cannot list the pods of the Deployment %s/%s: %v", u.stopNamespace, u.stopName, err)
		}
		if len(pods.Items) == 0 {
			_, _ = fmt.Fprintf(out, "Stopped the Deployment %s/%s: no pod of it is left.\n", u.stopNamespace, u.stopName)
			u.stopped = true
			return nil
		}
		if !u.now().Before(deadline) {
			return fmt.Errorf("the Deployment %s/%s is scaled to zero, but %d of its pods are still there after %s", u.stopNamespace, u.stopName, len(pods.Items), u.wait)
		}
		if err := u.sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// checkLease refuses to go on while a holder renews cascade's Lease (the one named, or every
// Lease of that name in every namespace): a running cascade would put back the admission objects
// and stamps. With u.wait it waits for the Lease to be released or to expire. No such Lease is a
// refusal too (fail closed: a cascade without leader election takes none, and one installed
// elsewhere takes its own), unless the Deployment it would belong to was just stopped.
func (u *uninstaller) checkLease(ctx context.Context, out io.Writer) error {
	if u.leaseName == "" || u.force {
		return nil
	}
	where := u.leaseNamespace + "/" + u.leaseName
	if u.leaseNamespace == "" {
		where = u.leaseName + " in any namespace"
	}
	deadline := u.now().Add(u.wait)
	for {
		leases, err := u.leases(ctx)
		if err != nil {
			return fmt.Errorf("cannot read the Lease %s to tell whether cascade is running: %v (pass --lease= or --force to skip the check)", where, err)
		}
		if len(leases) == 0 {
			if u.stopped {
				_, _ = fmt.Fprintf(out, "No Lease %s: the Deployment stopped never led.\n", where)
				return nil
			}
			return fmt.Errorf("no Lease %s: cannot tell whether cascade is running (one without leader election takes none); stop it, then pass --force, or name its Lease with --lease=NAMESPACE/NAME", where)
		}
		held := ""
		for _, l := range leases {
			s := l.Spec
			if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
				continue
			}
			age := u.now().Sub(s.RenewTime.Time)
			if age < time.Duration(*s.LeaseDurationSeconds)*time.Second {
				held = fmt.Sprintf("the Lease %s/%s is held by %s, renewed %s ago", l.Namespace, l.Name, *s.HolderIdentity, age.Round(time.Second))
				break
			}
		}
		if held == "" {
			return nil
		}
		if !u.now().Before(deadline) {
			if u.wait > 0 {
				held += fmt.Sprintf(" (waited %s)", u.wait)
			}
			return fmt.Errorf("cascade is running: %s; stop it first (kubectl -n NAMESPACE scale deployment cascade --replicas=0, or --stop-deployment=NAMESPACE/NAME), or pass --force", held)
		}
		if err := u.sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// leases reads the Lease named, or every Lease of that name.
func (u *uninstaller) leases(ctx context.Context) ([]coordinationv1.Lease, error) {
	if u.leaseNamespace != "" {
		l, err := u.kube.CoordinationV1().Leases(u.leaseNamespace).Get(ctx, u.leaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []coordinationv1.Lease{*l}, nil
	}
	l, err := u.kube.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", u.leaseName).String()})
	if err != nil {
		return nil, err
	}
	out := l.Items[:0]
	for _, x := range l.Items {
		if x.Name == u.leaseName {
			out = append(out, x)
		}
	}
	return out, nil
}

// The versions of the admission API cascade's objects are at.
const (
	admissionV1      = "admissionregistration.k8s.io/v1"
	admissionV1beta1 = "admissionregistration.k8s.io/v1beta1"
)

// admissionVersion is cascade's admission objects at one version of the API.
type admissionVersion struct {
	apiVersion            string // admissionV1 or admissionV1beta1
	getPolicy, getBinding func() (metav1.Object, error)
	deletePolicy          func(uid types.UID) error
	deleteBinding         func(types.UID) error
}

// admissionVersions is the versions of the admission objects the server serves, v1 first; nil
// when it serves none (or discovery cannot say).
func (u *uninstaller) admissionVersions(ctx context.Context) []admissionVersion {
	served, err := u.admission()
	if err != nil {
		return nil
	}
	adm, name := u.edge.Admission, policy.AdmissionName
	var out []admissionVersion
	if served.V1 {
		out = append(out, admissionVersion{
			apiVersion:    admissionV1,
			getPolicy:     func() (metav1.Object, error) { return adm.GetPolicy(ctx, name) },
			getBinding:    func() (metav1.Object, error) { return adm.GetBinding(ctx, name) },
			deletePolicy:  func(uid types.UID) error { return adm.DeletePolicy(ctx, name, uid) },
			deleteBinding: func(uid types.UID) error { return adm.DeleteBinding(ctx, name, uid) },
		})
	}
	if served.V1beta1 {
		out = append(out, admissionVersion{
			apiVersion:    admissionV1beta1,
			getPolicy:     func() (metav1.Object, error) { return adm.GetPolicyV1beta1(ctx, name) },
			getBinding:    func() (metav1.Object, error) { return adm.GetBindingV1beta1(ctx, name) },
			deletePolicy:  func(uid types.UID) error { return adm.DeletePolicyV1beta1(ctx, name, uid) },
			deleteBinding: func(uid types.UID) error { return adm.DeleteBindingV1beta1(ctx, name, uid) },
		})
	}
	return out
}

// deleteAdmission deletes the binding, then the policy, each only when labelled as cascade's,
// at every version the server serves (v1, then v1beta1: where both are served they are one
// object, found gone at the second), and says what became of each.
func (u *uninstaller) deleteAdmission(ctx context.Context) ([]admissionResult, error) {
	deleted := "deleted"
	if u.dryRun {
		deleted = "wouldBeDeleted"
	}
	served, err := u.admission()
	if err != nil {
		return nil, fmt.Errorf("cannot tell which versions of MutatingAdmissionPolicy the server serves: %w", err)
	}
	if !served.V1 && !served.V1beta1 {
		return []admissionResult{{Kind: "MutatingAdmissionPolicy", Name: policy.AdmissionName, Result: "notServed"}}, nil
	}
	var (
		out  []admissionResult
		errs []error
	)
	// Each object: read, left alone unless labelled as cascade's, deleted (the policy with its
	// UID as precondition).
	one := func(kind, apiVersion string, get func() (metav1.Object, error), del func(uid types.UID) error) {
		r := admissionResult{Kind: kind, APIVersion: apiVersion, Name: policy.AdmissionName}
		obj, err := get()
		switch {
		case apierrors.IsNotFound(err):
			r.Result = "notFound"
		case err != nil:
			r.Result, r.Error = "failed", err.Error()
			errs = append(errs, fmt.Errorf("reading %s %s: %w", kind, policy.AdmissionName, err))
		case !policy.ManagedByCascade(obj.GetLabels()):
			r.Result = "leftAlone"
		default:
			if err := del(obj.GetUID()); err != nil && !apierrors.IsNotFound(err) {
				r.Result, r.Error = "failed", err.Error()
				errs = append(errs, fmt.Errorf("deleting %s %s: %w", kind, policy.AdmissionName, err))
			} else {
				r.Result = deleted
			}
		}
		out = append(out, r)
	}
	for _, v := range u.admissionVersions(ctx) {
		one("MutatingAdmissionPolicyBinding", v.apiVersion, v.getBinding, v.deleteBinding)
		one("MutatingAdmissionPolicy", v.apiVersion, v.getPolicy, v.deletePolicy)
	}
	return out, errors.Join(errs...)
}

// admissionText is the admission results as uninstall prints them: one line each (none for a
// failure, which the error says).
func admissionText(results []admissionResult) string {
	var b strings.Builder
	for _, r := range results {
		kind := r.Kind
		if r.APIVersion == admissionV1beta1 {
			kind += " (" + admissionV1beta1 + ")"
		}
		switch r.Result {
		case "notServed":
			fmt.Fprintf(&b, "MutatingAdmissionPolicy %s: none (the API server serves no MutatingAdmissionPolicy, neither admissionregistration.k8s.io/v1 nor v1beta1)\n", r.Name)
		case "notFound":
			fmt.Fprintf(&b, "%s %s: none\n", kind, r.Name)
		case "leftAlone":
			fmt.Fprintf(&b, "%s %s: left alone, not labelled %s=%s (not cascade's)\n", kind, r.Name, policy.ManagedByLabel, policy.ManagedByValue)
		case "deleted":
			fmt.Fprintf(&b, "%s %s: deleted\n", kind, r.Name)
		case "wouldBeDeleted":
			fmt.Fprintf(&b, "%s %s: would be deleted\n", kind, r.Name)
		}
	}
	return b.String()
}

// stampable is every resource that can be listed and patched, sorted by name. A group that
// cannot be discovered is returned as discoErr, with the resources of the others.
func (u *uninstaller) stampable() (gvrs []schema.GroupVersionResource, discoErr error, err error) {
	lists, err := u.resources()
	if err != nil {
		if !discovery.IsGroupDiscoveryFailedError(err) {
			return nil, nil, fmt.Errorf("cannot discover the cluster's resources: %v", err)
		}
		discoErr = withoutOwnGroup(err)
	}
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "patch"}}, lists)
	set, err := discovery.GroupVersionResources(lists)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the cluster's resources: %v", err)
	}
	for gvr := range set {
		if !strings.Contains(gvr.Resource, "/") {
			gvrs = append(gvrs, gvr)
		}
	}
	slices.SortFunc(gvrs, func(a, b schema.GroupVersionResource) int {
		return strings.Compare(resourceName(a), resourceName(b))
	})
	return gvrs, discoErr, nil
}

func resourceName(gvr schema.GroupVersionResource) string {
	return gvr.GroupResource().String()
}

// unstampAll lists every stampable resource (metadata only, in pages) and unstamps each
// object that carries the annotation. It returns the counts of the resources that had any.
func (u *uninstaller) unstampAll(ctx context.Context) (counts []*resourceCounts, discoErr, err error) {
	gvrs, discoErr, err := u.stampable()
	if err != nil {
		return nil, nil, err
	}
	for _, gvr := range gvrs {
		c := &resourceCounts{resource: resourceName(gvr), removed: map[string]int{}}
		opts := metav1.ListOptions{Limit: listPage}
		for {
			list, err := u.meta.Resource(gvr).Namespace(metav1.NamespaceAll).List(ctx, opts)
			if err != nil {
				if ctx.Err() != nil {
					return nil, nil, ctx.Err()
				}
				if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
					break // gone since discovery
				}
				return nil, nil, fmt.Errorf("cannot list %s: %v", c.resource, err)
			}
			for i := range list.Items {
				u.unstamp(ctx, gvr, &list.Items[i], c)
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
		if c.stamped > 0 {
			counts = append(counts, c)
		}
	}
	return counts, discoErr, nil
}

// unstamp removes one listed object's stamp, if it has one, and counts what was done.
func (u *uninstaller) unstamp(ctx context.Context, gvr schema.GroupVersionResource, o *metav1.PartialObjectMetadata, c *resourceCounts) {
	if _, ok := o.Annotations[policy.DefaultPropagationAnnotation]; !ok {
		return
	}
	c.stamped++
	if o.DeletionTimestamp != nil {
		c.deleting++
		return
	}
	t := client.Target{GVR: gvr, Namespace: o.Namespace, Name: o.Name, UID: o.UID}
	plan, err := client.UnstampDefault(ctx, u.edge.Objects, t, o)
	switch {
	case err != nil:
		c.failed++
		klog.FromContext(ctx).Error(err, "Cannot unstamp", "object", t.String())
	case !plan.Change:
		c.changed++
	default:
		c.unstamped++
		if plan.Removed != "" {
			c.removed[plan.Removed]++
		}
	}
}

// add adds c's counts to t's.
func (t *resourceCounts) add(c *resourceCounts) {
	t.stamped += c.stamped
	t.unstamped += c.unstamped
	t.deleting += c.deleting
	t.changed += c.changed
	t.failed += c.failed
	for f, n := range c.removed {
		t.removed[f] += n
	}
}

// report prints the counts as a table and the total line.
func (u *uninstaller) report(out io.Writer, counts []*resourceCounts, total resourceCounts) {
	verb := ""
	if u.dryRun {
		verb = "would be "
	}
	if len(counts) == 0 {
		_, _ = fmt.Fprintf(out, "Objects stamped by cascade's defaultPropagation (annotation %s): none\n", policy.DefaultPropagationAnnotation)
		return
	}
	_, _ = fmt.Fprintf(out, "Objects stamped by cascade's defaultPropagation (annotation %s), by resource:\n", policy.DefaultPropagationAnnotation)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "  RESOURCE\tSTAMPED\tUNSTAMPED\tORPHAN REMOVED\tFOREGROUNDDELETION REMOVED\tBEING DELETED (LEFT)\tCHANGED MEANWHILE\tFAILED")
	for _, c := range counts {
		_, _ = fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c.resource, c.stamped, c.unstamped,
			c.removed[policy.FinalizerOrphan], c.removed[policy.FinalizerForeground], c.deleting, c.changed, c.failed)
	}
	_ = tw.Flush()
	_, _ = fmt.Fprintf(out, "Total: %d stamped objects in %d resource(s): %d %sunstamped (%d orphan and %d foregroundDeletion finalizers %sremoved with the annotation), %d being deleted left alone, %d changed meanwhile, %d failed.\n",
		total.stamped, len(counts), total.unstamped, verb, total.removed[policy.FinalizerOrphan], total.removed[policy.FinalizerForeground], verb,
		total.deleting, total.changed, total.failed)
	if total.deleting > 0 {
		_, _ = fmt.Fprintf(out, "Objects being deleted keep their finalizers: the delete is theirs now. The in-tree garbage collector, once re-enabled, finishes them (or run cascade until they are gone).\n")
	}
}

// withoutOwnGroup is a discovery failure without cascade's own aggregated API, which fails
// discovery whenever cascade is scaled to zero (as uninstall asks first: its APIService has no
// endpoint then) and serves nothing that can be stamped: nil when that was the only failure.
func withoutOwnGroup(err error) error {
	var failed *discovery.ErrGroupDiscoveryFailed
	if !errors.As(err, &failed) {
		return err
	}
	others := map[schema.GroupVersion]error{}
	for gv, e := range failed.Groups {
		if gv.Group != debugGroup {
			others[gv] = e
		}
	}
	if len(others) == 0 {
		return nil
	}
	return &discovery.ErrGroupDiscoveryFailed{Groups: others}
}
