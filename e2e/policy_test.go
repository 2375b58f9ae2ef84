//go:build e2e

package e2e

// The per-resource policy (--policy-configmap): collect: Never and collect: After, a rejected
// edit, ignored resources, a missing ConfigMap. Each test writes its own policy ConfigMap in its
// own namespace and starts its own cascade on it; rules with a namespace selector are narrowed
// to the test's labelled namespace, and a canary in an unlabelled namespace shows the collector
// acted while the policy kept something.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/e2e/framework"
	"github.com/cascade-gc/cascade/e2e/harness"
	"github.com/cascade-gc/cascade/policy"
)

const (
	policyName = "cascade-policy"
	// keepLabel marks the namespaces the tests' rules select.
	keepLabel = "cascade.dev/e2e-keep"
)

// policyDoc is a policy document with the given body after the header.
func policyDoc(body string) string {
	return "apiVersion: cascade.dev/v1alpha1\nkind: Policy\n" + body
}

// selected is a rule body narrowed to the namespaces labelled keepLabel=true.
func selected(resource, collect string) string {
	return fmt.Sprintf("rules:\n- resource: %s\n  namespaceSelector:\n    matchLabels: {%s: \"true\"}\n  collect: %s\n", resource, keepLabel, collect)
}

// writePolicy creates or updates the policy ConfigMap in ns.
func writePolicy(t *testing.T, cs framework.Clients, ns, doc string) *corev1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: policyName, Namespace: ns}, Data: map[string]string{policy.ConfigMapKey: doc}}
	got, err := cs.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		got, err = cs.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("write the policy: %v", err)
	}
	return got
}

