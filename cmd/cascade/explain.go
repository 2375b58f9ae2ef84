package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/gc"
)

// newExplainCommand is `cascade explain RESOURCE/NAME`: it asks a running cascade what it knows
// about one object and what it would do, and prints it. With the user's kubeconfig (kubectl's
// flags) it asks for the object's explanation in cascade's aggregated API (debug.cascade.dev,
// aggregated.go), as the kubeconfig's user: through the API server when the APIService is
// installed (opt-in: the API server authenticates the user, authorizes get on explanations
// and forwards the request to cascade), else, by default, at the same path on a pod of cascade
// through a port-forward (forward.go), where cascade authenticates the user itself and
// authorizes the same. --url asks a cascade's /debug/graph directly (a local run). --member
// names the fleet member whose object it is (fleet mode, docs/fleet.md), on every path.
func newExplainCommand() *cobra.Command {
	var (
		kf           kubeFlags
		base, format string
		cascadeNS    string
		member       string
	)
	cmd := &cobra.Command{
		Use:   "explain RESOURCE[.GROUP]/NAME [-n NAMESPACE] [--member NAME] [-o text|json|yaml|dot]",
		Short: "Ask a running cascade what it knows about one object and what it would do",
		Long: "Ask a running cascade what it knows about one object (its owners and the graph's verdict on\n" +
			"each, its dependents) and what it would do now, and why. RESOURCE is any name kubectl\n" +
			"accepts (configmap, cm, configmaps, deployment.apps), resolved with the cluster's discovery.\n" +
			"cascade is asked as the kubeconfig's user (get explanations.debug.cascade.dev in the object's\n" +
			"namespace: the ClusterRole cascade-debug-reader grants it): through the API server when\n" +
			"cascade's aggregated API is installed (opt-in, docs/security.md), else through a port-forward\n" +
			"to a pod of cascade in --cascade-namespace (list pods and create pods/portforward there: the\n" +
			"Role cascade-explain-port-forward). The namespace defaults to the context's. --url asks a\n" +
			"cascade directly instead (a local run); RESOURCE is still resolved with the kubeconfig's\n" +
			"cluster when there is one, else taken as plural[.group].\n\n" +
			"A cascade in fleet mode collects in many control planes (members): --member NAME names the\n" +
			"member whose object to explain, and is needed there. Its user must also be allowed get on\n" +
			"members.debug.cascade.dev named NAME in the kubeconfig's cluster (the host: docs/fleet.md),\n" +
			"and then sees that member's objects in every namespace. RESOURCE is resolved with the host's\n" +
			"discovery; one the host does not serve (a member's own CRD) is taken as written,\n" +
			"plural[.group], namespaced.",
		Example: "  cascade explain cm/my-config\n" +
			"  cascade explain deployment.apps/web -n shop -o yaml --context prod\n" +
			"  cascade explain cm/my-config -n default --url http://127.0.0.1:8443\n" +
			"  cascade explain deployment.apps/web -n shop --member tenant-a",
		Args: exactArgs(1, "one RESOURCE[.GROUP]/NAME"),
	}
	// --certificate-authority and --insecure-skip-tls-verify are about the server explain
	// verifies: cascade's, at an https --url, else the API server's.
	names := kubeFlagNames(true)
	names.ClusterOverrideFlags.CertificateAuthority.Description = "The CA file that verifies the server: cascade's serving certificate at an https --url (the CA of its --tls-cert-file), else the API server's, as kubectl."
	names.ClusterOverrideFlags.InsecureSkipTLSVerify.Description = "Do not verify the server's certificate: cascade's at an https --url (its self-signed one; the token is still sent, so only through a port-forward), else the API server's, as kubectl."
	kf.addNamed(cmd.Flags(), names)
	cmd.Flags().StringVar(&base, "url", "", "Ask the cascade at this address directly instead of through the API server: http://127.0.0.1:8443 for a local run (--metrics-secure=false), or https://127.0.0.1:8443 through kubectl port-forward to a secure cascade, which authorizes the kubeconfig user's bearer token (get on /debug/graph).")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "text, json, yaml or dot.")
	cmd.Flags().StringVar(&cascadeNS, "cascade-namespace", "cascade-system", "Where cascade runs: without its aggregated API, explain port-forwards to a pod of cascade there.")
	cmd.Flags().StringVar(&member, "member", "", "Fleet mode: the member (control plane) whose object to explain, by its name in the fleet (its Secret's, Cluster API cluster's or file's). Needs get on members.debug.cascade.dev named NAME in the host (docs/fleet.md).")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		resource, name, ok := strings.Cut(args[0], "/")
		if !ok || resource == "" || name == "" {
			return &usageError{err: errors.New("explain takes one RESOURCE[.GROUP]/NAME, e.g. cm/my-config, configmaps/my-config or deployment.apps/web")}
		}
		if !slices.Contains([]string{"text", "json", "yaml", "dot"}, format) {
			return &usageError{err: fmt.Errorf("invalid -o %q: text, json, yaml or dot", format)}
		}
		ctx := cmd.Context()
		if base != "" {
			return explainURL(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), &kf, base, resource, name, format, member)
		}
		cfg, err := kf.restConfig()
		if err != nil {
			return err
		}
		cfg.UserAgent = userAgent + "-explain"
		disco, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return fmt.Errorf("build discovery client: %w", err)
		}
		graphResource, namespaced, err := resolveResource(newMapper(memory.NewMemCacheClient(disco)), resource)
		if member != "" && meta.IsNoMatchError(err) {
			// The host does not serve it; the member may (its own CRD).
			graphResource, namespaced, err = resource, true, nil
			warnAsWritten(cmd.ErrOrStderr(), resource, member)
		}
		if err != nil {
			return err
		}
		ns := ""
		if namespaced {
			if ns, err = kf.contextNamespace(); err != nil {
				return err
			}
		}
		installed, err := aggregatedAPIInstalled(ctx, disco)
		if err != nil {
			return err
		}
		var (
			hc   *http.Client
			base string
		)
		if installed {
			if hc, err = rest.HTTPClientFor(cfg); err != nil {
				return fmt.Errorf("build HTTP client: %w", err)
			}
			hc.Timeout = 30 * time.Second
			server, _, err := rest.DefaultServerUrlFor(cfg)
			if err != nil {
				return fmt.Errorf("the kubeconfig's server: %w", err)
			}
			base = server.String()
		} else {
			// The default install: no APIService, a port-forward to cascade's pod.
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("build client: %w", err)
			}
			pod, port, err := pickCascadePod(ctx, kube, cascadeNS, "cascade")
			if err != nil {
				return fmt.Errorf("cascade's aggregated API %s is not installed (the default), so explain asks a pod of cascade through a port-forward: %w", debugGroup, err)
			}
			local, stop, err := forwardToPod(ctx, cfg, kube, cascadeNS, pod, port)
			if err != nil {
				return err
			}
			defer stop()
			if hc, base, err = forwardedClient(cfg, local); err != nil {
				return err
			}
		}
		return explain(ctx, cmd.OutOrStdout(), hc, aggregatedURL(base, graphResource, ns, name, format, member), format)
	}
	return cmd
}

