/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package state_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/state"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// An external test package: pkg/test imports pkg/state (its listers normalise NodePools).

func TestNodePoolUsageSumsEveryResourceOfLiveNodeClaims(t *testing.T) {
	usage := state.NodePoolUsage([]*stevedorev1.NodeClaim{
		test.NodeClaim("gpu-1", "gpu").Launched("n-gpu-1", "g5.xlarge", "us-east-1a", "on-demand", "1.0060").
			Capacity("cpu", "4", "memory", "16Gi", "nvidia.com/gpu", "1").Obj(),
		test.NodeClaim("gpu-2", "gpu").Requests("cpu", "2", "memory", "1Gi").Obj(), // not launched yet: its requests
		test.NodeClaim("gpu-3", "gpu").Launched("n-gpu-3", "g5.16xlarge", "us-east-1a", "on-demand", "9.0000").
			Capacity("cpu", "64").Deleting(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)).Obj(), // being deleted: not counted
		test.NodeClaim("web-1", "web").Launched("n-web-1", "c7g.large", "us-east-1a", "on-demand", "0.0100").
			Capacity("cpu", "2").Obj(),
	})
	gpu := usage["gpu"]
	for name, want := range map[string]string{"cpu": "6", "memory": "17Gi", "nvidia.com/gpu": "1", "nodes": "2"} {
		if q := gpu.Resources[corev1.ResourceName(name)]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("gpu %s = %s, want %s", name, q.String(), want)
		}
	}
	if gpu.Nodes != 2 || gpu.Cost != 1.006 {
		t.Errorf("gpu nodes %d cost %v, want 2 and 1.006", gpu.Nodes, gpu.Cost)
	}
	if web := usage["web"]; web == nil || web.Nodes != 1 {
		t.Errorf("web usage %+v", web)
	}
	if (*state.Usage)(nil).List() != nil {
		t.Error("no usage should list nothing")
	}
}