// labelNamespace sets keepLabel=true on ns.
func labelNamespace(t *testing.T, cs framework.Clients, ns string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, keepLabel)
	if _, err := cs.Kube.CoreV1().Namespaces().Patch(context.Background(), ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startWithPolicy starts cascade on the policy ConfigMap of ns and waits until it is in force.
func startWithPolicy(t *testing.T, ns string, generation float64, extra ...string) *harness.Cascade {
	t.Helper()
	c := suite.StartCascade(t, append([]string{"--policy-configmap=" + ns + "/" + policyName}, extra...)...)
	framework.WaitForMetric(t, c, "cascade_policy_generation", generation, 30*time.Second)
	return c
}

// waitEvent waits for an Event of reason on the object with uid in ns and returns it.
func waitEvent(t *testing.T, cs framework.Clients, ns string, uid types.UID, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	framework.Eventually(t, 30*time.Second, "event "+reason, func() (bool, error) {
		evs, err := cs.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.UID == uid {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// logLines counts the lines of c's log that contain every one of subs (the log file is shared
// by the processes a test name starts, -count included: name this test's objects).
func logLines(t *testing.T, c *harness.Cascade, subs ...string) int {
	t.Helper()
	b, err := os.ReadFile(c.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
			n++
		}
	}
	return n
}

func refUIDs(cm *corev1.ConfigMap) []types.UID {
	var out []types.UID
	for _, r := range cm.OwnerReferences {
		out = append(out, r.UID)
	}
	return out
}

// policyCanary deletes an owner in the unlabelled namespace other and waits for its dependent to be
// collected: the collector is running, and rules narrowed to the labelled namespace leave the
// others alone.
func policyCanary(t *testing.T, cs framework.Clients, other, name string) {
	t.Helper()
	owner := cs.CreateCM(t, other, name+"-owner")
	cs.CreateCM(t, other, name, framework.CMRef(owner))
	cs.DeleteCM(t, other, name+"-owner", metav1.DeletePropagationBackground)
	cs.WaitCMGone(t, other, name, collectTimeout)
}

// TestPolicyCollectNever: dependents of a deleted owner, of a resource the policy says collect:
// Never for in their namespace, stay; only the references to the gone owner are removed, and an
// Event on each says why. The same dependent in a namespace the rule does not select is
// collected.
func TestPolicyCollectNever(t *testing.T) {
	cs := suite.Clients(t)
	ns, other := cs.NewNamespace(t), cs.NewNamespace(t)
	labelNamespace(t, cs, ns)
	writePolicy(t, cs, ns, policyDoc(selected("configmaps", "Never")))
	startWithPolicy(t, ns, 1)

	owner := cs.CreateCM(t, ns, "owner")
	live := cs.CreateCM(t, ns, "live")
	kept := cs.CreateCM(t, ns, "kept", framework.CMRef(owner))
	cs.CreateCM(t, ns, "shared", framework.CMRef(owner), framework.CMRef(live))
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationBackground)
	policyCanary(t, cs, other, "canary")

	framework.Eventually(t, collectTimeout, "kept without its reference to the deleted owner", func() (bool, error) {
		cm := cs.MustExistCM(t, ns, "kept")
		return len(cm.OwnerReferences) == 0, nil
	})
	framework.Eventually(t, collectTimeout, "shared keeping only its reference to the live owner", func() (bool, error) {
		cm := cs.MustExistCM(t, ns, "shared")
		return slices.Equal(refUIDs(cm), []types.UID{live.UID}), nil
	})
	ev := waitEvent(t, cs, ns, kept.UID, "PolicyCollectNever")
	if ev.Type != corev1.EventTypeNormal || !strings.Contains(ev.Message, "rules[0] (collect: Never for configmaps)") || !strings.Contains(ev.Message, string(owner.UID)) {
		t.Errorf("event %s %q, want Normal, naming the rule and the owner", ev.Type, ev.Message)
	}
	framework.Consistently(t, 3*time.Second, "kept and shared stay", func() error {
		cs.MustExistCM(t, ns, "kept")
		cs.MustExistCM(t, ns, "shared")
		return nil
	})
}

// TestPolicyCollectAfter: collect: After 20s keeps the dependent of a deleted owner about 20 s,
// and a restart of cascade in between neither forgets nor restarts the delay (the time is
// recorded on the dependent).
func TestPolicyCollectAfter(t *testing.T) {
	cs := suite.Clients(t)
	ns, other := cs.NewNamespace(t), cs.NewNamespace(t)
	labelNamespace(t, cs, ns)
	writePolicy(t, cs, ns, policyDoc(selected("configmaps", "After 20s")))
	first := startWithPolicy(t, ns, 1)

	owner := cs.CreateCM(t, ns, "owner")
	cs.CreateCM(t, ns, "dep", framework.CMRef(owner))
	deleted := time.Now()
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationBackground)

	var recorded string
	framework.Eventually(t, 15*time.Second, "the time the owner was found gone, recorded on dep", func() (bool, error) {
		recorded = cs.MustExistCM(t, ns, "dep").Annotations[policy.OrphanedAtAnnotation]
		return recorded != "", nil
	})
	at, ok := policy.ParseOrphanedAt(recorded, []types.UID{owner.UID})
	if !ok || at.Before(deleted.Add(-time.Second)) || at.After(deleted.Add(10*time.Second)) {
		t.Fatalf("%s = %q, want a time just after the delete (%s) for the owner", policy.OrphanedAtAnnotation, recorded, deleted.UTC().Format(time.RFC3339))
	}
	dep := cs.MustExistCM(t, ns, "dep")
	ev := waitEvent(t, cs, ns, dep.UID, "PolicyCollectAfter")
	if !strings.Contains(ev.Message, "kept until "+at.Add(20*time.Second).UTC().Format(time.RFC3339)) {
		t.Errorf("event %q, want the time dep is kept until", ev.Message)
	}

	// Restart: the new cascade finds the recorded time and waits only for what is left.
	if err := first.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	startWithPolicy(t, ns, 1)
	policyCanary(t, cs, other, "canary") // the restarted collector acts
	if left := time.Until(at.Add(20 * time.Second)); left < 2*time.Second {
		t.Fatalf("the restart took too long to test the delay across it (%s left)", left)
	}
	framework.Consistently(t, time.Until(at.Add(19*time.Second)), "dep kept until its delay ends", func() error {
		cm := cs.MustExistCM(t, ns, "dep")
		if v := cm.Annotations[policy.OrphanedAtAnnotation]; v != recorded {
			return fmt.Errorf("the recorded time changed across the restart: %q, was %q", v, recorded)
		}
		return nil
	})
	framework.EventuallyEvery(t, 50*time.Millisecond, collectTimeout, "dep collected after its delay", func() (bool, error) {
		_, err := cs.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "dep", metav1.GetOptions{})
		return err != nil, nil
	})
	kept := time.Since(deleted)
	t.Logf("dep was kept %s after its owner's delete (collect: After 20s)", kept.Round(100*time.Millisecond))
	if kept < 20*time.Second || kept > 35*time.Second {
		t.Errorf("dep kept %s, want about 20s", kept)
	}
}

// TestPolicyBadEdit: an edit that does not decode or validate is rejected: a Warning Event on
// the ConfigMap names every error, the metrics say so, and the last good policy stays in force
// (collect: Never keeps working). Fixing the edit puts it in force.
func TestPolicyBadEdit(t *testing.T) {
	cs := suite.Clients(t)
	ns, other := cs.NewNamespace(t), cs.NewNamespace(t)
	labelNamespace(t, cs, ns)
	writePolicy(t, cs, ns, policyDoc(selected("configmaps", "Never")))
	c := startWithPolicy(t, ns, 1)

	bad := writePolicy(t, cs, ns, policyDoc("rules:\n- resource: configmaps\n  colect: Never\n- resource: jobs.batch\n  defaultPropagation: Background\n"))
	framework.WaitForMetric(t, c, "cascade_policy_load_errors_total", 1, 30*time.Second)
	m := framework.Scrape(t, c)
	if v, _ := m.Value("cascade_policy_last_load_success"); v != 0 {
		t.Errorf("cascade_policy_last_load_success = %v, want 0", v)
	}
	if v, _ := m.Value("cascade_policy_generation"); v != 1 {
		t.Errorf("cascade_policy_generation = %v, want 1 (the last good policy)", v)
	}
	ev := waitEvent(t, cs, ns, bad.UID, "PolicyRejected")
	for _, want := range []string{"keeping generation 1", "rules[0].colect: Forbidden: unknown field", "rules[1].defaultPropagation", "kube-apiserver orphans the dependents of jobs.batch"} {
		if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, want) {
			t.Errorf("event %s %q, want a Warning saying %q", ev.Type, ev.Message, want)
		}
	}
	if n := logLines(t, c, "Policy rejected", ns+"/"+policyName); n != 1 {
		t.Errorf("%d log lines say the policy was rejected, want 1", n)
	}

	// The last good policy is in force.
	owner := cs.CreateCM(t, ns, "owner")
	cs.CreateCM(t, ns, "kept", framework.CMRef(owner))
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationBackground)
	policyCanary(t, cs, other, "canary")
	framework.Eventually(t, collectTimeout, "kept without its reference", func() (bool, error) {
		return len(cs.MustExistCM(t, ns, "kept").OwnerReferences) == 0, nil
	})

	writePolicy(t, cs, ns, policyDoc(selected("configmaps", "After 1h")))
	framework.WaitForMetric(t, c, "cascade_policy_generation", 2, 30*time.Second)
	if v := framework.MetricValue(t, c, "cascade_policy_last_load_success"); v != 1 {
		t.Errorf("cascade_policy_last_load_success = %v after the fix, want 1", v)
	}
}

