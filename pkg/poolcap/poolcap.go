/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package poolcap holds a workload's cap per Spot pool: "at most 2 of this Deployment's pods in any one Spot pool",
// a pool being an instance type in a zone. EC2 reclaims Spot capacity pool by pool, so the cap bounds what one
// interruption storm takes from the workload. A pod template says so with the annotation stevedore.dev/spot-pool-cap
// (a count). Every pod of the workload that carries the annotation counts; pods on on-demand and reserved nodes
// do not. The solver holds the cap as a constraint over the Spot pools the workload's pods are placed in (a node
// planned for such a pod is narrowed to one instance type and zone, so its pool is known before it launches), and
// the scheduler's Filter holds it over the nodes that run.
package poolcap

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cost"
)

// Annotation is the pod annotation that sets its workload's cap per Spot pool.
const Annotation = stevedorev1.AnnotationSpotPoolCap

// Parse reads the annotation's value: a count of pods, 1 or more.
func Parse(value string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(value))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s %q: want a count of pods, 1 or more", Annotation, value)
	}
	return n, nil
}

// Of returns the cap a pod's annotation sets; ok is false when it sets none or err says why its value is not one.
func Of(pod *corev1.Pod) (capacity int, ok bool, err error) {
	v, set := pod.Annotations[Annotation]
	if !set {
		return 0, false, nil
	}
	capacity, err = Parse(v)
	return capacity, err == nil, err
}

// Has reports whether a pod carries the annotation (a valid value or not).
func Has(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[Annotation]
	return ok
}

// Kind says what a node is to a cap.
type Kind int

const (
	// NotSpot is a node whose pods no cap counts: on-demand or reserved, or a node of unknown origin.
	NotSpot Kind = iota
	// Spot is a Spot node whose pool (instance type and zone) is known.
	Spot
	// Undecided is a node that may be Spot but whose pool is not known yet: a NodePool's node whose capacity type,
	// instance type or zone is still open. A capped pod may not go there.
	Undecided
)

// eksCapacityType is the label EKS managed node groups give their nodes (ON_DEMAND, SPOT, CAPACITY_BLOCK).
const eksCapacityType = "eks.amazonaws.com/capacityType"

// PoolOf returns a node's Spot pool ("<instance type>/<zone>") and what it is to a cap.
func PoolOf(node *corev1.Node) (string, Kind) {
	if node == nil {
		return "", Undecided
	}
	spot := false
	if ct, ok := node.Labels[stevedorev1.LabelCapacityType]; ok {
		spot = ct == stevedorev1.CapacityTypeSpot
	} else if ct, ok := node.Labels[eksCapacityType]; ok {
		spot = ct == "SPOT"
	} else if _, managed := node.Labels[stevedorev1.LabelNodePool]; managed {
		return "", Undecided
	}
	if !spot {
		return "", NotSpot
	}
	it, zone := node.Labels[corev1.LabelInstanceTypeStable], node.Labels[corev1.LabelTopologyZone]
	if it == "" || zone == "" {
		return "", Undecided
	}
	return it + "/" + zone, Spot
}

// Key names the pods one cap counts together: a workload's pods that carry the annotation.
type Key = cost.Workload

// KeyOf returns the key of a pod that carries the annotation (ok false for one that does not).
func KeyOf(pod *corev1.Pod) (Key, bool) {
	if !Has(pod) {
		return Key{}, false
	}
	return cost.WorkloadOf(pod), true
}

// Counts are a workload's pods per Spot pool.
type Counts map[string]int

// Refused says why a capped pod may not go on a node ("" when it may): the node's pool holds cap of its
// workload's pods already, or the node may be Spot and its pool is not known.
func Refused(capacity int, counts Counts, node *corev1.Node) string {
	pool, kind := PoolOf(node)
	switch kind {
	case NotSpot:
		return ""
	case Undecided:
		return fmt.Sprintf("%s %d: the node's Spot pool (instance type and zone) is not known yet", Annotation, capacity)
	}
	if n := counts[pool]; n >= capacity {
		return fmt.Sprintf("%s %d: Spot pool %s holds %d of the workload's pods", Annotation, capacity, pool, n)
	}
	return ""
}