// explainURL is explain --url: the cascade at base asked directly, about member's object
// ("": the single cluster's). The kubeconfig, when there is one, resolves resource as kubectl
// does and gives the namespace (-n, else the context's) and, at an https base, the bearer
// token; --certificate-authority and --insecure-skip-tls-verify are cascade's there, not the
// API server's.
func explainURL(ctx context.Context, out, warn io.Writer, kf *kubeFlags, base, resource, name, format, member string) error {
	caFile, insecure := kf.overrides.ClusterInfo.CertificateAuthority, kf.overrides.ClusterInfo.InsecureSkipTLSVerify
	secure := strings.HasPrefix(base, "https://")
	if secure && caFile == "" && !insecure {
		return &usageError{err: errors.New("an https --url needs --certificate-authority (the CA of cascade's --tls-cert-file) or --insecure-skip-tls-verify (its self-signed certificate)")}
	}
	api := kf.overrides
	api.ClusterInfo.CertificateAuthority, api.ClusterInfo.InsecureSkipTLSVerify = "", false
	cc, err := kf.clientConfigWith(api)
	if err != nil {
		return err
	}
	target, err := urlTarget(cc, kf.namespaceFlag(), resource, func(cfg *rest.Config) (discovery.CachedDiscoveryInterface, error) {
		d, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return memory.NewMemCacheClient(d), nil
	})
	if member != "" && meta.IsNoMatchError(err) {
		// The kubeconfig's cluster (the host) does not serve it; the member may.
		target.resource, target.namespace, err = resource, kf.namespaceFlag(), nil
		if target.namespace == "" {
			if target.namespace, _, err = cc.Namespace(); err != nil {
				return err
			}
		}
		warnAsWritten(warn, resource, member)
	}
	if err != nil {
		return err
	}
	if target.unresolved != nil {
		_, _ = fmt.Fprintf(warn, "warning: %q not resolved with the kubeconfig's cluster (%v): asking cascade for it as written, plural[.group]\n", resource, target.unresolved)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if secure {
		user, err := loadRESTConfig(cc)
		if err != nil {
			return fmt.Errorf("an https --url needs the kubeconfig user's token: %w", err)
		}
		if hc, err = cascadeClient(user, base, rest.TLSClientConfig{CAFile: caFile, Insecure: insecure}); err != nil {
			return err
		}
	}
	return explain(ctx, out, hc, debugGraphURL(base, target.resource, target.namespace, name, format, member), format)
}

// warnAsWritten says that resource, which the kubeconfig's cluster (a fleet's host) does not
// serve, is asked of member as written.
func warnAsWritten(w io.Writer, resource, member string) {
	_, _ = fmt.Fprintf(w, "warning: the kubeconfig's cluster does not serve %q: asking for member %s's as written, plural[.group], namespaced\n", resource, member)
}

// urlResolveTimeout bounds explain --url's discovery of the kubeconfig's cluster unless
// --request-timeout says otherwise: a local run's kubeconfig may name a cluster that is not
// there.
const urlResolveTimeout = 10 * time.Second

// target is the object explain --url asks about, as /debug/graph takes it.
type target struct {
	resource  string // plural[.group]
	namespace string // "" for a cluster-scoped resource
	// unresolved is why the resource was taken as written: the kubeconfig's cluster could not
	// be asked (nil: resolved, or no kubeconfig at all).
	unresolved error
}

// urlTarget resolves resource (any name kubectl takes) with the discovery of cc's cluster
// (newDisco builds it) and takes the namespace from nsFlag, else cc's context, else default.
// Without a kubeconfig the resource is taken as written; a cluster that cannot be asked leaves
// it as written too and says why (target.unresolved); a resource the cluster does not serve is
// an error, as with kubectl.
func urlTarget(cc clientcmd.ClientConfig, nsFlag, resource string, newDisco func(*rest.Config) (discovery.CachedDiscoveryInterface, error)) (target, error) {
	asWritten := target{resource: resource, namespace: nsFlag}
	if asWritten.namespace == "" {
		asWritten.namespace = metav1.NamespaceDefault
	}
	cfg, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return asWritten, nil
	}
	if err != nil {
		return target{}, fmt.Errorf("cannot load the kubeconfig: %v", err)
	}
	if ns, _, err := cc.Namespace(); err == nil {
		asWritten.namespace = ns
	}
	cfg.UserAgent = userAgent + "-explain"
	if cfg.Timeout == 0 {
		cfg.Timeout = urlResolveTimeout
	}
	disco, err := newDisco(cfg)
	if err != nil {
		return target{}, fmt.Errorf("build discovery client: %w", err)
	}
	gr, namespaced, err := resolveResource(newMapper(disco), resource)
	switch {
	case meta.IsNoMatchError(err):
		return target{}, err
	case err != nil:
		asWritten.unresolved = err
		return asWritten, nil
	}
	t := target{resource: gr, namespace: asWritten.namespace}
	if !namespaced {
		t.namespace = ""
	}
	return t, nil
}

