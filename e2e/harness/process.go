package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one child process of the harness (etcd, kube-apiserver, cascade, ...). Its output
// goes to a log file in the control plane's directory, so that a failure can show its tail.
//
// Children run in their own process group and get SIGKILL from the kernel when the harness
// process dies (Pdeathsig), so a test that panics or is killed leaves nothing running.
type Process struct {
	Name    string
	LogPath string

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited and waitErr is set
	// waitErr is written once, before done is closed.
	waitErr error
	stopMu  sync.Mutex
	stopped bool
}

// ProcessOptions are the optional parts of StartProcess.
type ProcessOptions struct {
	// Env is added to the harness's own environment.
	Env []string
	// Tee, if set, also receives the process's output (make run shows cascade's log).
	Tee io.Writer
}

// StartProcess starts bin with args, logging to dir/<name>.log.
func StartProcess(dir, name, bin string, args []string, opt ProcessOptions) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log for %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	var out io.Writer = f
	if opt.Tee != nil {
		out = io.MultiWriter(f, opt.Tee)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Dir = dir
	if opt.Env != nil {
		cmd.Env = append(os.Environ(), opt.Env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited, and its error if so.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Done is closed when the process exits.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the whole process group.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs it. It is safe to
// call more than once and on a process that already exited.
func (p *Process) Stop(grace time.Duration) error {
	p.stopMu.Lock()
	defer p.stopMu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.Signal(syscall.SIGKILL)
		<-p.done
	}
	// The group may still hold grandchildren; make sure none survive.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	return nil
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return tailFile(p.LogPath, n) }

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WaitForLine waits until the process's log contains substr, the process exits, or ctx ends.
func (p *Process) WaitForLine(ctx context.Context, substr string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if containsLine(p.LogPath, substr) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %q not seen in log: %w", p.Name, substr, ctx.Err())
		case <-p.done:
			if containsLine(p.LogPath, substr) {
				return nil
			}
			return fmt.Errorf("%s exited (%v) before logging %q", p.Name, p.waitErr, substr)
		case <-tick.C:
		}
	}
}

func containsLine(path, substr string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	needle := []byte(substr)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), needle) {
			return true
		}
	}
	return false
}
