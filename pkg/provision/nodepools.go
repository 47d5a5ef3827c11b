package provision

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/scheduling"
)

// NodePoolRequirements returns what a NodePool's nodes satisfy: its requirements, its template labels, and the
// NodePool label.
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
		if r.MinValues != nil {
			reqs[r.Key].MinValues = r.MinValues
		}
	}
	labels := map[string]string{stevedorev1.LabelNodePool: np.Name}
	for k, v := range np.Spec.Template.ObjectMeta.Labels {
		labels[k] = v
	}
	reqs.AddAll(scheduling.FromLabels(labels))
	return reqs, nil
}

// NewNodePoolOption narrows instance types to those a NodePool allows, with an offering it allows.
func NewNodePoolOption(np *stevedorev1.NodePool, its []*cloud.InstanceType, remaining corev1.ResourceList, daemonSets []*corev1.Pod) (NodePoolOption, error) {
	np = np.DeepCopy()
	np.Normalize()
	reqs, err := NodePoolRequirements(np)
	if err != nil {
		return NodePoolOption{}, err
	}
	var allowed []*cloud.InstanceType
	for _, it := range its {
		if reqs.Compatible(it.Requirements, definedByNodePool) != nil {
			continue
		}
		if len(it.Offerings.Compatible(reqs)) == 0 {
			continue
		}
		allowed = append(allowed, it)
	}
	return NodePoolOption{NodePool: np, Requirements: reqs, InstanceTypes: allowed, Remaining: remaining, DaemonSetPods: daemonSets}, nil
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
