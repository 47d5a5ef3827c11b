/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
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
	if err := os.WriteFile(file, []byte(gpuPlanInput), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(output string) string { return planOf(t, file, output) }
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

// TestPlanDisruptDryRun: plan --disrupt over a cluster dump prints the pass's command (two half-empty m5.xlarge
// deleted, their pods moving onto the m5.large), the cost before and after, and why the third node stays.
const draPlanInput = `apiVersion: stevedore.dev/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-my-cluster
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  placementGroupSelector: {name: training-pg}
---
apiVersion: stevedore.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: stevedore.dev, kind: EC2NodeClass, name: default}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.nvidia.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: train-gpus, namespace: ml}
spec:
  devices:
    requests:
    - name: gpus
      exactly:
        deviceClassName: gpu.nvidia.com
        count: 2
        selectors:
        - cel: {expression: 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'}
---
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml, uid: train}
spec:
  schedulerName: stevedore
  resourceClaims: [{name: gpus, resourceClaimName: train-gpus}]
  containers:
  - name: c
    image: trainer
    resources:
      requests: {cpu: "1", memory: 4Gi}
      claims: [{name: gpus}]
---
apiVersion: v1
kind: Pod
metadata: {name: orphan, namespace: ml, uid: orphan}
spec:
  schedulerName: stevedore
  resourceClaims: [{name: gpus, resourceClaimTemplateName: two-gpus}]
  containers:
  - name: c
    image: trainer
    resources:
      claims: [{name: gpus}]
`

// TestPlanProvisionsForResourceClaims: plan gives a pod claiming two GPUs of at least 40 GiB the cheapest type with
// them and shows the node's devices and the placement group its EC2NodeClass selects; a pod whose claim is not in
// the input is reported, not dropped.
func TestPlanProvisionsForResourceClaims(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dra.yaml")
	if err := os.WriteFile(file, []byte(draPlanInput), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newPlanCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"-f", file, "--solve-timeout", "0s"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, want := range []string{"DEVICES", "g6e.12xlarge", "4 NVIDIA L40S 45776Mi (gpu.nvidia.com)", "ml/train",
		"node-1 launches into the placement group its EC2NodeClass selects: name training-pg",
		"unschedulable ml/orphan: the pod's ResourceClaim is not created yet (from template two-gpus, for gpus)"} {
		if !strings.Contains(table, want) {
			t.Errorf("the plan does not say %q:\n%s", want, table)
		}
	}
}

func TestPlanDisruptDryRun(t *testing.T) {
	run := func(output string) string {
		cmd := newPlanCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--disrupt", "-f", "testdata/disrupt-cluster.yaml", "-o", output})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	table := run("table")
	for _, want := range []string{
		"multi-node-consolidation (Underutilized): delete ip-10-0-1-11.ec2.internal, ip-10-0-1-12.ec2.internal, 2 pods move",
		"cost: $0.4800/h -> $0.0960/h",
		"keep    PodsFitNowhere: pod shop/cache-0 fits on no other node",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, table)
		}
	}
	var doc disruptOutput
	if err := json.Unmarshal([]byte(run("json")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Command == nil || doc.Command.Action != "delete" || len(doc.Command.Nodes) != 2 || len(doc.Nodes) != 3 ||
		doc.Nodes[2].Action != "keep" || doc.Nodes[2].Reason != "PodsFitNowhere" {
		t.Errorf("dry run JSON %+v", doc)
	}
}

// TestPlanDisruptRefusesWhatItDoesNotRead: an object of another kind is an error naming it, not dropped.
func TestPlanDisruptRefusesWhatItDoesNotRead(t *testing.T) {
	file := filepath.Join(t.TempDir(), "svc.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec: {ports: [{port: 80}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newPlanCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--disrupt", "-f", "testdata/disrupt-cluster.yaml", "-f", file})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "shop/web") || !strings.Contains(err.Error(), "does not read this kind") {
		t.Errorf("err = %v, want one naming Service shop/web", err)
	}
}

// webPDB allows the web pods of disrupt-cluster.yaml no disruption.
const webPDB = `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec: {maxUnavailable: 0, selector: {matchLabels: {app: web-7d9f}}}
status: {disruptionsAllowed: 0, currentHealthy: 2, desiredHealthy: 2, expectedPods: 2}
`

// TestPlanDisruptPreviewsSurge: with the web pods' Deployment and ReplicaSet in the dump, plan --disrupt says their
// pods would surge (make-before-break); a PodDisruptionBudget at its limit keeps their nodes, as in the live loop,
// and says the pods could surge past it if they asked; without the owners it previews every pod as evicted, keeps
// those nodes for the budget, and says why.
func TestPlanDisruptPreviewsSurge(t *testing.T) {
	owners, pdb := "testdata/disrupt-owners.yaml", filepath.Join(t.TempDir(), "pdb.yaml")
	if err := os.WriteFile(pdb, []byte(webPDB), 0o600); err != nil {
		t.Fatal(err)
	}

	out, stderr, err := run(t, newPlanCommand(), "--disrupt", "-f", "testdata/disrupt-cluster.yaml", "-f", owners, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc disruptOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if c := doc.Command; c == nil || len(c.Nodes) != 2 || strings.Join(c.Surging, ",") != "shop/web-7d9f-1,shop/web-7d9f-2" || len(c.Evicted) != 0 {
		t.Errorf("with the owners: command %+v, want the two web nodes taken and both web pods surging", c)
	}
	if strings.Contains(stderr, "no ReplicaSets") {
		t.Errorf("warns of missing owners that are there:\n%s", stderr)
	}
	table, _, err := run(t, newPlanCommand(), "--disrupt", "-f", "testdata/disrupt-cluster.yaml", "-f", owners)
	if err != nil || !strings.Contains(table, "2 pods move; surge shop/web-7d9f-1, shop/web-7d9f-2\n") {
		t.Errorf("the table does not name the surging pods (%v):\n%s", err, table)
	}

	out, _, err = run(t, newPlanCommand(), "--disrupt", "-f", "testdata/disrupt-cluster.yaml", "-f", owners, "-f", pdb, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	doc = disruptOutput{}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Command != nil {
		t.Errorf("with the owners and a budget allowing no disruption: command %+v, want none", doc.Command)
	}
	for _, n := range doc.Nodes {
		if n.Name != "ip-10-0-1-13.ec2.internal" && (n.Action != "keep" || n.Reason != "PodDisruptionBudget" ||
			!strings.Contains(n.Message, "stevedore.dev/replacement: Surge")) {
			t.Errorf("with the owners and the budget, node %s: %s (%s: %s), want kept for the budget, saying the pod could surge",
				n.Name, n.Action, n.Reason, n.Message)
		}
	}

	out, stderr, err = run(t, newPlanCommand(), "--disrupt", "-f", "testdata/disrupt-cluster.yaml", "-f", pdb, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	doc = disruptOutput{}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, n := range doc.Nodes {
		if n.Name != "ip-10-0-1-13.ec2.internal" && (n.Action != "keep" || n.Reason != "PodDisruptionBudget") {
			t.Errorf("without the owners, node %s: %s (%s), want kept for the PodDisruptionBudget", n.Name, n.Action, n.Reason)
		}
	}
	if !strings.Contains(stderr, "warning: the input has no ReplicaSets: every pod is previewed as evicted") {
		t.Errorf("without the owners, no warning:\n%s", stderr)
	}
}

const commitmentPlanInput = `apiVersion: stevedore.dev/v1
kind: NodePool
metadata: {name: web}
spec:
  template:
    spec:
      nodeClassRef: {group: stevedore.dev, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
---
apiVersion: stevedore.dev/v1
kind: Commitment
metadata: {name: m5-plan}
spec:
  savingsPlan: {type: EC2Instance, instanceFamily: m5, hourlyCommitment: "0.07", discountPercent: "28"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      schedulerName: stevedore
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {labelSelector: {matchLabels: {app: web}}, topologyKey: kubernetes.io/hostname}
      containers:
        - {name: c, image: web, resources: {requests: {cpu: "1", memory: 2Gi}}}
`

// TestPlanFillsTheCommitmentsOfTheInput: with an m5 Savings Plan whose room takes one m5.large, two pods that need a
// node each get one on-demand m5.large under the plan, shown with its list price, and one spot node; the plan
// prints the bill with the plan's fee.
func TestPlanFillsTheCommitmentsOfTheInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "committed.yaml")
	if err := os.WriteFile(file, []byte(commitmentPlanInput), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(output string) string { return planOf(t, file, output) }
	var doc planOutput
	if err := json.Unmarshal([]byte(run("json")), &doc); err != nil {
		t.Fatal(err)
	}
	var covered, spot []planNode
	for _, n := range doc.Nodes {
		switch {
		case n.Commitment != "":
			covered = append(covered, n)
		case n.CapacityType == "spot":
			spot = append(spot, n)
		}
	}
	if len(covered) != 1 || len(spot) != 1 || covered[0].Commitment != "m5-plan" || covered[0].InstanceType != "m5.large" ||
		covered[0].CapacityType != "on-demand" || covered[0].Price != 0.096 {
		t.Fatalf("nodes %+v, want an on-demand m5.large at its list price under m5-plan and a spot node", doc.Nodes)
	}
	if c := doc.Commitments; c == nil || math.Abs(c.Coverage-1) > 1e-9 || math.Abs(c.Bill-(0.07+spot[0].Price)) > 1e-9 {
		t.Errorf("commitments %+v, want the on-demand node covered and the bill the fee and the spot node", c)
	}
	if table := run("table"); !strings.Contains(table, "on-demand (m5-plan)") || !strings.Contains(table, "with the Commitments") {
		t.Errorf("the table does not show the plan:\n%s", table)
	}
}

// planOf runs scheduler plan on a file, greedy placement alone, and returns what it prints in the output format.
func planOf(t *testing.T, file, output string) string {
	t.Helper()
	cmd := newPlanCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"-f", file, "-o", output, "--solve-timeout", "0s"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// floorPlanInput is a NodePool that may launch spot or on-demand and a ten-replica Deployment; %s is the
// annotations of its pod template.
const floorPlanInput = `apiVersion: stevedore.dev/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: stevedore.dev, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}, annotations: {%s}}
    spec:
      schedulerName: stevedore
      containers:
        - {name: c, image: web, resources: {requests: {cpu: "1", memory: 2Gi}}}
`

// TestPlanHoldsTheOnDemandFloorOfAWorkload: a Deployment of ten whose template asks for 20% on on-demand gets two
// of its pods planned on on-demand nodes and the rest on spot; without the annotation every pod goes on spot.
func TestPlanHoldsTheOnDemandFloorOfAWorkload(t *testing.T) {
	for _, tc := range []struct {
		annotations string
		want        int
	}{
		{`stevedore.dev/on-demand-floor: "20%"`, 2},
		{`stevedore.dev/on-demand-floor: "3"`, 3},
		{``, 0},
	} {
		t.Run(tc.annotations, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "floor.yaml")
			if err := os.WriteFile(file, []byte(fmt.Sprintf(floorPlanInput, tc.annotations)), 0o600); err != nil {
				t.Fatal(err)
			}
			var doc planOutput
			if err := json.Unmarshal([]byte(planOf(t, file, "json")), &doc); err != nil {
				t.Fatal(err)
			}
			onDemand, all := 0, 0
			var nodes []string
			for _, n := range doc.Nodes {
				all += len(n.Pods)
				if n.CapacityType == "on-demand" {
					onDemand += len(n.Pods)
				}
				nodes = append(nodes, fmt.Sprintf("%s %s %v", n.InstanceType, n.CapacityType, n.Pods))
			}
			if all != 10 || onDemand != tc.want {
				t.Errorf("%d of %d pods planned on on-demand nodes, want %d of 10: %v", onDemand, all, tc.want, nodes)
			}
		})
	}
}
