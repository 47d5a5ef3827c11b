/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKarpentersCRDChartGoesAndTheBuffersStay follows the migration guide's CRD hand-over as written: a stand-in for
// Karpenter's CRD chart (a Helm release named karpenter-crd holding Karpenter's NodePool CRD and the
// capacitybuffers.autoscaling.x-k8s.io CRD, as Karpenter's does) is installed with Helm and a CapacityBuffer
// created; after the guide's commands the release is gone, Karpenter's CRD too, and the buffer and its CRD stay.
func TestKarpentersCRDChartGoesAndTheBuffersStay(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	kubectl := binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl")
	helm := helmBinary(t)
	dir := t.TempDir()
	_, kubeconfig, _ := startSandbox(t, scheduler, dir)
	k := func(args ...string) (string, error) {
		return run(t, nil, kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}

	chart := filepath.Join(dir, "karpenter-crd")
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(chart, "Chart.yaml"), "apiVersion: v2\nname: karpenter-crd\nversion: 1.0.0\n")
	buffers, err := os.ReadFile(filepath.Join(repoRoot(t), "manifests", "crds", "autoscaling.x-k8s.io_capacitybuffers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(chart, "templates", "capacitybuffers.yaml"), string(buffers))
	nodePools, _, _ := strings.Cut(karpenterCRDs, "\n---\n")
	writeFile(t, filepath.Join(chart, "templates", "nodepools.yaml"), nodePools)
	if out, err := run(t, nil, helm, "install", "karpenter-crd", chart, "-n", "kube-system", "--kubeconfig", kubeconfig); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	if out, err := k("wait", "--for=condition=Established", "--timeout=2m", "crd/capacitybuffers.autoscaling.x-k8s.io", "crd/nodepools.karpenter.sh"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	buffer := filepath.Join(dir, "buffer.yaml")
	writeFile(t, buffer, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: web, namespace: default}
spec: {podTemplateRef: {name: web}, replicas: 2}
`)
	eventually(t, "the CapacityBuffer created", func() error {
		_, err := k("apply", "-f", buffer)
		return err
	})

	out, err := newDocShell(t, scheduler, kubectl, kubeconfig).run("docs/migration-from-karpenter.md", "6. **Hand over the CRDs.**")
	if err != nil {
		t.Fatalf("the guide's CRD hand-over, run as written: %v\n%s", err, out)
	}
	if out, err := run(t, nil, helm, "list", "-A", "-q", "--kubeconfig", kubeconfig); err != nil || strings.Contains(out, "karpenter-crd") {
		t.Errorf("helm still lists karpenter-crd (%v):\n%s", err, out)
	}
	eventually(t, "Karpenter's NodePool CRD deleted", func() error {
		out, err := k("get", "crd", "nodepools.karpenter.sh", "--ignore-not-found", "-o", "name")
		if err != nil {
			return err
		}
		if out != "" {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
	if out, err := k("get", "capacitybuffers.autoscaling.x-k8s.io", "web", "-n", "default", "-o", "name"); err != nil {
		t.Errorf("the CapacityBuffer did not stay: %v\n%s", err, out)
	}
}
