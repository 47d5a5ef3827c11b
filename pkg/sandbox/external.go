/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The binaries a folder of another Kubernetes minor's control plane holds (`make kube-binaries` builds them).
const (
	apiServerBinary         = "kube-apiserver"
	controllerManagerBinary = "kube-controller-manager"
)

// process is a control-plane component of another Kubernetes minor, run from its binary; its output goes to a
// log file of the sandbox's directory.
type process struct {
	name    string
	log     string
	cmd     *exec.Cmd
	stopped chan error
}

// startProcess runs binary with args, its output appended to logDir/<name>.log.
func startProcess(binary, logDir string, args []string) (*process, error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("the control plane's binaries (make kube-binaries): %w", err)
	}
	name := filepath.Base(binary)
	logPath := filepath.Join(logDir, name+".log")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600) //nolint:gosec // G304: a file of the sandbox's own directory
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...) //nolint:gosec // G204: the control plane's binary the sandbox's options name
	cmd.Stdout, cmd.Stderr = out, out
	// its own process group: a signal to the test process's group does not reach it before the sandbox stops it
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = out.Close() // the start's error is the one to report
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, stopped: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		_ = out.Close() // the process is gone: nothing more is written
		if err == nil {
			err = errors.New("exited")
		}
		p.stopped <- err
		close(p.stopped)
	}()
	return p, nil
}

// stop asks the process to terminate, kills it after 30 seconds, and waits for it.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
	select {
	case err := <-p.stopped:
		_ = err // asked to stop: how it ended tells nothing
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		for range p.stopped {
		}
	}
}

// failed wraps err with the end of the process's log.
func (p *process) failed(err error) error {
	raw, _ := os.ReadFile(p.log)
	if len(raw) > 4000 {
		raw = raw[len(raw)-4000:]
	}
	return fmt.Errorf("%s: %w; the end of %s:\n%s", p.name, err, p.log, bytes.TrimSpace(raw))
}

// startExternalAPIServer runs the kube-apiserver of binaries against etcdURL with the sandbox's certificates on a
// loopback port (a free one when port is 0), with extra flags, and waits until it serves.
func startExternalAPIServer(ctx context.Context, binaries, etcdURL string, certs *pki, port int, logDir string, extra []string) (*process, int, error) {
	if port == 0 {
		ports, err := freePorts(1)
		if err != nil {
			return nil, 0, err
		}
		port = ports[0]
	}
	args := append(apiServerArgs(certs),
		"--etcd-servers="+etcdURL, "--etcd-prefix="+etcdPrefix,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Dir(certs.CAFile))
	p, err := startProcess(filepath.Join(binaries, apiServerBinary), logDir, append(args, extra...))
	if err != nil {
		return nil, 0, err
	}
	if err := waitForAPIServer(ctx, certs.adminConfig(apiServerURL(port)), p.stopped); err != nil {
		p.stop()
		return nil, 0, p.failed(err)
	}
	return p, port, nil
}

// startExternalControllerManager runs the kube-controller-manager of binaries with the controllers the sandbox
// runs, as the admin of kubeconfig.
func startExternalControllerManager(binaries, kubeconfig, logDir string, nodeGrace time.Duration) (*process, error) {
	return startProcess(filepath.Join(binaries, controllerManagerBinary), logDir, controllerManagerArgs(kubeconfig, nodeGrace))
}
