package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
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
	validate := &cobra.Command{
		Use:   "validate -f FILE [--kubeconfig PATH]",
		Short: "Decode a policy strictly and print every error, warning and note",
		Long: "Decode FILE strictly and validate it; print every error, warning and note; exit 1 on\n" +
			"errors. FILE is a policy document (apiVersion: cascade.dev/v1alpha1, kind: Policy) or a\n" +
			"ConfigMap manifest holding one under data.policy.yaml; \"-\" reads stdin. With\n" +
			"--kubeconfig, rules for resources the cluster does not serve are warned about. With\n" +
			"--mode=companion, the rules cascade does not enforce in that mode (collect) are warned\n" +
			"about; warnings never change the exit status.",
		Args: noArgs,
	}
	vfile := validate.Flags().StringP("filename", "f", "", `The policy document or ConfigMap manifest ("-": stdin).`)
	kubeconfig := validate.Flags().String("kubeconfig", "", "Check the resources the policy names against this cluster (optional).")
	mode := validate.Flags().String("mode", client.ModeCollector, "The --mode cascade runs the policy in: collector, or companion (warns about the rules it does not enforce there).")
	ignored := validate.Flags().StringSlice("ignored-resources", NewOptions().IgnoredResources, "The --ignored-resources cascade runs with: a defaultPropagation rule for one of them is an error (cascade never watches them, so it could not finish the deletes its stamps hold).")
	validate.RunE = func(cmd *cobra.Command, _ []string) error {
		if *mode != client.ModeCollector && *mode != client.ModeCompanion {
			return &usageError{err: fmt.Errorf("--mode is %s or %s, not %q", client.ModeCollector, client.ModeCompanion, *mode), cmd: cmd}
		}
		doc, from, err := readPolicy(*vfile, cmd.CommandPath())
		if err != nil {
			return err
		}
		var served policy.Served
		if *kubeconfig != "" {
			opts := NewOptions()
			opts.Kubeconfig = *kubeconfig
			cfg, err := restConfig(opts)
			if err != nil {
				return err
			}
			disco, err := discovery.NewDiscoveryClientForConfig(cfg)
			if err != nil {
				return fmt.Errorf("build discovery client: %w", err)
			}
			if served, err = watch.ServedBy(disco)(context.Background()); err != nil {
				return fmt.Errorf("cannot list the resources %s serves: %v", cfg.Host, err)
			}
		}
		var unwatched []policy.GroupResource
		for _, r := range *ignored {
			gr, err := policy.ParseGroupResource(r)
			if err != nil {
				return &usageError{err: fmt.Errorf("invalid --ignored-resources %q: %v", r, err), cmd: cmd}
			}
			unwatched = append(unwatched, gr)
		}
		return validatePolicy(cmd.OutOrStdout(), from, doc, served, *mode, unwatched)
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

// validatePolicy prints every finding about doc and returns an error when there are errors.
func validatePolicy(out io.Writer, name string, doc []byte, served policy.Served, mode string, unwatched []policy.GroupResource) error {
	c, p, errs := policy.Parse(doc)
	errs = append(errs, policy.CheckUnwatched(p, unwatched)...)
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "error: %s\n", e.Error())
	}
	if p != nil {
		for _, w := range policy.Warnings(p, served) {
			fmt.Fprintf(&b, "warning: %s\n", w.Error())
		}
		if mode == client.ModeCompanion {
			for _, w := range policy.CompanionUnenforced(p) {
				fmt.Fprintf(&b, "warning: %s\n", w.Error())
			}
		}
	}
	if c != nil {
		for _, d := range c.DefaultPropagations() {
			where := ""
			if d.NamespaceSelector != "" {
				where = " in namespaces " + d.NamespaceSelector
			}
			what := "objects get the " + policy.StampFinalizer(d.Propagation) + " finalizer at creation (admission) and, for those that existed before, from cascade's pass"
			if policy.StampFinalizer(d.Propagation) == "" {
				what = "Background needs no finalizer (kube-apiserver's default for this resource); the rule keeps later rules from applying to the objects it selects"
			}
			fmt.Fprintf(&b, "note: %s: defaultPropagation %s for %s%s applies to deletes that name no propagation policy: %s (see cascade policy render)\n",
				d.Rule, d.Propagation, d.Resource, where, what)
		}
		if served.Resource == nil {
			b.WriteString("note: resources not checked against a cluster (pass --kubeconfig to check)\n")
		}
		fmt.Fprintf(&b, "%s: valid: %d rules, %d ignored resources\n", name, c.Rules(), len(c.Ignored()))
	}
	if _, err := io.WriteString(out, b.String()); err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %d errors", name, len(errs))
	}
	return nil
}
