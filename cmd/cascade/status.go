package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/policy/watch"
)

// The status the leader publishes on its leader-election Lease (internal/leader: Options.Status),
// set by each renewal and removed when it releases the Lease; `cascade status` reads it. It is
// what the leader already knows, no newer than its last renewal, and readable by whoever may get
// the Lease (deploy/base's Role cascade-explain-port-forward), without a port-forward.
const (
	// annotationVersion is the leader's version (cascade --version's).
	annotationVersion = "cascade.dev/version"
	// annotationMode is its --mode: collector or companion (a --dry-run cascade takes no Lease).
	annotationMode = "cascade.dev/mode"
	// annotationPolicyGeneration is cascade_policy_generation: policies put in force since it
	// started (0: the built-in one at start).
	annotationPolicyGeneration = "cascade.dev/policy-generation"
	// annotationPolicySource is where the policy in force comes from (policy/watch: Source).
	annotationPolicySource = "cascade.dev/policy-source"
	// annotationSynced is "true" once the dependency graph counts as synced (as /readyz).
	annotationSynced = "cascade.dev/synced"
	// annotationUnsynced names the watched resources whose view is incomplete (plural.group,
	// comma-separated, at most maxUnsyncedNamed, then "+N" for the others); "" when none (every
	// key is always written, so that a renewal replaces what the one before said).
	annotationUnsynced = "cascade.dev/unsynced-resources"
	// annotationFeatureLevels is the feature levels in use, as /readyz says them:
	// "admission_policy=v1 list=watch_list".
	annotationFeatureLevels = "cascade.dev/feature-levels"
)

// maxUnsyncedNamed bounds the resources annotationUnsynced names.
const maxUnsyncedNamed = 20

// defaultLease is the name of cascade's leader-election Lease (--leader-elect-resource-name's
// default) and installNamespace the namespace of deploy/base and of the chart's examples.
const (
	defaultLease     = "cascade"
	installNamespace = "cascade-system"
)

// parseLease reads status's --lease, [NAMESPACE/]NAME, with -n (nsFlag, "": not given) as the
// namespace when it names none; a different one in --lease is a usage error. namespace ""
// means neither names one.
func parseLease(lease, nsFlag string) (namespace, name string, err error) {
	if !strings.Contains(lease, "/") {
		if msgs := validation.IsDNS1123Subdomain(lease); len(msgs) > 0 {
			return "", "", &usageError{err: fmt.Errorf("invalid --lease=%s: %s", lease, strings.Join(msgs, "; "))}
		}
		return nsFlag, lease, nil
	}
	if namespace, name, err = watch.ParseName(lease); err != nil {
		return "", "", &usageError{err: fmt.Errorf("invalid --lease=%s: %v", lease, err)}
	}
	if nsFlag != "" && nsFlag != namespace {
		return "", "", &usageError{err: fmt.Errorf("-n %s and --lease=%s name two namespaces: give one", nsFlag, lease)}
	}
	return namespace, name, nil
}

// leaderStatus is the status a leader publishes on its Lease (the annotations above), built
// from what it knows at each renewal: the mode, the policy in force (nil: no
// --policy-configmap), the collector's sync and the feature levels.
func leaderStatus(mode string, policySource func() (int, string), synced func() bool, unsynced func() []gc.Unsynced, features func() string) func() map[string]string {
	return func() map[string]string {
		gen, src := 0, "built-in: no --policy-configmap"
		if policySource != nil {
			gen, src = policySource()
		}
		s := map[string]string{
			annotationVersion:          version,
			annotationMode:             mode,
			annotationPolicyGeneration: strconv.Itoa(gen),
			annotationPolicySource:     src,
			annotationSynced:           strconv.FormatBool(synced()),
			annotationFeatureLevels:    features(),
		}
		var names []string
		for _, u := range unsynced() {
			names = append(names, u.Resource.GVR.GroupResource().String())
		}
		if len(names) > maxUnsyncedNamed {
			names = append(names[:maxUnsyncedNamed], "+"+strconv.Itoa(len(names)-maxUnsyncedNamed))
		}
		s[annotationUnsynced] = strings.Join(names, ",")
		return s
	}
}

