/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// NodePoolRequirements returns what a NodePool's nodes satisfy: its requirements, its template labels, and the
// NodePool and EC2NodeClass labels.
func NodePoolRequirements(np *stevedorev1.NodePool) (scheduling.Requirements, error) {
	var nsr []corev1.NodeSelectorRequirement
	for _, r := range np.Spec.Template.Spec.Requirements {
		op := corev1.NodeSelectorOperator(r.Operator)
		if op == "" {
			op = corev1.NodeSelectorOpIn
		}
		nsr = append(nsr, corev1.NodeSelectorRequirement{Key: r.Key, Operator: op, Values: r.Values})
	}
	reqs, err := scheduling.FromNodeSelectorRequirements(nsr...)
	if err != nil {
		return nil, fmt.Errorf("NodePool %s: %w", np.Name, err)
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.MinValues != nil && (reqs[r.Key].MinValues == nil || *r.MinValues > *reqs[r.Key].MinValues) {
			reqs[r.Key].MinValues = r.MinValues // the largest of a key's requirements
		}
	}
	labels := map[string]string{stevedorev1.LabelNodePool: np.Name}
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Name != "" {
		labels[stevedorev1.LabelNodeClass] = ref.Name
	}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	reqs.AddAll(scheduling.FromLabels(labels))
	if !reqs.Has(stevedorev1.LabelCapacityType) {
		// reserved capacity is used only by NodePools that ask for it (as Karpenter does)
		reqs.Add(scheduling.MustRequirement(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpNotIn, stevedorev1.CapacityTypeReserved))
	}
	return reqs, nil
}

