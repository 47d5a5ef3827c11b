/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package karpenter runs Karpenter's own controller, with its kwok cloud provider (sigs.k8s.io/karpenter/kwok, the
// controller Karpenter's scale tests run), against a sandbox, for the tests and benchmarks that put Stevedore
// beside it. `make test` builds the controller from hack/karpenter.
package karpenter

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Binaries names the controller and the folder of the CRD of its node class (KWOKNodeClass).
type Binaries struct{ Controller, NodeClassCRDs string }

// Find returns the controller and its node class CRD from STEVEDORE_KARPENTER_BIN and STEVEDORE_KARPENTER_CRDS
// (`make test` builds them from hack/karpenter), or builds them here from that module. The build needs the Go
// module proxy: where it fails the test is skipped, unless STEVEDORE_REQUIRE_KARPENTER says it must run.
func Find(tb testing.TB, repoRoot string) Binaries {
	tb.Helper()
	if bin, crds := os.Getenv("STEVEDORE_KARPENTER_BIN"), os.Getenv("STEVEDORE_KARPENTER_CRDS"); bin != "" && crds != "" {
		return Binaries{Controller: bin, NodeClassCRDs: crds}
	}
	module := filepath.Join(repoRoot, "hack", "karpenter")
	out := filepath.Join(tb.TempDir(), "karpenter-kwok")
	build := exec.Command("go", "build", "-o", out, "sigs.k8s.io/karpenter/kwok") //nolint:gosec // G204: the go tool, building the pinned module into the test's own folder
	build.Dir = module
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		if os.Getenv("STEVEDORE_REQUIRE_KARPENTER") != "" {
			tb.Fatalf("building Karpenter's kwok provider: %v\n%s", err, b)
		}
		tb.Skipf("Karpenter's kwok provider cannot be built here: %v\n%s", err, b)
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/karpenter")
	list.Dir = module
	dir, err := list.Output()
	if err != nil {
		tb.Fatalf("finding Karpenter's module: %v", err)
	}
	return Binaries{Controller: out, NodeClassCRDs: filepath.Join(strings.TrimSpace(string(dir)), "kwok", "apis", "crds")}
}

// NodeClassAndPool are a KWOKNodeClass named default and a NodePool of Karpenter's named pool that launches
// 4-vCPU amd64 Linux on-demand nodes (the types InstanceTypes writes) and consolidates them once underused, as its
// kwok provider's README writes them.
func NodeClassAndPool(pool string) string {
	return `apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
spec: {}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ` + pool + `}
spec:
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: Never}
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
      - {key: karpenter.kwok.sh/instance-cpu, operator: In, values: ["4"]}
      - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
      - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
      - {key: kubernetes.io/os, operator: In, values: ["linux"]}
`
}

// InstanceTypes writes the instance types of Karpenter's kwok provider, in its file format, and returns the
// file: its three 4-vCPU amd64 Linux types (c, s and m: 8, 16 and 32 GiB), priced by its formula, on demand,
// offered in zones (the sandbox's, where Stevedore launches too). With the provider's own zones (test-zone-a to d),
// a zone spread would count the sandbox's other nodes' zones, where Karpenter cannot launch, and never be
// satisfied.
func InstanceTypes(tb testing.TB, zones []string) string {
	tb.Helper()
	type requirement struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	}
	type offering struct {
		Price        float64       `json:"Price"`
		Available    bool          `json:"Available"`
		Requirements []requirement `json:"Requirements"`
	}
	type instanceType struct {
		Name             string            `json:"name"`
		Offerings        []offering        `json:"offerings"`
		Architecture     string            `json:"architecture"`
		OperatingSystems []string          `json:"operatingSystems"`
		Resources        map[string]string `json:"resources"`
	}
	var types []instanceType
	for _, family := range []struct {
		name      string
		memoryGiB int64
	}{{"c", 8}, {"s", 16}, {"m", 32}} {
		const cpus = 4
		price := 0.025*cpus + 0.001*float64(family.memoryGiB<<30)/1e9 // the provider's formula: per vCPU and per GB
		it := instanceType{Name: fmt.Sprintf("%s-%dx-amd64-linux", family.name, cpus), Architecture: "amd64",
			OperatingSystems: []string{"linux"}, Resources: map[string]string{"cpu": strconv.Itoa(cpus),
				"memory": fmt.Sprintf("%dGi", family.memoryGiB), "pods": strconv.Itoa(16 * cpus), "ephemeral-storage": "20Gi"}}
		for _, zone := range zones {
			it.Offerings = append(it.Offerings, offering{Price: price, Available: true, Requirements: []requirement{
				{Key: "karpenter.sh/capacity-type", Operator: "In", Values: []string{"on-demand"}},
				{Key: corev1.LabelTopologyZone, Operator: "In", Values: []string{zone}}}})
		}
		types = append(types, it)
	}
	raw, err := json.Marshal(types)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "instance-types.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Controller is Karpenter's controller running.
type Controller struct {
	cmd     *exec.Cmd
	logPath string
	// done is closed once the process has exited.
	done chan struct{}
}

// Start runs the controller against the cluster of kubeconfig, out of cluster, without leader election, and
// waits until its readiness probe answers. It is stopped when the test ends, if Stop did not stop it first; a
// failed test logs the end of its log.
func Start(tb testing.TB, bin, kubeconfig, instanceTypes string) *Controller {
	tb.Helper()
	health := freePort(tb)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "DISABLE_LEADER_ELECTION=true", "LOG_LEVEL=error",
		"INSTANCE_TYPES_FILE_PATH="+instanceTypes,
		"METRICS_PORT="+strconv.Itoa(freePort(tb)), "HEALTH_PROBE_PORT="+strconv.Itoa(health))
	c := &Controller{cmd: cmd, logPath: filepath.Join(tb.TempDir(), "karpenter.log"), done: make(chan struct{})}
	logs, err := os.Create(c.logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting Karpenter (%s): %v", bin, err)
	}
	go func() {
		_ = cmd.Wait() // stopped by a signal of ours, or its exit shows in the test's checks and its log
		_ = logs.Close()
		close(c.done)
	}()
	tb.Cleanup(func() {
		_ = c.Stop()
		if tb.Failed() {
			tb.Logf("Karpenter's log:\n%s", c.LastLines(40))
		}
	})
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health)) //nolint:gosec,noctx // G107: Karpenter's own probe port on loopback
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		tb.Fatalf("Karpenter not ready: %v\n%s", err, c.LastLines(40))
	}
	return c
}

// Pid is the controller's process ID.
func (c *Controller) Pid() int { return c.cmd.Process.Pid }

// Stop sends SIGTERM and waits up to a minute for the controller to exit (then kills it); stopping it again does
// nothing.
func (c *Controller) Stop() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("karpenter did not stop within a minute of SIGTERM")
	}
}

// LastLines returns the last n lines of the controller's log.
func (c *Controller) LastLines(n int) string {
	raw, _ := os.ReadFile(c.logPath)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