// newStatusCommand is `cascade status`: what the leader publishes on its Lease.
func newStatusCommand() *cobra.Command {
	var (
		kf     kubeFlags
		lease  string
		format string
	)
	cmd := &cobra.Command{
		Use:   "status [-n NAMESPACE] [--lease [NAMESPACE/]NAME] [-o text|json|yaml]",
		Short: "Print the leader, mode, policy in force, sync state and feature levels of a running cascade",
		Long: "Print what the cascade that leads publishes on its leader-election Lease, read from the cluster\n" +
			"with your kubeconfig (get on the Lease: the Role cascade-explain-port-forward grants it): the\n" +
			"leader (the Lease's holder and when it renewed it), its version and mode, the policy in\n" +
			"force (its generation and where it comes from), whether its graph is synced (and the\n" +
			"resources that are not), and the feature levels it uses. The leader updates it with each\n" +
			"renewal of the Lease. A cascade without leader election (--leader-elect=false, as --dry-run\n" +
			"must run) has no Lease, and status says so: ask its /readyz and metrics then. -o json|yaml\n" +
			"prints one document (docs/cli.md).",
		Example: "  cascade status\n  kubectl cascade status -n gc -o json",
		Args:    noArgs,
	}
	names := kubeFlagNames(true)
	names.ContextOverrideFlags.Namespace.Description = "The namespace cascade runs in, where its Lease is. Default (not the context's): cascade-system, else the one namespace that has a Lease of that name."
	kf.addNamed(cmd.Flags(), names)
	cmd.Flags().StringVar(&lease, "lease", defaultLease, "The Lease of cascade's leader election (--leader-elect-resource-name), NAME or NAMESPACE/NAME; without a namespace (nor -n): in cascade-system, else in the one namespace that has a Lease of that name.")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "text, json or yaml.")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !slices.Contains(outputFormats, format) {
			return &usageError{err: fmt.Errorf("invalid -o %q: text, json or yaml", format)}
		}
		if lease == "" {
			return &usageError{err: fmt.Errorf("--lease is empty: status reads cascade's Lease, [NAMESPACE/]NAME")}
		}
		ns, name, err := parseLease(lease, kf.namespaceFlag())
		if err != nil {
			return err
		}
		cfg, err := kf.restConfig()
		if err != nil {
			return err
		}
		cfg.UserAgent = userAgent + "-status"
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("build client: %w", err)
		}
		s, err := findStatus(cmd.Context(), kube, ns, name, time.Now())
		if err != nil {
			return err
		}
		return printResult(cmd.OutOrStdout(), format, s, s.text)
	}
	return cmd
}

// cascadeStatus is what `cascade status` prints: -o json|yaml prints it as it is (docs/cli.md).
type cascadeStatus struct {
	Lease leaseStatus `json:"lease"`
	// Leader is the holder's status; nil when there is no Lease or nobody holds it.
	Leader *leaderInfo `json:"leader"`
	now    time.Time   // when the Lease was read
}

// leaseStatus is the Lease itself.
type leaseStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Found: the Lease exists. Without one, cascade runs without leader election, elsewhere, or
	// not at all.
	Found bool `json:"found"`
	// Elsewhere, when not found in cascade-system with no namespace named, says whether other
	// namespaces were looked in.
	Elsewhere string `json:"elsewhere,omitempty"`
	// Holder is the holder's identity (its pod name, "_" and a suffix); "" when released.
	Holder               string     `json:"holder"`
	RenewTime            *time.Time `json:"renewTime"`
	LeaseDurationSeconds int32      `json:"leaseDurationSeconds"`
	Transitions          int32      `json:"transitions"`
	// Expired: not renewed within its duration: no replica leads now (what Leader says is what
	// the last one published).
	Expired bool `json:"expired"`
}

