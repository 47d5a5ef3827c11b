/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package cost attributes what the nodes cost to the pods they run. Each node's hourly price is split over its
// pods by their share of the node's binding resource: of cpu, memory and the extended resources (GPUs, Neuron
// cores...) the node offers, the one its pods request the largest fraction of (the resource that fills the node
// first). A pod pays its request of that resource over the node's allocatable of it; what no pod requests is the
// node's idle share. Shares never exceed the node: pods requesting more than it has (static pods beside its
// allocatable) share it in proportion. DaemonSet pods are priced like any other and reported apart, so that each
// node's price is exactly its pods', its DaemonSets' and its idle share.
package cost

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// Node is a node with its hourly price as billed and the pods bound to it.
type Node struct {
	Name         string
	NodePool     string
	InstanceType string
	CapacityType string
	// Price is what the node costs an hour, as billed.
	Price       float64
	Allocatable corev1.ResourceList
	Pods        []*corev1.Pod
}

// Workload is what runs a pod: its controller, or the pod itself when it has none. A ReplicaSet of a
// Deployment is its Deployment, a Job of a CronJob stays a Job.
type Workload struct {
	Namespace string
	Kind      string
	Name      string
}

func (w Workload) String() string { return w.Namespace + "/" + w.Kind + "/" + w.Name }

// NodeCost is one node's split.
type NodeCost struct {
	Node
	// Binding is the resource the node's price is split by ("" when no pod requests anything).
	Binding corev1.ResourceName
	// Pods, DaemonSets and Idle are the node's price split three ways.
	Pods, DaemonSets, Idle float64
}

// Report is the cluster's split.
type Report struct {
	Nodes []NodeCost
	// Total is what the nodes cost an hour: Pods + DaemonSets + Idle.
	Total, Pods, DaemonSets, Idle float64
	// ByNamespace and ByWorkload split Pods (DaemonSet pods apart).
	ByNamespace map[string]float64
	ByWorkload  map[Workload]float64
	// DaemonSetsByName splits DaemonSets by DaemonSet.
	DaemonSetsByName map[Workload]float64
	// Commitments is how the Savings Plans and Reserved Instances declared cover the on-demand nodes (nil when none
	// is declared).
	Commitments *commitment.Coverage
}

// Attribute splits the nodes' prices over their pods.
func Attribute(nodes []Node) *Report {
	r := &Report{ByNamespace: map[string]float64{}, ByWorkload: map[Workload]float64{}, DaemonSetsByName: map[Workload]float64{}}
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	for _, n := range sorted {
		nc := NodeCost{Node: n}
		pods := running(n.Pods)
		requested := make([]corev1.ResourceList, len(pods))
		for i, pod := range pods {
			requested[i] = requests(pod)
		}
		nc.Binding = binding(n.Allocatable, requested)
		shares := make([]float64, len(pods))
		total := 0.0
		if nc.Binding != "" {
			alloc := n.Allocatable[nc.Binding]
			for i := range pods {
				req := requested[i][nc.Binding]
				shares[i] = fraction(&req, &alloc)
				total += shares[i]
			}
		}
		scale := 1.0
		if total > 1 {
			scale = 1 / total
		}
		for i, pod := range pods {
			c := n.Price * shares[i] * scale
			w := WorkloadOf(pod)
			if podutil.IsDaemonSetPod(pod) {
				nc.DaemonSets += c
				r.DaemonSetsByName[w] += c
				continue
			}
			nc.Pods += c
			r.ByNamespace[pod.Namespace] += c
			r.ByWorkload[w] += c
		}
		nc.Idle = max(n.Price-nc.Pods-nc.DaemonSets, 0)
		r.Nodes = append(r.Nodes, nc)
		r.Total += n.Price
		r.Pods += nc.Pods
		r.DaemonSets += nc.DaemonSets
		r.Idle += nc.Idle
	}
	return r
}

// running are the pods that hold room on their node (neither finished nor deleted).
func running(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if !podutil.Finished(pod) {
			out = append(out, pod)
		}
	}
	return out
}

func requests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// binding is the resource of the node its pods request the largest fraction of (requested holds each pod's
// requests): among cpu, memory and the extended resources it has, ties going to cpu, then memory, then the
// extended resources by name. "" when no pod requests any of them.
func binding(allocatable corev1.ResourceList, requested []corev1.ResourceList) corev1.ResourceName {
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	var extended []corev1.ResourceName
	for name, q := range allocatable {
		if strings.Contains(string(name), "/") && !q.IsZero() {
			extended = append(extended, name)
		}
	}
	sort.Slice(extended, func(i, j int) bool { return extended[i] < extended[j] })
	names = append(names, extended...)
	sums := corev1.ResourceList{}
	for _, req := range requested {
		for name, q := range req {
			s := sums[name]
			s.Add(q)
			sums[name] = s
		}
	}
	best, bestFraction := corev1.ResourceName(""), 0.0
	for _, name := range names {
		alloc, ok := allocatable[name]
		sum, requested := sums[name]
		if !ok || !requested {
			continue
		}
		if f := fraction(&sum, &alloc); f > bestFraction {
			best, bestFraction = name, f
		}
	}
	return best
}

// fraction is q over of (0 when of is zero).
func fraction(q, of interface{ AsApproximateFloat64() float64 }) float64 {
	d := of.AsApproximateFloat64()
	if d <= 0 {
		return 0
	}
	return q.AsApproximateFloat64() / d
}

// WorkloadOf names what runs a pod: a Deployment for a ReplicaSet whose name is the Deployment's and the pod's
// pod-template-hash, else the pod's controller, else the pod.
func WorkloadOf(pod *corev1.Pod) Workload {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Workload{Namespace: pod.Namespace, Kind: "Pod", Name: pod.Name}
	}
	if hash := pod.Labels["pod-template-hash"]; ref.Kind == "ReplicaSet" && hash != "" && strings.HasSuffix(ref.Name, "-"+hash) {
		return Workload{Namespace: pod.Namespace, Kind: "Deployment", Name: strings.TrimSuffix(ref.Name, "-"+hash)}
	}
	return Workload{Namespace: pod.Namespace, Kind: ref.Kind, Name: ref.Name}
}
