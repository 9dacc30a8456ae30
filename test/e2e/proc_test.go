//go:build e2e

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

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a process the test started; it is stopped by PID at the end.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	stopped sync.Once
}

// startProc starts bin with args and env, logging to logDir/name.log.
func startProc(t *testing.T, logDir, name, bin string, args, env []string) *proc {
	t.Helper()
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("opening log for %s: %v", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, so that teardown reaches children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	t.Logf("started %s (pid %d), log %s", name, cmd.Process.Pid, logPath)
	t.Cleanup(p.stop)
	return p
}

// stop sends SIGTERM to the process group, then SIGKILL after 10s.
func (p *proc) stop() {
	p.stopped.Do(func() {
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
	})
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitFor polls cond every 500ms until it holds, failing the test with
// what and the last state (and the dump) after timeout.
func waitFor(ctx context.Context, t *testing.T, timeout time.Duration, what string, dump func() string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) || ctx.Err() != nil {
			msg := fmt.Sprintf("timed out after %v waiting for %s; last state: %s", timeout, what, last)
			if dump != nil {
				msg += "\n" + dump()
			}
			t.Fatal(msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func waitForPort(ctx context.Context, t *testing.T, addr string, p *proc) {
	t.Helper()
	waitFor(ctx, t, 60*time.Second, p.name+" to listen on "+addr, func() string { return p.tail(30) }, func() (bool, string) {
		if p.exited() {
			t.Fatalf("%s exited:\n%s", p.name, p.tail(40))
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		_ = c.Close()
		return true, ""
	})
}
