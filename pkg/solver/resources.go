/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// vec is a resource vector in the units the solver compares fast: millicores, bytes, pods, and the accelerator
// resources (GPUs, Neuron devices and cores, EFA interfaces; cloud.AcceleratorCounts). The Filter plugins check
// every resource exactly; vec only orders and pre-screens candidates.
type vec struct {
	cpu, mem, pods int64
	acc            cloud.AcceleratorCounts
}

func (v vec) add(o vec) vec {
	out := vec{v.cpu + o.cpu, v.mem + o.mem, v.pods + o.pods, v.acc}
	for i, a := range o.acc {
		out.acc[i] += a
	}
	return out
}

func (v vec) sub(o vec) vec {
	out := vec{v.cpu - o.cpu, v.mem - o.mem, v.pods - o.pods, v.acc}
	for i, a := range o.acc {
		out.acc[i] -= a
	}
	return out
}

// fits reports whether v fits within capacity c.
func (v vec) fits(c vec) bool {
	if v.cpu > c.cpu || v.mem > c.mem || v.pods > c.pods {
		return false
	}
	for i, a := range v.acc {
		if a > c.acc[i] {
			return false
		}
	}
	return true
}

// weight is a scalar size used to sort pods and nodes: CPU and memory normalised at 4 GiB per core.
func (v vec) weight() float64 {
	return float64(v.cpu)/1000 + float64(v.mem)/float64(4<<30)
}

func podVec(pod *corev1.Pod) vec {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return vec{cpu: req.Cpu().MilliValue(), mem: req.Memory().Value(), pods: 1, acc: cloud.AcceleratorCountsOf(req)}
}

// podsVec sums the requests of pods.
func podsVec(pods []*corev1.Pod) vec {
	var out vec
	for _, p := range pods {
		out = out.add(podVec(p))
	}
	return out
}

func listVec(rl corev1.ResourceList) vec {
	return vec{cpu: rl.Cpu().MilliValue(), mem: rl.Memory().Value(), pods: rl.Pods().Value(), acc: cloud.AcceleratorCountsOf(rl)}
}

// podRequests sums the full requests (every resource) of pods.
func podRequests(pods []*corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, p := range pods {
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	out[corev1.ResourcePods] = *resource.NewQuantity(int64(len(pods)), resource.DecimalSI)
	return out
}

// fitsList reports whether requests fit allocatable for every resource requests names.
func fitsList(requests, allocatable corev1.ResourceList) bool {
	for name, q := range requests {
		if q.IsZero() {
			continue
		}
		a, ok := allocatable[name]
		if !ok || q.Cmp(a) > 0 {
			return false
		}
	}
	return true
}

// Requests are what the solver packs: millicores, bytes of memory, a pod count and accelerators.
type Requests struct {
	MilliCPU, Memory, Pods int64
	Accelerators           cloud.AcceleratorCounts
}

// PodRequests are a pod's requests as the scheduler counts them (init containers, sidecars and overhead
// included), and one pod.
func PodRequests(pod *corev1.Pod) Requests { return podVec(pod).requests() }

// ListRequests reads cpu, memory and pods from a resource list (an allocatable).
func ListRequests(rl corev1.ResourceList) Requests { return listVec(rl).requests() }

// Add sums two requests.
func (r Requests) Add(o Requests) Requests { return r.vec().add(o.vec()).requests() }

// Sub returns r less o.
func (r Requests) Sub(o Requests) Requests { return r.vec().sub(o.vec()).requests() }

// Fits reports whether r fits in room.
func (r Requests) Fits(room Requests) bool { return r.vec().fits(room.vec()) }

// Weight is a scalar size (CPU and memory normalised at 4 GiB per core) used to order pods.
func (r Requests) Weight() float64 { return r.vec().weight() }

func (v vec) requests() Requests {
	return Requests{MilliCPU: v.cpu, Memory: v.mem, Pods: v.pods, Accelerators: v.acc}
}

func (r Requests) vec() vec {
	return vec{cpu: r.MilliCPU, mem: r.Memory, pods: r.Pods, acc: r.Accelerators}
}

// FreeRoom is what a node has left for pods: its allocatable less what its pods request, in pods too.
func FreeRoom(ni fwk.NodeInfo) Requests { return freeVec(ni).requests() }

func freeVec(ni fwk.NodeInfo) vec {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	out := vec{cpu: alloc.GetMilliCPU() - req.GetMilliCPU(), mem: alloc.GetMemory() - req.GetMemory(),
		pods: int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))}
	if a, r := alloc.GetScalarResources(), req.GetScalarResources(); len(a) > 0 {
		for i, name := range stevedorev1.AcceleratorResources() {
			out.acc[i] = int32(max(min(a[corev1.ResourceName(name)]-r[corev1.ResourceName(name)], math.MaxInt32), math.MinInt32))
		}
	}
	return out
}