// TestPolicyIgnoredResource: a resource the policy ignores gets no watch (no
// cascade_resource_watched for it) from the start, and one it starts ignoring loses its watch
// at the next discovery round, without a restart; its dependents are no longer collected.
func TestPolicyIgnoredResource(t *testing.T) {
	cs := suite.Clients(t)
	ns := cs.NewNamespace(t)
	writePolicy(t, cs, ns, policyDoc("ignoredResources: [podtemplates]\n"))
	c := startWithPolicy(t, ns, 1, "--discovery-period=1s")
	watched := func(resource string) bool {
		_, ok := framework.Scrape(t, c).Value(fmt.Sprintf(`cascade_resource_watched{group="",resource=%q}`, resource))
		return ok
	}
	if watched("podtemplates") {
		t.Error("podtemplates is watched, but the policy ignores it")
	}
	if !watched("secrets") || !watched("configmaps") {
		t.Fatal("secrets or configmaps not watched")
	}

	writePolicy(t, cs, ns, policyDoc("ignoredResources: [podtemplates, secrets]\n"))
	framework.WaitForMetric(t, c, "cascade_policy_generation", 2, 30*time.Second)
	framework.Eventually(t, 30*time.Second, "secrets no longer watched", func() (bool, error) { return !watched("secrets"), nil })

	owner := cs.CreateCM(t, ns, "owner")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dep", OwnerReferences: []metav1.OwnerReference{framework.CMRef(owner)}}}
	if _, err := cs.Kube.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.CreateCM(t, ns, "canary", framework.CMRef(owner))
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationBackground)
	cs.WaitCMGone(t, ns, "canary", collectTimeout)
	framework.Consistently(t, 3*time.Second, "the ignored Secret stays", func() error {
		_, err := cs.Kube.CoreV1().Secrets(ns).Get(context.Background(), "dep", metav1.GetOptions{})
		return err
	})
	if watched("podtemplates") || !watched("configmaps") {
		t.Error("watches changed beyond secrets")
	}
}

// TestPolicyMissingConfigMap: a policy ConfigMap that does not exist means the built-in policy,
// said once; creating it puts it in force without a restart.
func TestPolicyMissingConfigMap(t *testing.T) {
	cs := suite.Clients(t)
	ns, other := cs.NewNamespace(t), cs.NewNamespace(t)
	labelNamespace(t, cs, ns)
	c := startWithPolicy(t, ns, 0)
	policyCanary(t, cs, ns, "before") // built in: collected
	if n := logLines(t, c, "Policy ConfigMap not found", ns+"/"+policyName); n != 1 {
		t.Errorf("%d log lines say the ConfigMap is missing, want 1", n)
	}
	writePolicy(t, cs, ns, policyDoc(selected("configmaps", "Never")))
	framework.WaitForMetric(t, c, "cascade_policy_generation", 1, 30*time.Second)
	owner := cs.CreateCM(t, ns, "owner")
	cs.CreateCM(t, ns, "kept", framework.CMRef(owner))
	cs.DeleteCM(t, ns, "owner", metav1.DeletePropagationBackground)
	policyCanary(t, cs, other, "canary")
	framework.Eventually(t, collectTimeout, "kept without its reference", func() (bool, error) {
		return len(cs.MustExistCM(t, ns, "kept").OwnerReferences) == 0, nil
	})
}