// leaderInfo is what the holder published (the cascade.dev/ annotations of the Lease).
type leaderInfo struct {
	Pod string `json:"pod"`
	// Published: the holder publishes a status (false: a cascade older than this command).
	Published         bool              `json:"published"`
	Version           string            `json:"version"`
	Mode              string            `json:"mode"`
	Policy            policyInForce     `json:"policy"`
	Synced            bool              `json:"synced"`
	UnsyncedResources []string          `json:"unsyncedResources"`
	UnsyncedMore      int               `json:"unsyncedMore"` // unsynced resources past those named
	FeatureLevels     map[string]string `json:"featureLevels"`
}

type policyInForce struct {
	Generation int    `json:"generation"`
	Source     string `json:"source"`
}

// findStatus is readStatus of the Lease name in ns or, when ns is "", in installNamespace, else
// in the one namespace that has a Lease of that name (listed across namespaces, where the user
// may; several are an error that names them).
func findStatus(ctx context.Context, kube kubernetes.Interface, ns, name string, now time.Time) (cascadeStatus, error) {
	if ns != "" {
		return readStatus(ctx, kube, ns, name, now)
	}
	s, err := readStatus(ctx, kube, installNamespace, name, now)
	if err != nil || s.Lease.Found {
		return s, err
	}
	l, err := kube.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		s.Lease.Elsewhere = fmt.Sprintf("cannot list the Leases of other namespaces (%v): name cascade's with -n", err)
		return s, nil
	}
	var found []string
	for _, x := range l.Items {
		if x.Name == name {
			found = append(found, x.Namespace)
		}
	}
	switch len(found) {
	case 0:
		s.Lease.Elsewhere = "none in any other namespace either"
		return s, nil
	case 1:
		return readStatus(ctx, kube, found[0], name, now)
	}
	slices.Sort(found)
	return s, &usageError{err: fmt.Errorf("Leases %s in namespaces %s: name cascade's with -n", name, strings.Join(found, ", "))}
}

// readStatus reads the Lease ns/name and what its holder published, at now.
func readStatus(ctx context.Context, kube kubernetes.Interface, ns, name string, now time.Time) (cascadeStatus, error) {
	s := cascadeStatus{Lease: leaseStatus{Namespace: ns, Name: name}, now: now}
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return s, nil
	case apierrors.IsForbidden(err):
		return s, fmt.Errorf("cannot read cascade's Lease %s/%s: %w (status needs get on it: the Role cascade-explain-port-forward in %s grants it)", ns, name, err, ns)
	case err != nil:
		return s, fmt.Errorf("cannot read cascade's Lease %s/%s: %w", ns, name, err)
	}
	s.Lease.Found = true
	s.Leader = leaseLeader(l, &s.Lease, now)
	return s, nil
}

// leaseLeader fills ls from l and returns what its holder published (nil: no holder).
func leaseLeader(l *coordinationv1.Lease, ls *leaseStatus, now time.Time) *leaderInfo {
	spec := l.Spec
	if spec.HolderIdentity != nil {
		ls.Holder = *spec.HolderIdentity
	}
	if spec.LeaseDurationSeconds != nil {
		ls.LeaseDurationSeconds = *spec.LeaseDurationSeconds
	}
	if spec.LeaseTransitions != nil {
		ls.Transitions = *spec.LeaseTransitions
	}
	if spec.RenewTime != nil {
		t := spec.RenewTime.UTC()
		ls.RenewTime = &t
	}
	ls.Expired = ls.RenewTime == nil || now.Sub(*ls.RenewTime) >= time.Duration(ls.LeaseDurationSeconds)*time.Second
	if ls.Holder == "" {
		return nil
	}
	pod, _, _ := strings.Cut(ls.Holder, "_")
	a := l.Annotations
	li := &leaderInfo{Pod: pod, UnsyncedResources: []string{}, FeatureLevels: map[string]string{}}
	if _, ok := a[annotationMode]; !ok {
		return li
	}
	li.Published = true
	li.Version, li.Mode = a[annotationVersion], a[annotationMode]
	li.Policy.Generation, _ = strconv.Atoi(a[annotationPolicyGeneration])
	li.Policy.Source = a[annotationPolicySource]
	li.Synced = a[annotationSynced] == "true"
	if u := a[annotationUnsynced]; u != "" {
		for _, r := range strings.Split(u, ",") {
			if more, ok := strings.CutPrefix(r, "+"); ok {
				li.UnsyncedMore, _ = strconv.Atoi(more)
				continue
			}
			li.UnsyncedResources = append(li.UnsyncedResources, r)
		}
	}
	for _, f := range strings.Fields(a[annotationFeatureLevels]) {
		if k, v, ok := strings.Cut(f, "="); ok {
			li.FeatureLevels[k] = v
		}
	}
	return li
}

