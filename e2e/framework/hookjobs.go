package framework

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cascade-gc/cascade/e2e/harness"
)

// HookJobs stands in for the kubelet and the Job controller for Helm hook Jobs running cascade:
// the suite's control planes have neither, so a Job never runs. Each Job in the namespace whose
// annotation helm.sh/hook is set and whose first container runs cascade (the image's entry point:
// the args are cascade's) is run here, once, as the cascade binary under test with the Job's
// ServiceAccount (a token of its own, as a pod would mount), and its status is then written as
// the Job controller would: Complete on exit 0, Failed otherwise. Output goes to the test log.
type HookJobs struct {
	t      testing.TB
	cp     *harness.ControlPlane
	cs     Clients
	bin    string
	ns     string
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	ran map[string]int // job name: exit code
}

// RunHookJobs starts running the hook Jobs of namespace ns until the test ends.
func RunHookJobs(t testing.TB, cp *harness.ControlPlane, cs Clients, bin, ns string) *HookJobs {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &HookJobs{t: t, cp: cp, cs: cs, bin: bin, ns: ns, cancel: cancel, done: make(chan struct{}), ran: map[string]int{}}
	go h.loop(ctx)
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

// Ran returns the exit code of the Job name's run, and whether it ran.
func (h *HookJobs) Ran(name string) (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	code, ok := h.ran[name]
	return code, ok
}

func (h *HookJobs) loop(ctx context.Context) {
	defer close(h.done)
	seen := map[string]bool{} // by UID
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		jobs, err := h.cs.Kube.BatchV1().Jobs(h.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range jobs.Items {
			j := &jobs.Items[i]
			if seen[string(j.UID)] || j.Annotations["helm.sh/hook"] == "" || len(j.Spec.Template.Spec.Containers) == 0 {
				continue
			}
			seen[string(j.UID)] = true
			h.run(ctx, j)
		}
		return false, nil
	})
}

// run runs Job j's container as cascade and writes its outcome into the Job's status.
func (h *HookJobs) run(ctx context.Context, j *batchv1.Job) {
	sa := j.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	code := -1
	out := ""
	tok, err := h.cs.Kube.CoreV1().ServiceAccounts(h.ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err == nil {
		kc := filepath.Join(h.t.TempDir(), "hook-"+j.Name+".kubeconfig")
		if err = h.cp.WriteKubeconfig(kc, "system:serviceaccount:"+h.ns+":"+sa, tok.Status.Token); err == nil {
			c := j.Spec.Template.Spec.Containers[0]
			args := append(append([]string{}, c.Args...), "--kubeconfig="+kc)
			cmd := exec.CommandContext(ctx, h.bin, args...)
			b, runErr := cmd.CombinedOutput()
			out = string(b)
			if cmd.ProcessState != nil {
				code = cmd.ProcessState.ExitCode()
			}
			if runErr != nil && cmd.ProcessState == nil {
				err = runErr
			}
		}
	}
	h.t.Logf("hook Job %s/%s (%s): cascade %s: exit %d %v\n%s", h.ns, j.Name, j.Annotations["helm.sh/hook"], strings.Join(j.Spec.Template.Spec.Containers[0].Args, " "), code, err, out)
	h.mu.Lock()
	h.ran[j.Name] = code
	h.mu.Unlock()
	if err := h.finish(ctx, j, code == 0); err != nil {
		h.t.Errorf("writing the status of hook Job %s/%s: %v", h.ns, j.Name, err)
	}
}

// finish writes the status the Job controller writes when its one pod has succeeded or failed.
func (h *HookJobs) finish(ctx context.Context, j *batchv1.Job, ok bool) error {
	now := metav1.Now()
	zero := int32(0)
	j.Status.StartTime = &now
	j.Status.Terminating = &zero
	j.Status.Ready = &zero
	j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	cond := func(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: reason}
	}
	if ok {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &now
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached"), cond(batchv1.JobComplete, "CompletionsReached")}
	} else {
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "BackoffLimitExceeded"), cond(batchv1.JobFailed, "BackoffLimitExceeded")}
	}
	if _, err := h.cs.Kube.BatchV1().Jobs(h.ns).UpdateStatus(ctx, j, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}
