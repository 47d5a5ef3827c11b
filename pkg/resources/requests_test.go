/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package resources

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// list reads name, quantity, name, quantity...
func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for pair := range slices.Chunk(pairs, 2) {
		out[corev1.ResourceName(pair[0])] = resource.MustParse(pair[1])
	}
	return out
}

func TestPodCountsInitContainersAndOverhead(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: list("cpu", "2", "memory", "1Gi")}}},
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m", "memory", "2Gi", "nvidia.com/gpu", "1")}},
			{Resources: corev1.ResourceRequirements{Requests: list("cpu", "500m")}}},
		Overhead: list("cpu", "100m", "memory", "64Mi"),
	}}
	got := Pod(pod)
	want := Requests{MilliCPU: 2100, Memory: 2<<30 + 64<<20, Pods: 1, Accelerators: cloud.AcceleratorCountsOf(list("nvidia.com/gpu", "1"))}
	if got != want {
		t.Errorf("Pod = %v %v, want %v %v", got, got.Accelerators, want, want.Accelerators)
	}
	if two := Pods([]*corev1.Pod{pod, pod}); two != want.Add(want) {
		t.Errorf("Pods of two = %v, want %v", two, want.Add(want))
	}
}

func TestArithmetic(t *testing.T) {
	gpu := cloud.AcceleratorCountsOf(list("nvidia.com/gpu", "1"))
	small := Requests{MilliCPU: 500, Memory: 1 << 30, Pods: 1}
	withGPU := Requests{MilliCPU: 500, Memory: 1 << 30, Pods: 1, Accelerators: gpu}
	room := List(list("cpu", "1", "memory", "2Gi", "pods", "2"))
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"fits its room", small.Fits(room), true},
		{"two fit", small.Add(small).Fits(room), true},
		{"three do not (cpu)", small.Add(small).Add(small).Fits(room), false},
		{"a GPU does not fit a room without one", withGPU.Fits(room), false},
		{"room less the GPU pod's cpu and memory", room.Sub(small) == Requests{MilliCPU: 500, Memory: 1 << 30, Pods: 1}, true},
		{"adding then taking away is where it started", room.Add(withGPU).Sub(withGPU) == room, true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if w := (Requests{MilliCPU: 2000, Memory: 4 << 30}).Weight(); w != 3 {
		t.Errorf("Weight of 2 cores and 4 GiB = %v, want 3 (4 GiB a core)", w)
	}
}

func TestFreeIsAllocatableLessRequestsAndPods(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: list("cpu", "4", "memory", "8Gi", "pods", "10", "nvidia.com/gpu", "2")}}
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	ni.AddPod(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
		Requests: list("cpu", "1", "memory", "2Gi", "nvidia.com/gpu", "1")}}}}})
	got := Free(ni)
	want := Requests{MilliCPU: 3000, Memory: 6 << 30, Pods: 9, Accelerators: cloud.AcceleratorCountsOf(list("nvidia.com/gpu", "1"))}
	if got != want {
		t.Errorf("Free = %v %v, want %v %v", got, got.Accelerators, want, want.Accelerators)
	}
}
