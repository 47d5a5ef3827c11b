/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandboxAndSchedulerBinaries drives the real binaries the way the README tells a user to: start the sandbox
// without its scheduler, point kubectl at it, run `scheduler --config config/scheduler-config.yaml --kubeconfig`
// against it, and stop everything with SIGTERM.
func TestSandboxAndSchedulerBinaries(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	kubectl := binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl")
	dir := t.TempDir()
	sandbox, kubeconfig, envFile := startSandbox(t, scheduler, dir)
	k := func(args ...string) (string, error) {
		return run(t, nil, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}

	// without Stevedore's CRDs the binary stops at once, naming them (its informers would wait for them for ever)
	out, err := run(t, readEnvFile(t, envFile), scheduler, "--config", filepath.Join(repoRoot(t), "config", "scheduler-config.yaml"),
		"--kubeconfig", kubeconfig, "--secure-port=0")
	if err == nil || !strings.Contains(out, "does not serve the CustomResourceDefinition nodepools.stevedore.dev") {
		t.Fatalf("the scheduler against a cluster without Stevedore's CRDs: %v, want a start-up error naming them:\n%s", err, lastLines(out, 10))
	}
	// as docs/sandbox.md says: the CRDs and the policy first
	for _, apply := range [][]string{{"-k", filepath.Join(repoRoot(t), "manifests", "crds"), "--server-side"},
		{"-f", filepath.Join(repoRoot(t), "manifests", "deploy", "scheduling-policy.yaml")}} {
		if out, err := k(append([]string{"apply"}, apply...)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if out, err := k("wait", "--for=condition=Established", "--timeout=2m", "crd/nodepools.stevedore.dev", "crd/ec2nodeclasses.stevedore.dev"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	t.Run("version and help", func(t *testing.T) {
		out, err := run(t, nil, scheduler, "version")
		if err != nil || !strings.Contains(out, "Stevedore") || !strings.Contains(out, "v1.37.2") {
			t.Fatalf("scheduler version = %q, %v; want Stevedore's version and Kubernetes v1.37.2", out, err)
		}
		out, err = run(t, nil, scheduler, "--help")
		if err != nil || !strings.Contains(out, "--config") || !strings.Contains(out, "sandbox") {
			t.Fatalf("scheduler --help = %v, output lacks --config or the sandbox subcommand:\n%s", err, out)
		}
	})

	t.Run("kubectl create deployment yields three pods", func(t *testing.T) {
		if out, err := k("create", "deployment", "x", "--image=registry.k8s.io/pause:3.10", "--replicas=3"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		eventually(t, "three pods of deployment x", func() error {
			out, err := k("get", "pods", "-l", "app=x", "-o", "name")
			if err != nil {
				return err
			}
			if n := len(strings.Fields(out)); n != 3 {
				return fmt.Errorf("%d pods", n)
			}
			return nil
		})
	})

	t.Run("kubectl apply of the example NodePools succeeds and a bad one is refused", func(t *testing.T) {
		examples := filepath.Join(repoRoot(t), "manifests", "examples")
		if out, err := k("apply", "-f", filepath.Join(examples, "ec2nodeclasses.yaml"), "-f", filepath.Join(examples, "production.yaml")); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		bad := filepath.Join(dir, "bad.yaml")
		writeFile(t, bad, `apiVersion: stevedore.dev/v1
kind: NodePool
metadata: {name: bad}
spec:
  weight: 0
  template:
    spec:
      nodeClassRef: {name: arm64}
      requirements: [{key: kubernetes.io/arch, operator: Like, values: [arm64]}]
  disruption: {consolidationPolicy: Sometimes}
`)
		out, err := k("apply", "-f", bad)
		if err == nil {
			t.Fatalf("the bad NodePool was accepted:\n%s", out)
		}
		for _, field := range []string{"spec.weight", "spec.template.spec.requirements[0].operator", "spec.disruption.consolidationPolicy"} {
			if !strings.Contains(out, field) {
				t.Errorf("kubectl's refusal does not name %s:\n%s", field, out)
			}
		}
	})

	t.Run("the docs' recipes that dump a Karpenter cluster and plan it run as written", func(t *testing.T) {
		runRecipes(t, scheduler, kubectl, kubeconfig, k)
	})

	t.Run("the scheduler binary binds pods against the sandbox", func(t *testing.T) {
		env := readEnvFile(t, envFile)
		launches := make(chan string, 16)
		sched := start(t, env, func(line string) {
			if strings.Contains(line, `"Launched instance"`) {
				launches <- line
			}
		}, scheduler, "--config", filepath.Join(repoRoot(t), "config", "scheduler-config.yaml"),
			"--kubeconfig", kubeconfig, "--secure-port=0", "--logging-format=json")
		pod := filepath.Join(dir, "pod.yaml")
		writeFile(t, pod, `apiVersion: v1
kind: Pod
metadata: {name: by-stevedore}
spec:
  schedulerName: stevedore
  tolerations: [{key: CriticalAddonsOnly, operator: Exists}]
  containers: [{name: pause, image: registry.k8s.io/pause:3.10}]
`)
		if out, err := k("apply", "-f", pod); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		eventually(t, "pod by-stevedore bound and Running", func() error {
			out, err := k("get", "pod", "by-stevedore", "-o", "jsonpath={.spec.nodeName} {.status.phase}")
			if err != nil {
				return err
			}
			if !strings.HasPrefix(out, "bootstrap-") || !strings.HasSuffix(out, "Running") {
				return fmt.Errorf("pod is %q", out)
			}
			return nil
		})
		// a pod that fits no existing node: Stevedore launches one (an example NodePool applied above) and logs
		// the launch as one JSON line carrying what an operator greps for
		launched := filepath.Join(dir, "launched.yaml")
		writeFile(t, launched, `apiVersion: v1
kind: Pod
metadata: {name: needs-a-node}
spec:
  schedulerName: stevedore
  containers: [{name: pause, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`)
		if out, err := k("apply", "-f", launched); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		select {
		case line := <-launches:
			var entry map[string]any
			if err := json.Unmarshal([]byte(line), &entry); err != nil {
				t.Fatalf("the launch log line is not JSON: %v\n%s", err, line)
			}
			for _, key := range []string{"msg", "nodeclaim", "nodepool", "instance", "node", "type", "zone", "capacityType", "price", "pods"} {
				if v, ok := entry[key]; !ok || v == "" {
					t.Errorf("the launch log line lacks %q: %s", key, line)
				}
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("no JSON \"Launched instance\" line within 2 minutes")
		}
		if err := sched.stop(t); err != nil {
			t.Logf("scheduler exited with %v after SIGTERM", err)
		}
	})

	t.Run("sandbox interrupt reaches the running sandbox's emulator", func(t *testing.T) {
		out, err := run(t, nil, scheduler, "sandbox", "interrupt", "--env-file", envFile, "--node", "no-such-node", "--kind", "spot")
		if err == nil || !strings.Contains(out, "no running instance has the node name no-such-node") {
			t.Fatalf("sandbox interrupt for an unknown node = %v, want the emulator's refusal naming the node:\n%s", err, out)
		}
		out, err = run(t, nil, scheduler, "sandbox", "interrupt", "--node", "x")
		if err == nil || !strings.Contains(out, "env-file") {
			t.Fatalf("sandbox interrupt without --env-file = %v, want an error naming --env-file:\n%s", err, out)
		}
	})

	if err := sandbox.stop(t); err != nil {
		t.Fatalf("sandbox did not exit cleanly on SIGTERM: %v", err)
	}
}