// NewNodePoolOption narrows instance types to those a NodePool (normalised: stevedorev1.NodePool.Normalize) allows,
// with an offering it allows. Region, when known, is a label every node of the NodePool has.
func NewNodePoolOption(np *stevedorev1.NodePool, its []*cloud.InstanceType, remaining corev1.ResourceList, daemonSets []*corev1.Pod, region string) (NodePoolOption, error) {
	reqs, err := NodePoolRequirements(np)
	if err != nil {
		return NodePoolOption{}, err
	}
	if region != "" {
		reqs.Add(scheduling.MustRequirement(corev1.LabelTopologyRegion, corev1.NodeSelectorOpIn, region))
	}
	zoneIDs := scheduling.ZoneIDs(cloud.ZoneIDs(its))
	reqs = zoneIDs.Translate(reqs) // the zone decides its ID
	opt := NodePoolOption{NodePool: np, Requirements: reqs, Remaining: remaining, typeKeys: map[string]bool{}, labelCache: &poolLabelSets{},
		zoneIDs: zoneIDs}
	sorted := append([]*cloud.InstanceType(nil), its...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, it := range sorted {
		if reqs.Compatible(it.Requirements, opt.labelsNode) != nil {
			continue
		}
		if len(it.Offerings.Compatible(reqs)) == 0 {
			continue
		}
		opt.InstanceTypes = append(opt.InstanceTypes, it)
		opt.hasPlainTypes = opt.hasPlainTypes || !it.Accelerated()
		for k := range it.Labels() {
			if !scheduling.IsWellKnown(k) {
				opt.typeKeys[k] = true
			}
		}
	}
	opt.DaemonSetPods = append([]*corev1.Pod(nil), daemonSets...)
	sort.SliceStable(opt.DaemonSetPods, func(i, j int) bool {
		a, b := opt.DaemonSetPods[i], opt.DaemonSetPods[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	opt.daemonKeys = daemonSetKeys(opt.DaemonSetPods)
	for _, r := range reqs {
		opt.hasMinValues = opt.hasMinValues || r.MinValues != nil
	}
	return opt, nil
}

// labelsNode reports whether the NodePool itself gives its nodes label key (a template label or a requirement on a
// key no instance type decides), so an instance type need not define it.
func (o *NodePoolOption) labelsNode(key string) bool {
	return o.Requirements.Has(key) && !scheduling.IsInstanceTypeKey(key) && !scheduling.IsOfferingKey(key)
}

// defines reports whether a node of the NodePool has a known value for key: the NodePool's labels and
// requirements, its instance types' labels, the well-known keys.
func (o *NodePoolOption) defines(key string) bool {
	return o.Requirements.Has(key) || scheduling.IsWellKnown(key) || o.typeKeys[key]
}

// compatible reports why a node with requirements reqs (the NodePool's, narrowed by the pods already planned on
// it) cannot satisfy a pod's node requirements pod: a key the NodePool and its instance types do not define,
// unless the pod is satisfied by the label's absence (Karpenter's rule: a pod never makes Stevedore write a label
// onto a node), or a key both constrain with no value in common.
func (o *NodePoolOption) compatible(reqs, pod scheduling.Requirements) error {
	for _, key := range slices.Sorted(maps.Keys(pod)) {
		if !o.defines(key) && !pod[key].AllowsAbsence() {
			return fmt.Errorf("the pod requires label %s, which the NodePool neither sets nor requires (%s)", key, pod[key])
		}
	}
	return reqs.Intersects(pod)
}

// minValuesHold reports whether the candidates able to hold total (with the offerings reqs allow) keep every
// requirement's minValues: the NodeClaim must list that many distinct values of the key.
func (o *NodePoolOption) minValuesHold(cands []*cloud.InstanceType, reqs scheduling.Requirements, total vec) bool {
	if !o.hasMinValues || o.MinValuesBestEffort {
		return true
	}
	return minValuesShortfall(cands, reqs, total) == ""
}

// minValuesShortfall names the first requirement whose minValues the candidates able to hold total do not meet,
// or "" when all are met.
func minValuesShortfall(cands []*cloud.InstanceType, reqs scheduling.Requirements, total vec) string {
	for _, key := range slices.Sorted(maps.Keys(reqs)) {
		r := reqs[key]
		if r.MinValues == nil {
			continue
		}
		values := map[string]bool{}
		for _, it := range cands {
			if total.Fits(allocVec(it)) && it.Offerings.HasCompatible(reqs) {
				if v, ok := it.Labels()[key]; ok && r.Has(v) {
					values[v] = true
				}
			}
		}
		if len(values) < *r.MinValues {
			return fmt.Sprintf("%s needs at least %d values (minValues) but only %d instance types' values can hold the pods", key, *r.MinValues, len(values))
		}
	}
	return ""
}

// daemonSetKeys returns the node label keys the DaemonSets' pods select on (node selector and required node
// affinity), sorted.
func daemonSetKeys(pods []*corev1.Pod) []string {
	keys := map[string]bool{}
	for _, p := range pods {
		maps.Copy(keys, scheduling.NodeSelectionKeys(p))
	}
	return slices.Sorted(maps.Keys(keys))
}

// SortNodePools orders NodePools for provisioning: higher weight first, then by name.
func SortNodePools(pools []NodePoolOption) {
	sort.SliceStable(pools, func(i, j int) bool {
		wi, wj := pools[i].NodePool.WeightOrZero(), pools[j].NodePool.WeightOrZero()
		if wi != wj {
			return wi > wj
		}
		return pools[i].NodePool.Name < pools[j].NodePool.Name
	})
}

// DaemonSetPod returns the pod a DaemonSet would run on a new node, for overhead accounting.
func DaemonSetPod(ds *appsv1.DaemonSet) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-daemon", Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels,
			UID:             types.UID("daemonset-" + string(ds.UID) + ds.Namespace + "/" + ds.Name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}}},
		Spec: *ds.Spec.Template.Spec.DeepCopy(),
	}
	manifest.DefaultRequests(pod)
	// The DaemonSet controller adds these tolerations to every daemon pod.
	pod.Spec.Tolerations = append(pod.Spec.Tolerations,
		corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		corev1.Toleration{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		corev1.Toleration{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		corev1.Toleration{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	)
	return pod
}
