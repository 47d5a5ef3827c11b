/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary returns the path of a tool the Makefile built (env var), or builds it into a temporary directory.
func binary(t *testing.T, env, pkg string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as make build and the image ship it
	cmd.Dir = repoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// process is a command started in the background whose output is kept for the test's log.
type process struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	waited chan error
}

// start runs name args with env added to the environment; every stdout line is passed to onLine.
func start(t *testing.T, env []string, onLine func(string), name string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	p := &process{cmd: cmd, waited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			if len(p.lines) > 400 {
				p.lines = p.lines[1:]
			}
			p.mu.Unlock()
			if onLine != nil {
				onLine(sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.waited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			// SIGTERM first, so that the process cleans up after itself; SIGKILL when it does not exit in time.
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.waited:
			case <-time.After(30 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.waited // a killed process: its exit error says so
			}
		}
		if t.Failed() {
			p.mu.Lock()
			t.Logf("last output of %s:\n%s", name, strings.Join(p.lines, "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

// stop sends SIGTERM and waits up to a minute for the process to exit, returning its error.
func (p *process) stop(t *testing.T) error {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.waited:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("process %s did not stop within a minute of SIGTERM", p.cmd.Path)
		return nil
	}
}

// readEnvFile parses the sandbox's --env-out file (export K="V" lines) into KEY=VALUE strings.
func readEnvFile(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		kv, ok := strings.CutPrefix(line, "export ")
		if !ok {
			t.Fatalf("unexpected line in env file: %q", line)
		}
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, k+"="+strings.Trim(v, `"`))
	}
	return env
}

// run runs a command to completion and returns its combined output.
func run(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	return runWithin(t, 2*time.Minute, env, name, args...)
}

// runWithin is run with its own bound on the command's time, for commands such as a sandbox scenario that bound
// each of their own steps and may take minutes on a busy machine.
func runWithin(t *testing.T, bound time.Duration, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// eventually retries f every 250ms until it returns nil or two minutes pass.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(250 * time.Millisecond) // polling interval, not synchronisation
	}
}

// startSandbox runs `scheduler sandbox` without its scheduler, with files in dir and extra flags, waits until it
// is ready and returns it with its admin kubeconfig and its --env-out file. The sandbox keeps its etcd under dir
// too, so that the test's temporary directory takes it away even when the process is killed.
func startSandbox(t *testing.T, scheduler, dir string, extra ...string) (*process, string, string) {
	t.Helper()
	kubeconfig, envFile := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "env")
	ready := make(chan string, 1)
	args := append([]string{"sandbox", "--with-scheduler=false", "--kubeconfig-out", kubeconfig, "--env-out", envFile,
		"--log-file", filepath.Join(dir, "sandbox.log"), "--dir", filepath.Join(dir, "sandbox")}, extra...)
	p := start(t, nil, func(line string) {
		if strings.Contains(line, "sandbox ready") {
			select {
			case ready <- line:
			default:
			}
		}
	}, scheduler, args...)
	select {
	case line := <-ready:
		t.Log(line)
	case err := <-p.waited:
		t.Fatalf("sandbox exited before it was ready: %v", err)
	case <-time.After(3 * time.Minute):
		t.Fatal("no 'sandbox ready' line within 3 minutes")
	}
	return p, kubeconfig, envFile
}