// text is the status as `cascade status` prints it by default, names escaped as explain's.
func (s cascadeStatus) text() string {
	var b strings.Builder
	l := s.Lease
	lease := l.Namespace + "/" + l.Name
	row := func(k, format string, args ...any) {
		fmt.Fprintf(&b, "%-10s %s\n", k+":", escapeTerminal(fmt.Sprintf(format, args...)))
	}
	ago := func() string {
		if l.RenewTime == nil {
			return "never renewed"
		}
		return "renewed " + s.now.Sub(*l.RenewTime).Round(time.Second).String() + " ago (" + l.RenewTime.Format(time.RFC3339) + ")"
	}
	switch {
	case !l.Found:
		if l.Elsewhere != "" {
			row("Lease", "%s: not found (no Lease); %s", lease, l.Elsewhere)
		} else {
			row("Lease", "%s: not found (no Lease)", lease)
		}
		b.WriteString("cascade publishes its status on its leader-election Lease, and there is none: cascade runs\n" +
			"without leader election (--leader-elect=false; --dry-run always), in another namespace (-n,\n" +
			"--lease), or not at all. Its /readyz and metrics say the rest.\n")
		return b.String()
	case s.Leader == nil:
		row("Lease", "%s: held by nobody (released; %s): no cascade leads", lease, ago())
		return b.String()
	case l.Expired:
		row("Lease", "%s: expired: last held by %s, %s, lease %ds: no cascade leads now; what it last published:", lease, s.Leader.Pod, ago(), l.LeaseDurationSeconds)
	default:
		row("Leader", "%s (identity %s), %s, lease %ds, %d transitions", s.Leader.Pod, l.Holder, ago(), l.LeaseDurationSeconds, l.Transitions)
		row("Lease", "%s", lease)
	}
	li := s.Leader
	if !li.Published {
		b.WriteString("The leader publishes no status on its Lease (a cascade older than this command).\n")
		return b.String()
	}
	row("Version", "%s", li.Version)
	row("Mode", "%s", li.Mode)
	row("Policy", "generation %d, %s", li.Policy.Generation, li.Policy.Source)
	sync := "synced"
	if !li.Synced {
		sync = "not synced yet (the graph waits for its initial lists, at most --sync-timeout)"
	}
	if n := len(li.UnsyncedResources) + li.UnsyncedMore; n > 0 {
		names := strings.Join(li.UnsyncedResources, ", ")
		if li.UnsyncedMore > 0 {
			names += fmt.Sprintf(" and %d more", li.UnsyncedMore)
		}
		sync += fmt.Sprintf("; %d resources unsynced, decisions that need them wait: %s", n, names)
	}
	row("Sync", "%s", sync)
	levels := make([]string, 0, len(li.FeatureLevels))
	for _, k := range slices.Sorted(maps.Keys(li.FeatureLevels)) {
		levels = append(levels, k+"="+li.FeatureLevels[k])
	}
	row("Features", "%s", strings.Join(levels, " "))
	return b.String()
}
