package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/policy"
	"github.com/cascade-gc/cascade/policy/watch"
)

// newPolicyCommand is `cascade policy validate|render -f FILE`.
func newPolicyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check a policy document, or show the admission objects it makes",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return &usageError{err: errors.New("policy takes a command: validate or render"), cmd: cmd}
		},
	}
	var (
		kf      kubeFlags
		offline bool
		vformat string
	)
	validate := &cobra.Command{
		Use:   "validate -f FILE [-o text|json|yaml] [--kubeconfig PATH] [--context NAME]",
		Short: "Decode a policy strictly and print every error, warning and note",
		Long: "Decode FILE strictly and validate it; print every error, warning and note; exit 1 on\n" +
			"errors. FILE is a policy document (apiVersion: cascade.dev/v1alpha1, kind: Policy) or a\n" +
			"ConfigMap manifest holding one under data.policy.yaml; \"-\" reads stdin. When the command\n" +
			"line names a cluster (--kubeconfig, --context, --server, ...) or $KUBECONFIG is set, the\n" +
			"resources the policy names are checked against that cluster's discovery, and rules for\n" +
			"resources it does not serve are warned about (--offline: never; ~/.kube/config alone is not\n" +
			"read). With --mode=companion, the rules cascade does not enforce in that mode (collect) are\n" +
			"warned about; warnings never change the exit status. -o json|yaml prints the findings as\n" +
			"one document (docs/cli.md).",
		Args: noArgs,
	}
	vfile := validate.Flags().StringP("filename", "f", "", `The policy document or ConfigMap manifest ("-": stdin).`)
	kf.add(validate.Flags(), false)
	validate.Flags().BoolVar(&offline, "offline", false, "Never read a cluster, even with $KUBECONFIG set or a kubeconfig flag given.")
	validate.Flags().StringVarP(&vformat, "output", "o", "text", "text, json or yaml.")
	mode := validate.Flags().String("mode", client.ModeCollector, "The --mode cascade runs the policy in: collector, or companion (warns about the rules it does not enforce there).")
	ignored := validate.Flags().StringSlice("ignored-resources", NewOptions().IgnoredResources, "The --ignored-resources cascade runs with: a defaultPropagation rule for one of them is an error (cascade never watches them, so it could not finish the deletes its stamps hold).")
	validate.RunE = func(cmd *cobra.Command, _ []string) error {
		if *mode != client.ModeCollector && *mode != client.ModeCompanion {
			return &usageError{err: fmt.Errorf("--mode is %s or %s, not %q", client.ModeCollector, client.ModeCompanion, *mode), cmd: cmd}
		}
		if !slices.Contains(outputFormats, vformat) {
			return &usageError{err: fmt.Errorf("invalid -o %q: text, json or yaml", vformat)}
		}
		var unwatched []policy.GroupResource
		for _, r := range *ignored {
			gr, err := policy.ParseGroupResource(r)
			if err != nil {
				return &usageError{err: fmt.Errorf("invalid --ignored-resources %q: %v", r, err), cmd: cmd}
			}
			unwatched = append(unwatched, gr)
		}
		doc, from, err := readPolicy(*vfile, cmd.CommandPath())
		if err != nil {
			return err
		}
		var (
			served  policy.Served
			cluster string
		)
		if !offline && (kf.given() || os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "") {
			cfg, err := kf.restConfig()
			if err != nil {
				return fmt.Errorf("%w (--offline checks the policy without a cluster)", err)
			}
			cfg.UserAgent = userAgent + "-policy"
			disco, err := discovery.NewDiscoveryClientForConfig(cfg)
			if err != nil {
				return fmt.Errorf("build discovery client: %w", err)
			}
			if served, err = watch.ServedBy(disco)(cmd.Context()); err != nil {
				return fmt.Errorf("cannot list the resources %s serves: %v (--offline checks the policy without a cluster)", cfg.Host, err)
			}
			cluster = cfg.Host
		}
		v := checkPolicy(from, doc, served, cluster, *mode, unwatched)
		if err := printResult(cmd.OutOrStdout(), vformat, v, v.text); err != nil {
			return err
		}
		if !v.Valid {
			return fmt.Errorf("%s: %d errors", from, len(v.Errors))
		}
		return nil
	}
	render := &cobra.Command{
		Use:   "render -f FILE",
		Short: "Print the admission objects cascade keeps for a policy's defaultPropagation rules",
		Long: "Print, as YAML, the MutatingAdmissionPolicy and binding cascade would keep in the\n" +
			"cluster for FILE's defaultPropagation rules (they stamp the default's finalizer on\n" +
			"objects as they are created). FILE must be valid.",
		Args: noArgs,
	}
	rfile := render.Flags().StringP("filename", "f", "", `The policy document or ConfigMap manifest ("-": stdin).`)
	render.RunE = func(cmd *cobra.Command, _ []string) error {
		doc, from, err := readPolicy(*rfile, cmd.CommandPath())
		if err != nil {
			return err
		}
		return renderPolicy(cmd.OutOrStdout(), from, doc)
	}
	for _, c := range []*cobra.Command{validate, render} {
		_ = c.MarkFlagFilename("filename", "yaml", "yml", "json")
	}
	cmd.AddCommand(validate, render)
	return cmd
}

