package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/policy"
	"github.com/cascade-gc/cascade/policy/watch"
)

func init() {
	subcommands["policy"] = runPolicy
}

const policyUsage = `Usage:
  cascade policy validate -f FILE [--kubeconfig PATH]
      Decode FILE strictly and validate it; print every error, warning and note; exit 1 on
      errors. FILE is a policy document (apiVersion: cascade.dev/v1alpha1, kind: Policy) or a
      ConfigMap manifest holding one under data.policy.yaml; "-" reads stdin. With
      --kubeconfig, rules for resources the cluster does not serve are warned about.
  cascade policy render -f FILE
      Print, as YAML, the MutatingAdmissionPolicy and binding cascade would keep in the
      cluster for FILE's defaultPropagation rules (they stamp the default's finalizer on
      objects as they are created). FILE must be valid.`

// runPolicy is `cascade policy validate|render ...`.
func runPolicy(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("policy takes a command: validate or render\n" + policyUsage)
	}
	switch args[0] {
	case "validate":
		return runPolicyValidate(args[1:], out)
	case "render":
		return runPolicyRender(args[1:], out)
	case "-h", "--help", "help":
		_, err := fmt.Fprintln(out, policyUsage)
		return err
	default:
		return fmt.Errorf("unknown policy command %q\n%s", args[0], policyUsage)
	}
}

func runPolicyValidate(args []string, out io.Writer) error {
	fs := pflag.NewFlagSet("cascade policy validate", pflag.ContinueOnError)
	file := fs.StringP("filename", "f", "", `The policy document or ConfigMap manifest ("-": stdin).`)
	kubeconfig := fs.String("kubeconfig", "", "Check the resources the policy names against this cluster (optional).")
	doc, from, help, err := readPolicyArgs(fs, file, args, "validate")
	if err != nil || help {
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
	return validatePolicy(out, from, doc, served)
}

// readPolicyArgs parses the arguments of a policy command with fs (whose -f is file) and reads
// the document they name. help is true when --help was asked for (and printed).
func readPolicyArgs(fs *pflag.FlagSet, file *string, args []string, command string) (doc []byte, from string, help bool, err error) {
	fs.Usage = func() { _, _ = fmt.Fprintln(fs.Output(), policyUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, "", true, nil
		}
		return nil, "", false, err
	}
	if *file == "" || fs.NArg() > 0 {
		return nil, "", false, fmt.Errorf("policy %s takes -f FILE and nothing else", command)
	}
	var data []byte
	if *file == "-" {
		data, err = io.ReadAll(io.LimitReader(os.Stdin, 2*policy.MaxDocumentSize))
	} else {
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("cannot read the policy: %v", err)
	}
	doc, from, err = policyDocument(data)
	if err != nil {
		return nil, "", false, fmt.Errorf("%s: %v", *file, err)
	}
	return doc, *file + from, false, nil
}

// runPolicyRender prints the admission objects of a valid policy's defaultPropagation rules.
func runPolicyRender(args []string, out io.Writer) error {
	fs := pflag.NewFlagSet("cascade policy render", pflag.ContinueOnError)
	file := fs.StringP("filename", "f", "", `The policy document or ConfigMap manifest ("-": stdin).`)
	doc, name, help, err := readPolicyArgs(fs, file, args, "render")
	if err != nil || help {
		return err
	}
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
	_, err = io.WriteString(out, buf.String())
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
func validatePolicy(out io.Writer, name string, doc []byte, served policy.Served) error {
	c, p, errs := policy.Parse(doc)
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "error: %s\n", e.Error())
	}
	if p != nil {
		for _, w := range policy.Warnings(p, served) {
			fmt.Fprintf(&b, "warning: %s\n", w.Error())
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
