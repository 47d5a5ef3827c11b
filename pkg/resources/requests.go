/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package resources sums what pods request and what nodes have left, in the units compared fast: millicores, bytes
// of memory, a pod count and the accelerator resources. The solver packs with these sums, and the provisioner's
// ledger, free-room index and node room, and the NodeClaim lifecycle, keep them; the Filter plugins check every
// resource exactly, so these only order and pre-screen.
package resources

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// Requests are millicores, bytes of memory, a pod count and the accelerator resources (GPUs, Neuron devices and
// cores, EFA interfaces; cloud.AcceleratorCounts).
type Requests struct {
	MilliCPU, Memory, Pods int64
	Accelerators           cloud.AcceleratorCounts
}

// Pod are a pod's requests as the scheduler counts them (init containers, sidecars and overhead included), and one
// pod.
func Pod(pod *corev1.Pod) Requests {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return Requests{MilliCPU: req.Cpu().MilliValue(), Memory: req.Memory().Value(), Pods: 1, Accelerators: cloud.AcceleratorCountsOf(req)}
}

// Pods sums the requests of pods.
func Pods(pods []*corev1.Pod) Requests {
	var out Requests
	for _, p := range pods {
		out = out.Add(Pod(p))
	}
	return out
}

// List reads cpu, memory, pods and the accelerators from a resource list (an allocatable).
func List(rl corev1.ResourceList) Requests {
	return Requests{MilliCPU: rl.Cpu().MilliValue(), Memory: rl.Memory().Value(), Pods: rl.Pods().Value(), Accelerators: cloud.AcceleratorCountsOf(rl)}
}

// Free is what a node has left for pods: its allocatable less what its pods request, in pods too.
func Free(ni fwk.NodeInfo) Requests {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	out := Requests{MilliCPU: alloc.GetMilliCPU() - req.GetMilliCPU(), Memory: alloc.GetMemory() - req.GetMemory(),
		Pods: int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))}
	if a, r := alloc.GetScalarResources(), req.GetScalarResources(); len(a) > 0 {
		for i, name := range stevedorev1.AcceleratorResources() {
			out.Accelerators[i] = int32(max(min(a[corev1.ResourceName(name)]-r[corev1.ResourceName(name)], math.MaxInt32), math.MinInt32))
		}
	}
	return out
}

// Add sums two requests.
func (r Requests) Add(o Requests) Requests {
	out := Requests{r.MilliCPU + o.MilliCPU, r.Memory + o.Memory, r.Pods + o.Pods, r.Accelerators}
	for i, a := range o.Accelerators {
		out.Accelerators[i] += a
	}
	return out
}

// Sub returns r less o.
func (r Requests) Sub(o Requests) Requests {
	out := Requests{r.MilliCPU - o.MilliCPU, r.Memory - o.Memory, r.Pods - o.Pods, r.Accelerators}
	for i, a := range o.Accelerators {
		out.Accelerators[i] -= a
	}
	return out
}

// Fits reports whether r fits in room.
func (r Requests) Fits(room Requests) bool {
	if r.MilliCPU > room.MilliCPU || r.Memory > room.Memory || r.Pods > room.Pods {
		return false
	}
	for i, a := range r.Accelerators {
		if a > room.Accelerators[i] {
			return false
		}
	}
	return true
}

// Weight is a scalar size used to order pods and nodes: CPU and memory normalised at 4 GiB per core.
func (r Requests) Weight() float64 {
	return float64(r.MilliCPU)/1000 + float64(r.Memory)/float64(4<<30)
}

// String renders the requests for messages.
func (r Requests) String() string {
	return fmt.Sprintf("cpu %s, memory %s, pods %d", resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI),
		resource.NewQuantity(r.Memory, resource.BinarySI), r.Pods)
}