// readPolicy reads the policy document file names (-f; "-": stdin). from names where it came
// from.
func readPolicy(file, command string) (doc []byte, from string, err error) {
	if file == "" {
		return nil, "", &usageError{err: fmt.Errorf("%s takes -f FILE", command)}
	}
	var data []byte
	if file == "-" {
		data, err = io.ReadAll(io.LimitReader(os.Stdin, 2*policy.MaxDocumentSize))
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, "", fmt.Errorf("cannot read the policy: %v", err)
	}
	doc, from, err = policyDocument(data)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", file, err)
	}
	return doc, file + from, nil
}

// renderPolicy prints the admission objects of a valid policy's defaultPropagation rules.
func renderPolicy(out io.Writer, name string, doc []byte) error {
	c, _, errs := policy.Parse(doc)
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return fmt.Errorf("%s: %d errors (see cascade policy validate): %s", name, len(errs), strings.Join(msgs, "; "))
	}
	p, b := c.Admission()
	if p == nil {
		_, err := fmt.Fprintf(out, "# %s: no defaultPropagation rule of Orphan or Foreground, so no admission objects: cascade deletes its %s if they exist\n",
			name, policy.AdmissionName)
		return err
	}
	var buf strings.Builder
	fmt.Fprintf(&buf, "# The admission objects cascade keeps in the cluster for %s (server-side apply, field manager cascade).\n", name)
	for _, obj := range []any{p, b} {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	_, err := io.WriteString(out, buf.String())
	return err
}

// policyDocument returns the policy document in data: data itself, or the policy.yaml of a
// ConfigMap manifest (from says so).
func policyDocument(data []byte) (doc []byte, from string, err error) {
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if yaml.Unmarshal(data, &head) != nil || head.Kind != "ConfigMap" {
		return data, "", nil
	}
	d, ok := head.Data[policy.ConfigMapKey]
	if !ok {
		return nil, "", fmt.Errorf("ConfigMap %s has no data.%s", head.Metadata.Name, policy.ConfigMapKey)
	}
	return []byte(d), " (ConfigMap " + head.Metadata.Name + ", data." + policy.ConfigMapKey + ")", nil
}

// policyValidation is what `cascade policy validate` found, the document -o json and -o yaml
// print (docs/cli.md): every field is always there (empty lists as []).
type policyValidation struct {
	// File is where the document came from: FILE, and the ConfigMap it was read from.
	File string `json:"file"`
	// Valid: no error (warnings and notes aside).
	Valid bool `json:"valid"`
	// Rules and IgnoredResources count the valid policy's (0 when it is not valid).
	Rules            int `json:"rules"`
	IgnoredResources int `json:"ignoredResources"`
	// Mode is the --mode the policy was checked for.
	Mode string `json:"mode"`
	// Cluster is the API server whose discovery the resources were checked against; "" when
	// they were not.
	Cluster  string    `json:"cluster"`
	Errors   []finding `json:"errors"`
	Warnings []finding `json:"warnings"`
	// DefaultPropagations are the valid policy's defaultPropagation rules, what each does.
	DefaultPropagations []defaultPropagationNote `json:"defaultPropagations"`
}