// newMapper is kubectl's REST mapper: discovery's, with the resources' short names (cm,
// deploy) expanded.
func newMapper(disco discovery.CachedDiscoveryInterface) meta.RESTMapper {
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(disco), disco, nil)
}

// cascadeClient is the HTTP client that asks the cascade at base directly (not through the API
// server) as user, the kubeconfig's: its bearer token, token file, exec or auth plugin, and
// whatever tls adds (a client certificate, how cascade's certificate is verified).
func cascadeClient(user *rest.Config, base string, tls rest.TLSClientConfig) (*http.Client, error) {
	hc, err := rest.HTTPClientFor(&rest.Config{
		Host:            base,
		BearerToken:     user.BearerToken,
		BearerTokenFile: user.BearerTokenFile,
		ExecProvider:    user.ExecProvider,
		AuthProvider:    user.AuthProvider,
		TLSClientConfig: tls,
		UserAgent:       userAgent + "-explain",
	})
	if err != nil {
		return nil, fmt.Errorf("build HTTP client: %w", err)
	}
	hc.Timeout = 30 * time.Second
	return hc, nil
}

// resolveResource resolves a resource as kubectl accepts it (singular, plural or short name,
// with an optional .group) to what /debug/graph takes, plural[.group], and whether it is
// namespaced.
func resolveResource(mapper meta.RESTMapper, resource string) (graphResource string, namespaced bool, err error) {
	gvr, err := mapper.ResourceFor(schema.ParseGroupResource(resource).WithVersion(""))
	if err != nil {
		if meta.IsNoMatchError(err) {
			return "", false, fmt.Errorf("the server doesn't have a resource type %q: %w", resource, err)
		}
		return "", false, fmt.Errorf("cannot resolve the resource type %q with the cluster's discovery: %v", resource, err)
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return "", false, fmt.Errorf("no kind for %s: %v", gvr, err)
	}
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return "", false, fmt.Errorf("no REST mapping for %s: %v", gvk, err)
	}
	return gvr.GroupResource().String(), m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// aggregatedAPIInstalled says whether the API server has cascade's APIService: discovery of its
