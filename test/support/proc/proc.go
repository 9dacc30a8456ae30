/*
Copyright 2026 The cluster-api-provider-mailgun Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package proc runs the processes of the heavier test suites (OLM, the
// manager binary, opm) and stops them by process group when the test ends.
package proc

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a process the test started; it is stopped by PID at the end.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// logPath is the process's log file; empty when its output goes to a
	// writer of the caller's.
	logPath string
	done    chan struct{}
	stopped sync.Once
}

// Start starts bin with args and env, logging to logDir/name.log.
func Start(t *testing.T, logDir, name, bin string, args, env []string) *Proc {
	t.Helper()
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("opening log for %s: %v", name, err)
	}
	p := start(t, name, bin, args, env, logFile, func() { _ = logFile.Close() })
	p.logPath = logPath
	t.Logf("started %s (pid %d), log %s", name, p.Cmd.Process.Pid, logPath)
	return p
}

// StartWithOutput starts bin with args and env, writing its stdout and
// stderr to out, e.g. a buffer the test inspects.
func StartWithOutput(t *testing.T, name, bin string, args, env []string, out io.Writer) *Proc {
	t.Helper()
	p := start(t, name, bin, args, env, out, func() {})
	t.Logf("started %s (pid %d)", name, p.Cmd.Process.Pid)
	return p
}

func start(t *testing.T, name, bin string, args, env []string, out io.Writer, closeOut func()) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so that teardown reaches children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeOut()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		closeOut()
		close(p.done)
	}()
	t.Cleanup(p.Stop)
	return p
}

// Stop sends SIGTERM to the process group, then SIGKILL after 10s.
func (p *Proc) Stop() {
	p.stopped.Do(func() {
		pgid := -p.Cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// Kill ends the process group with SIGKILL at once, as a node failure or an
// OOM kill would, and waits (at most 10s) for the process to exit.
func (p *Proc) Kill() {
	p.stopped.Do(func() {
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	})
}

// Freeze stops the process group with SIGSTOP for d, then continues it,
// as a long GC pause, a frozen VM or a network partition would look to the
// rest of the cluster.
func (p *Proc) Freeze(d time.Duration) {
	p.Suspend()
	select {
	case <-p.done:
	case <-time.After(d):
	}
	p.Resume()
}

// Suspend stops the process group with SIGSTOP until Resume.
func (p *Proc) Suspend() { _ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGSTOP) }

// Resume continues the process group after Suspend.
func (p *Proc) Resume() { _ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGCONT) }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Tail returns the last n lines of the process's log file.
func (p *Proc) Tail(n int) string {
	if p.logPath == "" {
		return "(output went to the test's own writer)"
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreeAddr returns a free loopback address, failing the test if there is
// none.
func FreeAddr(t *testing.T) string {
	t.Helper()
	addr, err := LoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// LoopbackAddr returns a loopback address that was free a moment ago.
func LoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("releasing the free port: %w", err)
	}
	return addr, nil
}

// HTTPGet GETs http://addr+path with a 2s timeout and returns the status
// code and body; on a transport error the code is 0 and the body the error.
func HTTPGet(addr, path string) (int, string) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	// A close error cannot change what was read.
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