// finding is one error or warning: field.Error's parts, and the line the text output prints.
type finding struct {
	Field   string `json:"field"`
	Type    string `json:"type"` // field.ErrorType: FieldValueInvalid, FieldValueRequired, ...
	Detail  string `json:"detail"`
	Message string `json:"message"`
}

// defaultPropagationNote is one defaultPropagation rule of a valid policy.
type defaultPropagationNote struct {
	Rule              string `json:"rule"` // rules[N]
	Resource          string `json:"resource"`
	Propagation       string `json:"propagation"`
	NamespaceSelector string `json:"namespaceSelector"` // "" for every namespace
	// Finalizer is the finalizer cascade stamps for it ("" for Background, which needs none).
	Finalizer string `json:"finalizer"`
}

func findings(errs field.ErrorList) []finding {
	out := make([]finding, 0, len(errs))
	for _, e := range errs {
		out = append(out, finding{Field: e.Field, Type: string(e.Type), Detail: e.Detail, Message: e.Error()})
	}
	return out
}

// checkPolicy finds every error and warning in doc, read from name: checked against served
// (cluster's, "" when not checked), for mode, with the resources cascade does not watch.
func checkPolicy(name string, doc []byte, served policy.Served, cluster, mode string, unwatched []policy.GroupResource) policyValidation {
	c, p, errs := policy.Parse(doc)
	errs = append(errs, policy.CheckUnwatched(p, unwatched)...)
	var warns field.ErrorList
	if p != nil {
		warns = append(warns, policy.Warnings(p, served)...)
		if mode == client.ModeCompanion {
			warns = append(warns, policy.CompanionUnenforced(p)...)
		}
	}
	v := policyValidation{
		File: name, Valid: len(errs) == 0, Mode: mode, Cluster: cluster,
		Errors: findings(errs), Warnings: findings(warns), DefaultPropagations: []defaultPropagationNote{},
	}
	if c != nil && v.Valid {
		v.Rules, v.IgnoredResources = c.Rules(), len(c.Ignored())
		for _, d := range c.DefaultPropagations() {
			v.DefaultPropagations = append(v.DefaultPropagations, defaultPropagationNote{
				Rule: d.Rule, Resource: d.Resource.String(), Propagation: string(d.Propagation),
				NamespaceSelector: d.NamespaceSelector, Finalizer: policy.StampFinalizer(d.Propagation),
			})
		}
	}
	return v
}

// text is the findings as `cascade policy validate` prints them by default: one line each.
func (v policyValidation) text() string {
	var b strings.Builder
	for _, e := range v.Errors {
		fmt.Fprintf(&b, "error: %s\n", e.Message)
	}
	for _, w := range v.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w.Message)
	}
	if !v.Valid {
		return b.String()
	}
	for _, d := range v.DefaultPropagations {
		where := ""
		if d.NamespaceSelector != "" {
			where = " in namespaces " + d.NamespaceSelector
		}
		what := "objects get the " + d.Finalizer + " finalizer at creation (admission) and, for those that existed before, from cascade's pass"
		if d.Finalizer == "" {
			what = "Background needs no finalizer (kube-apiserver's default for this resource); the rule keeps later rules from applying to the objects it selects"
		}
		fmt.Fprintf(&b, "note: %s: defaultPropagation %s for %s%s applies to deletes that name no propagation policy: %s (see cascade policy render)\n",
			d.Rule, d.Propagation, d.Resource, where, what)
	}
	if v.Cluster == "" {
		b.WriteString("note: resources not checked against a cluster (name one: --kubeconfig, --context or $KUBECONFIG)\n")
	}
	fmt.Fprintf(&b, "%s: valid: %d rules, %d ignored resources\n", v.File, v.Rules, v.IgnoredResources)
	return b.String()
}
