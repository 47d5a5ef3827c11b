/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const gpuPlanInput = `apiVersion: stevedore.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: stevedore.dev, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [g5]}
---
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  schedulerName: stevedore
  containers:
    - name: c
      image: trainer
      resources:
        requests: {cpu: "1", memory: 4Gi, nvidia.com/gpu: "1"}
        limits: {nvidia.com/gpu: "1"}
`

// TestPlanShowsAcceleratorsOfTheNodes: plan prints the GPUs of the node it plans for a GPU pod, in the table and
// in JSON.
func TestPlanShowsAcceleratorsOfTheNodes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gpu.yaml")
	if err := os.WriteFile(file, []byte(gpuPlanInput), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(output string) string {
		cmd := newPlanCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"-f", file, "-o", output, "--solve-timeout", "0s"})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	table := run("table")
	if !strings.Contains(table, "ACCELERATORS") || !strings.Contains(table, "g5.xlarge") || !strings.Contains(table, "1 nvidia.com/gpu") {
		t.Errorf("plan table does not show the g5.xlarge's GPU:\n%s", table)
	}
	var doc planOutput
	if err := json.Unmarshal([]byte(run("json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Nodes) != 1 || doc.Nodes[0].Accelerators["nvidia.com/gpu"] != 1 {
		t.Errorf("plan JSON nodes %+v, want one with 1 nvidia.com/gpu", doc.Nodes)
	}
}
