/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package buffer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCount(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	chunk := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	limits := func(kv ...string) corev1.ResourceList {
		if len(kv)%2 != 0 {
			t.Fatalf("limits(%q): want name, quantity pairs", kv)
		}
		out := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		req      Request
		workload int32
		want     int
	}{
		{"replicas", Request{Replicas: i32(4)}, 0, 4},
		{"zero replicas", Request{Replicas: i32(0)}, 0, 0},
		{"20% of 10", Request{Percentage: i32(20)}, 10, 2},
		{"20% of 11 rounds up", Request{Percentage: i32(20)}, 11, 3},
		{"1% of 3 is at least one", Request{Percentage: i32(1)}, 3, 1},
		{"a percentage of nothing", Request{Percentage: i32(50)}, 0, 0},
		{"replicas and percentage: the smaller", Request{Replicas: i32(3), Percentage: i32(50)}, 10, 3},
		{"autoscaling.x-k8s.io: replicas and percentage, the larger", Request{Replicas: i32(5), Percentage: i32(80), Larger: true}, 10, 8},
		{"autoscaling.x-k8s.io: the larger, then capped by limits", Request{Replicas: i32(5), Percentage: i32(80), Larger: true, Limits: limits("cpu", "2")}, 10, 4},
		{"autoscaling.x-k8s.io: replicas larger than the percentage", Request{Replicas: i32(5), Percentage: i32(10), Larger: true}, 10, 5},
		{"limits alone: as many as fit (cpu 2.2 / 0.5)", Request{Limits: limits("cpu", "2200m")}, 0, 4},
		{"limits cap replicas (memory 3Gi / 1Gi)", Request{Replicas: i32(10), Limits: limits("memory", "3Gi")}, 0, 3},
		{"the tightest limit wins", Request{Limits: limits("cpu", "10", "memory", "2Gi")}, 0, 2},
		{"a limit on a resource the chunk does not ask for", Request{Replicas: i32(2), Limits: limits("nvidia.com/gpu", "1")}, 0, 2},
		{"limits alone far above a chunk stop at MaxChunks", Request{Limits: limits("cpu", "1000000")}, 0, MaxChunks},
		{"a percentage of a huge workload stops at MaxChunks", Request{Percentage: i32(1000)}, 50000, MaxChunks},
	} {
		if got := Count(tc.req, chunk, tc.workload); got != tc.want {
			t.Errorf("%s: Count = %d, want %d", tc.name, got, tc.want)
		}
	}
}
