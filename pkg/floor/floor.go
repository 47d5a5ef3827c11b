/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package floor holds a workload's on-demand floor: "at least 20% of this Deployment's pods on capacity Spot cannot
// take back". A pod template says so with the annotation stevedore.dev/on-demand-floor, a percentage ("20%") or a
// count ("2"); on-demand and reserved nodes count, spot nodes do not. The floor is held over the pods a workload
// has placed: before a solve places some of them (a scale-up, the pods of nodes consolidation removes, those of an
// interrupted Spot node), Pin says which must go to on-demand capacity for the floor to hold once they are placed,
// and the solver sees those with a required node affinity on the capacity type.
package floor

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cost"
	"github.com/stevedore-dev/stevedore/pkg/podutil"
)

// Annotation is the pod annotation that sets its workload's on-demand floor.
const Annotation = stevedorev1.AnnotationOnDemandFloor

// Floor is a workload's on-demand floor: a percentage of its pods, or a count.
type Floor struct {
	// Percent of the pods (rounded up), when Count is 0.
	Percent int
	// Count of pods (at most as many as the workload has).
	Count int
}

// Parse reads the annotation's value: "20%" (0 to 100) or "2" (0 or more).
func Parse(value string) (Floor, error) {
	v := strings.TrimSpace(value)
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 100 {
			return Floor{}, fmt.Errorf("%s %q: a percentage must be a whole number from 0%% to 100%%", Annotation, value)
		}
		return Floor{Percent: n}, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return Floor{}, fmt.Errorf("%s %q: want a percentage (\"20%%\") or a count of pods (\"2\")", Annotation, value)
	}
	return Floor{Count: n}, nil
}

// Of returns the floor a pod's annotation sets; ok is false when it sets none, err says why a value is not one.
func Of(pod *corev1.Pod) (f Floor, ok bool, err error) {
	v, set := pod.Annotations[Annotation]
	if !set {
		return Floor{}, false, nil
	}
	f, err = Parse(v)
	return f, err == nil, err
}

// Required is how many of total pods must run on on-demand capacity.
func (f Floor) Required(total int) int {
	if f.Count > 0 {
		return min(f.Count, total)
	}
	return int(math.Ceil(float64(f.Percent) * float64(total) / 100))
}

// String is the floor as the annotation says it.
func (f Floor) String() string {
	if f.Count > 0 {
		return strconv.Itoa(f.Count)
	}
	return strconv.Itoa(f.Percent) + "%"
}

// eksCapacityType is the label EKS managed node groups give their nodes (ON_DEMAND, SPOT, CAPACITY_BLOCK).
const eksCapacityType = "eks.amazonaws.com/capacityType"

// OnDemand reports whether a node's capacity type counts towards a floor: on-demand and reserved do (and a managed
// node group's ON_DEMAND and CAPACITY_BLOCK nodes); spot, and a node whose capacity type is not known or not
// decided yet, do not.
func OnDemand(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	if ct, ok := node.Labels[stevedorev1.LabelCapacityType]; ok {
		return OnDemandCapacity(ct)
	}
	ct := node.Labels[eksCapacityType]
	return ct == "ON_DEMAND" || ct == "CAPACITY_BLOCK"
}

// OnDemandCapacity reports whether a capacity type counts towards a floor.
func OnDemandCapacity(capacityType string) bool {
	return capacityType == stevedorev1.CapacityTypeOnDemand || capacityType == stevedorev1.CapacityTypeReserved
}

// Requirement is what a pinned pod asks of its node: on-demand (a node planned for it then says so in its
// capacity-type label from the start; reserved capacity counts where pods run on it already).
var Requirement = corev1.NodeSelectorRequirement{Key: stevedorev1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn,
	Values: []string{stevedorev1.CapacityTypeOnDemand}}

// Tally is what a workload with a floor has placed.
type Tally struct {
	Placed, OnDemand int
}

// Tallies are the placed pods of the workloads with a floor, by workload.
type Tallies map[cost.Workload]*Tally

// Add counts a placed pod on its node (one without a floor is not counted).
func (t Tallies) Add(pod *corev1.Pod, node *corev1.Node) {
	t.AddOn(pod, OnDemand(node))
}

// AddOn counts a placed pod, on on-demand capacity or not (one without a floor is not counted).
func (t Tallies) AddOn(pod *corev1.Pod, onDemand bool) {
	if _, ok := pod.Annotations[Annotation]; !ok || !podutil.Reschedulable(pod) {
		return
	}
	w := cost.WorkloadOf(pod)
	c := t[w]
	if c == nil {
		c = &Tally{}
		t[w] = c
	}
	c.Placed++
	if onDemand {
		c.OnDemand++
	}
}

// SpotRefused says why a pod may not go on spot capacity ("" when it may): its workload's floor over the pods it
// has placed (those of placed, the pod not among them) and the pod would not hold.
func SpotRefused(pod *corev1.Pod, placed Tally) string {
	f, ok, _ := Of(pod)
	if !ok {
		return ""
	}
	need := f.Required(placed.Placed + 1)
	if placed.OnDemand >= need {
		return ""
	}
	w := cost.WorkloadOf(pod)
	return fmt.Sprintf("the on-demand floor of %s %s/%s (%s) needs this pod on on-demand capacity: %d of its %d placed pods are, %d needed",
		w.Kind, w.Namespace, w.Name, f, placed.OnDemand, placed.Placed, need)
}

// Pin returns the pods of placing that must go on on-demand capacity so that, once every one of them is placed,
// each workload's floor holds over its placed pods: of a workload's pods being placed, as many as its floor lacks,
// the first by name. problems names the pods whose annotation is not a floor (they are placed as if it were not
// there).
func Pin(placing []*corev1.Pod, placed Tallies) (pinned map[types.UID]bool, problems []error) {
	byWorkload := map[cost.Workload][]*corev1.Pod{}
	floors := map[cost.Workload]Floor{}
	for _, pod := range placing {
		f, ok, err := Of(pod)
		if err != nil {
			problems = append(problems, fmt.Errorf("pod %s: %w", podutil.Key(pod), err))
		}
		if !ok {
			continue
		}
		w := cost.WorkloadOf(pod)
		byWorkload[w] = append(byWorkload[w], pod)
		if _, seen := floors[w]; !seen {
			floors[w] = f
		}
	}
	pinned = map[types.UID]bool{}
	for w, pods := range byWorkload {
		t := Tally{}
		if placed[w] != nil {
			t = *placed[w]
		}
		need := floors[w].Required(t.Placed+len(pods)) - t.OnDemand
		if need <= 0 {
			continue
		}
		sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
		for _, pod := range pods[:min(need, len(pods))] {
			pinned[pod.UID] = true
		}
	}
	return pinned, problems
}

// Apply returns placing with each pinned pod replaced by a copy that requires on-demand capacity (placing itself
// when none is pinned).
func Apply(placing []*corev1.Pod, pinned map[types.UID]bool) []*corev1.Pod {
	if len(pinned) == 0 {
		return placing
	}
	out := make([]*corev1.Pod, len(placing))
	for i, pod := range placing {
		if pinned[pod.UID] {
			out[i] = podutil.Requiring(pod, Requirement)
		} else {
			out[i] = pod
		}
	}
	return out
}