// group version answers anything but 404 (503 while no cascade answers: the request through the
// API server then says so, as before).
func aggregatedAPIInstalled(ctx context.Context, disco discovery.DiscoveryInterface) (bool, error) {
	err := disco.RESTClient().Get().AbsPath("/apis", debugGroup, debugVersion).Do(ctx).Error()
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsForbidden(err):
		// Registered, but its backend does not answer (or the user may not read discovery):
		// asking through the API server reports why.
		return true, nil
	}
	return false, fmt.Errorf("cannot read the API server's discovery of %s/%s: %w", debugGroup, debugVersion, err)
}

// aggregatedURL is the explanation of the object of resource (plural[.group]) named ns/name (ns
// empty: cluster-scoped) of member ("": the single cluster) in cascade's aggregated API, under
// the API server at server.
func aggregatedURL(server, resource, ns, name, format, member string) string {
	u := strings.TrimRight(server, "/") + "/apis/" + debugGroup + "/" + debugVersion + "/"
	if ns != "" {
		u += "namespaces/" + url.PathEscape(ns) + "/"
	}
	q := url.Values{"resource": {resource}}
	if format == "dot" {
		q.Set("format", "dot")
	}
	if member != "" {
		q.Set("member", member)
	}
	return u + explanationsName + "/" + url.PathEscape(name) + "?" + q.Encode()
}

// debugGraphURL is the /debug/graph question about one object (of member, when set) to the
// cascade whose metrics address is base.
func debugGraphURL(base, resource, ns, name, format, member string) string {
	q := url.Values{"resource": {resource}, "namespace": {ns}, "name": {name}}
	if format == "dot" {
		q.Set("format", "dot")
	}
	if member != "" {
		q.Set("member", member)
	}
	return strings.TrimRight(base, "/") + "/debug/graph?" + q.Encode()
}

// explain asks for the explanation at u and prints it in format.
func explain(ctx context.Context, out io.Writer, c *http.Client, u, format string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach cascade: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return answerError(resp, body)
	}
	switch format {
	case "json", "dot":
		_, err = out.Write(body)
		return err
	case "yaml":
		y, err := yaml.JSONToYAML(body)
		if err != nil {
			return fmt.Errorf("unreadable answer from %s: %v", u, err)
		}
		_, err = out.Write(y)
		return err
	}
	var e gc.Explanation
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Errorf("unreadable answer from %s: %v", u, err)
	}
	_, err = io.WriteString(out, explainText(e))
	return err
}

func objectName(o gc.ExplainedObject) string {
	if o.Namespace == "" {
		return fmt.Sprintf("%s %s (%s)", o.Kind, o.Name, o.UID)
	}
	return fmt.Sprintf("%s %s/%s (%s)", o.Kind, o.Namespace, o.Name, o.UID)
}

// escapeTerminal writes the control characters of s (C0, DEL, C1: a terminal's escape
// sequences, carriage returns and newlines that would fake lines of the output) as Go escapes
// (\x1b, \n, \u0085), as kubectl escapes what it prints since CVE-2021-25743: names, kinds
// and finalizers are the cluster's tenants' strings.
func escapeTerminal(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// escapedExplanation is e with every string a tenant can set escaped (escapeTerminal).
func escapedExplanation(e gc.Explanation) gc.Explanation {
	obj := func(o *gc.ExplainedObject) {
		o.APIVersion, o.Kind, o.Namespace, o.Name = escapeTerminal(o.APIVersion), escapeTerminal(o.Kind), escapeTerminal(o.Namespace), escapeTerminal(o.Name)
		o.UID = types.UID(escapeTerminal(string(o.UID)))
	}
	list := func(in []string) []string {
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = escapeTerminal(s)
		}
		return out
	}
	obj(&e.Object)
	e.Resource, e.Finalizers = escapeTerminal(e.Resource), list(e.Finalizers)
	e.Owners = slices.Clone(e.Owners)
	for i := range e.Owners {
		obj(&e.Owners[i].ExplainedObject)
		e.Owners[i].Finalizers = list(e.Owners[i].Finalizers)
	}
	e.Dependents = slices.Clone(e.Dependents)
	for i := range e.Dependents {
		obj(&e.Dependents[i].ExplainedObject)
		e.Dependents[i].Finalizers = list(e.Dependents[i].Finalizers)
	}
	if e.Decision != nil {
		d := *e.Decision
		d.Reason, d.Error = escapeTerminal(d.Reason), escapeTerminal(d.Error)
		e.Decision = &d
	}
	return e
}

