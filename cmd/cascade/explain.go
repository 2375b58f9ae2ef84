package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cascade-gc/cascade/gc"
)

// newExplainCommand is `cascade explain RESOURCE/NAME [-n NAMESPACE] [--url URL] [-o
// text|json|dot]`: it asks a running cascade (its /debug/graph on the metrics address; reach an
// in-cluster one with kubectl port-forward) what it knows about one object and what it would
// do, and prints it.
func newExplainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain RESOURCE[.GROUP]/NAME [-n NAMESPACE] [--url URL] [-o text|json|dot]",
		Short: "Ask a running cascade what it knows about one object and what it would do",
		Example: "  cascade explain configmaps/my-config -n default --url http://127.0.0.1:8080\n" +
			"  cascade explain replicasets.apps/web-1 -n shop -o json",
		Args: exactArgs(1, "one RESOURCE[.GROUP]/NAME"),
	}
	ns := cmd.Flags().StringP("namespace", "n", "default", "Namespace of the object (ignored for cluster-scoped resources).")
	base := cmd.Flags().String("url", "http://127.0.0.1:8080", "cascade's metrics address (--metrics-bind-address), e.g. a kubectl port-forward to it.")
	format := cmd.Flags().StringP("output", "o", "text", "text, json or dot.")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		resource, name, ok := strings.Cut(args[0], "/")
		if !ok || resource == "" || name == "" {
			return &usageError{err: errors.New("explain takes one RESOURCE[.GROUP]/NAME, e.g. configmaps/my-config or replicasets.apps/web-1")}
		}
		if *format != "text" && *format != "json" && *format != "dot" {
			return &usageError{err: fmt.Errorf("invalid -o %q: text, json or dot", *format)}
		}
		return explain(cmd.OutOrStdout(), *base, resource, *ns, name, *format)
	}
	return cmd
}

// explain asks the cascade at base about one object and prints the answer in format.
func explain(out io.Writer, base, resource, ns, name, format string) error {
	q := url.Values{"resource": {resource}, "namespace": {ns}, "name": {name}}
	if format == "dot" {
		q.Set("format", "dot")
	}
	u := strings.TrimRight(base, "/") + "/debug/graph?" + q.Encode()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(u) //nolint:noctx // a one-shot command
	if err != nil {
		return fmt.Errorf("cannot reach cascade at %s: %v (is --url its --metrics-bind-address?)", base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", strings.TrimSpace(string(body)))
	}
	if format != "text" {
		_, err = out.Write(body)
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

// explainText is the human form of an explanation.
func explainText(e gc.Explanation) string {
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
	if d := e.Decision; d != nil && d.Error != "" {
		fmt.Fprintf(&b, "Decision now: none, retried: %s\n", d.Error)
	} else if d != nil {
		fmt.Fprintf(&b, "Decision now: %s (%s)", d.Action, d.Reason)
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