// explainText is the human form of an explanation, tenants' strings escaped.
func explainText(e gc.Explanation) string {
	e = escapedExplanation(e)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", objectName(e.Object), e.State)
	if e.Resource != "" {
		fmt.Fprintf(&b, ", resource %s", e.Resource)
	}
	if e.Unsynced {
		b.WriteString(" (NOT SYNCED: cascade cannot list or watch it)")
	}
	if e.Deleting {
		fmt.Fprintf(&b, ", being deleted, GC finalizers %v", e.Finalizers)
	}
	b.WriteString("\n")
	if len(e.Owners) == 0 {
		b.WriteString("Owners: none\n")
	} else {
		b.WriteString("Owners:\n")
		for _, o := range e.Owners {
			flags := ""
			if o.BlockOwnerDeletion {
				flags = " [blockOwnerDeletion]"
			}
			fin := ""
			if len(o.Finalizers) > 0 {
				fin = fmt.Sprintf(" finalizers %v", o.Finalizers)
			}
			fmt.Fprintf(&b, "  %s %s/%s (%s)%s: %s%s — %s\n", o.APIVersion, o.Kind, o.Name, o.UID, flags, o.State, fin, o.Meaning)
		}
	}
	decision := "Decision now"
	if e.Mode == gc.ModeCompanion {
		b.WriteString("Mode: companion: kube-controller-manager's garbage collector acts; cascade deletes nothing and removes no reference or GC finalizer\n")
		decision = "What the in-tree collector would decide now (cascade's reading of its rules; the policy's collect rules do not apply)"
	}
	if d := e.Decision; d != nil && d.Error != "" {
		fmt.Fprintf(&b, "%s: none, retried: %s\n", decision, d.Error)
	} else if d != nil {
		fmt.Fprintf(&b, "%s: %s (%s)", decision, d.Action, d.Reason)
		if d.Propagation != "" {
			fmt.Fprintf(&b, ", propagation %s", d.Propagation)
		}
		if len(d.Owners) > 0 {
			fmt.Fprintf(&b, ", references to %v", d.Owners)
		}
		if len(d.Unmapped) > 0 {
			fmt.Fprintf(&b, ", references to %v kept (no REST mapping)", d.Unmapped)
		}
		b.WriteString("\n")
	}
	if e.OtherNamespaceDependents > 0 {
		fmt.Fprintf(&b, "Dependents in other namespaces: %d (not shown: you are authorized in %s only)\n", e.OtherNamespaceDependents, e.Object.Namespace)
	}
	if len(e.Dependents) > 0 {
		fmt.Fprintf(&b, "Dependents: %d, %d blocking its foreground deletion\n", len(e.Dependents), e.BlockingDependents)
		for _, d := range e.Dependents {
			fmt.Fprintf(&b, "  %s", objectName(d.ExplainedObject))
			if d.Blocking {
				b.WriteString(" blocking")
			}
			if d.Deleting {
				fmt.Fprintf(&b, ", being deleted, held by finalizers %v", d.Finalizers)
			} else if len(d.Finalizers) > 0 {
				fmt.Fprintf(&b, ", finalizers %v", d.Finalizers)
			}
			if d.Unsynced {
				b.WriteString(", its resource is NOT SYNCED")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// answerError says why the answer is not an explanation: the message of an API Status (the
// API server's 403, cascade's 404), else the body, with a hint where the API server answered
// for a cascade it cannot reach or does not know.
func answerError(resp *http.Response, body []byte) error {
	msg := strings.TrimSpace(string(body))
	var st metav1.Status
	isStatus := json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Message != ""
	if isStatus {
		msg = st.Message
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(resp.Request.URL.Path, "/apis/"+debugGroup+"/"):
		msg += " (the API server cannot reach cascade: kubectl get apiservice " + debugVersion + "." + debugGroup + " says why)"
	case resp.StatusCode == http.StatusNotFound && !isStatus && strings.Contains(resp.Request.URL.Path, "/apis/"+debugGroup+"/"):
		msg += " (the API server does not serve " + debugGroup + ": is deploy/base's APIService " + debugVersion + "." + debugGroup + " installed? --url asks a cascade directly)"
	}
	return fmt.Errorf("%s: %s", resp.Status, msg)
}
