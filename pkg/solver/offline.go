/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	resourcedefaults "k8s.io/kubernetes/pkg/apis/resource/v1"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/cloud/overlay"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// OfflineInput is what `scheduler plan` reads: Kubernetes objects and an instance-type catalog; no cluster, no
// cloud.
type OfflineInput struct {
	Objects []runtime.Object
	Catalog *catalog.File
	// VMMemoryOverheadPercent as the plugin argument of the same name.
	VMMemoryOverheadPercent float64
	TimeBudget              time.Duration
	// MinValuesBestEffort as the plugin argument minValuesPolicy: BestEffort.
	MinValuesBestEffort bool
}

// OfflineProblem is an offline input turned into a solver input, ready to solve (repeatedly, for benchmarks).
type OfflineProblem struct {
	Pods      []*corev1.Pod
	NodePools []NodePoolOption
	Nodes     []*corev1.Node
	Bound     map[string][]*corev1.Pod
	// DaemonSets are one pod per DaemonSet.
	DaemonSets []*corev1.Pod
	Region     string
	// NodeClasses are the input's EC2NodeClasses, by name.
	NodeClasses map[string]*stevedorev1.EC2NodeClass
	// ResourceClaims and DeviceClasses are what the pods that claim devices ask for.
	ResourceClaims []*resourceapi.ResourceClaim
	DeviceClasses  []*resourceapi.DeviceClass
	// Coverage is how the input's Commitments cover its on-demand Nodes: their room left is filled first.
	Coverage commitment.Coverage
}

// NewOfflineProblem collects NodePools, EC2NodeClasses, Pods, workloads (expanded into their pods by
// manifest.Expand), Nodes and DaemonSets from objects. Pods without a node are the ones to place; pods bound to a
// listed Node stay on it, and Nodes of a NodePool count against its limits. An object of another kind is an error
// naming it. The problem holds the given pods themselves, not copies (a cluster dump's pods are most of its
// memory), except those admission changes (manifest.Expand); neither it nor a solve modifies them.
func NewOfflineProblem(in OfflineInput) (*OfflineProblem, error) {
	objs, err := manifest.Expand(in.Objects)
	if err != nil {
		return nil, err
	}
	p := &OfflineProblem{Bound: map[string][]*corev1.Pod{}, Region: in.Catalog.Region}
	var read offlineObjects
	if err := read.collect(p, objs); err != nil {
		return nil, err
	}
	pools, classes := read.pools, read.classes
	p.NodeClasses = classes
	if len(pools) == 0 {
		return nil, fmt.Errorf("no NodePool in the input")
	}
	overlays := overlay.NewSet(read.overlays)
	for _, name := range slices.Sorted(maps.Keys(overlays.Problems)) {
		return nil, fmt.Errorf("NodeOverlay %s is not applied: %s", name, overlays.Problems[name])
	}
	sort.SliceStable(p.Nodes, func(i, j int) bool { return p.Nodes[i].Name < p.Nodes[j].Name })
	commitments, problems := commitment.CompileAll(read.commitments)
	for _, name := range slices.Sorted(maps.Keys(problems)) {
		return nil, fmt.Errorf("the Commitment %s cannot apply: %w", name, problems[name])
	}
	// the listed nodes use the commitments' room first, at the catalog's list price
	p.Coverage = commitment.Cover(commitments, commitment.NodeInstances(p.Nodes, in.Catalog.Pricer()))
	used := usedByNodePool(p.Nodes)
	for _, np := range pools {
		if np.Spec.Replicas != nil {
			continue // a static NodePool does not provision for pods
		}
		var nc *stevedorev1.EC2NodeClass
		if np.Spec.Template.Spec.NodeClassRef != nil {
			nc = classes[np.Spec.Template.Spec.NodeClassRef.Name]
		}
		its, err := cloud.CatalogInstanceTypes(in.Catalog, nc, in.VMMemoryOverheadPercent)
		if err != nil {
			return nil, err
		}
		its = commitment.Offer(overlays.Apply(np, its), p.Coverage)
		opt, err := NewNodePoolOption(np, its, RemainingLimits(np, used[np.Name]), p.DaemonSets, in.Catalog.Region)
		if err != nil {
			return nil, err
		}
		opt.MinValuesBestEffort = in.MinValuesBestEffort
		p.NodePools = append(p.NodePools, opt)
	}
	SortNodePools(p.NodePools)
	quotas, err := offlineQuotas(read.quotas, p.Nodes)
	if err != nil {
		return nil, err
	}
	AttachQuotas(p.NodePools, quotas)
	sort.SliceStable(p.Pods, func(i, j int) bool { return p.Pods[i].UID < p.Pods[j].UID })
	return p, nil
}

// offlineQuotas are the CapacityQuotas of an offline problem, by name, counting the problem's nodes (priced at 0).
func offlineQuotas(cqs []*autoscalingv1beta1.CapacityQuota, nodes []*corev1.Node) ([]*Quota, error) {
	sort.Slice(cqs, func(i, j int) bool { return cqs[i].Name < cqs[j].Name })
	out := make([]*Quota, 0, len(cqs))
	for _, cq := range cqs {
		sel, err := state.QuotaSelector(cq)
		if err != nil {
			return nil, err
		}
		out = append(out, NewQuota(cq, sel, state.QuotaUsage(cq, sel, nil, nodes, nil)))
	}
	return out, nil
}

// offlineObjects are the objects of an offline problem that are not its pods, nodes and DaemonSets.
type offlineObjects struct {
	pools    []*stevedorev1.NodePool
	classes  map[string]*stevedorev1.EC2NodeClass
	overlays []*stevedorev1.NodeOverlay
	quotas   []*autoscalingv1beta1.CapacityQuota
	// commitments are the Savings Plans and Reserved Instances whose room the plan fills first.
	commitments []*stevedorev1.Commitment
}

// collect sorts objs into p (pods, nodes, DaemonSets) and r; an object of a kind it does not read is an error.
func (r *offlineObjects) collect(p *OfflineProblem, objs []runtime.Object) error {
	r.classes = map[string]*stevedorev1.EC2NodeClass{}
	seen := map[types.UID]bool{}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *stevedorev1.NodePool:
			np := o.DeepCopy()
			np.Normalize() // as the live controllers read them
			r.pools = append(r.pools, np)
		case *stevedorev1.EC2NodeClass:
			r.classes[o.Name] = o
		case *stevedorev1.NodeOverlay:
			r.overlays = append(r.overlays, o)
		case *autoscalingv1beta1.CapacityQuota:
			r.quotas = append(r.quotas, o)
		case *stevedorev1.Commitment:
			r.commitments = append(r.commitments, o)
		case *appsv1.DaemonSet:
			p.DaemonSets = append(p.DaemonSets, DaemonSetPod(o))
		case *corev1.Node:
			p.Nodes = append(p.Nodes, o)
		case *corev1.Pod:
			if seen[o.UID] {
				return fmt.Errorf("pod %s/%s appears twice", o.Namespace, o.Name)
			}
			seen[o.UID] = true
			p.addPod(o)
		case *resourceapi.ResourceClaim:
			claim := o.DeepCopy()
			resourcedefaults.SetObjectDefaults_ResourceClaim(claim) // what the API server sets on create (allocationMode...)
			p.ResourceClaims = append(p.ResourceClaims, claim)
		case *resourceapi.DeviceClass:
			p.DeviceClasses = append(p.DeviceClasses, o)
		case *policyv1.PodDisruptionBudget, *resourceapi.ResourceClaimTemplate, *resourceapi.ResourceSlice:
			// read so that a cluster dump can be given as is: budgets do not change where pods go, a template's
			// claims are in the dump, and new nodes' devices come from their instance types
		default:
			return fmt.Errorf("%s: scheduler plan does not read this kind", manifest.Name(obj))
		}
	}
	return nil
}

// addPod adds a pod to the problem: to place when it has no node, bound to its node otherwise; a finished pod needs
// no node.
func (p *OfflineProblem) addPod(pod *corev1.Pod) {
	switch {
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
	case pod.Spec.NodeName != "":
		p.Bound[pod.Spec.NodeName] = append(p.Bound[pod.Spec.NodeName], pod)
	default:
		p.Pods = append(p.Pods, pod)
	}
}

// usedByNodePool sums the capacity (and counts the nodes) of the nodes of each NodePool, against its limits.
func usedByNodePool(nodes []*corev1.Node) map[string]corev1.ResourceList {
	used := map[string]corev1.ResourceList{}
	for _, n := range nodes {
		pool, ok := n.Labels[stevedorev1.LabelNodePool]
		if !ok {
			continue
		}
		u := used[pool]
		if u == nil {
			u = corev1.ResourceList{}
			used[pool] = u
		}
		for name, q := range n.Status.Capacity {
			sum := u[name]
			sum.Add(q)
			u[name] = sum
		}
		count := u[stevedorev1.ResourceNodes]
		count.Add(*resource.NewQuantity(1, resource.DecimalSI))
		u[stevedorev1.ResourceNodes] = count
	}
	return used
}

// Input is the solver input of the problem, on a fresh snapshot of its nodes.
// Existing nodes take pods first, as the scheduler would place them there before Stevedore is asked.
func (p *OfflineProblem) Input(budget time.Duration) Input {
	existing := make([]InFlightNode, 0, len(p.Nodes))
	for _, n := range p.Nodes {
		existing = append(existing, InFlightNode{Name: n.Name, NodePool: n.Labels[stevedorev1.LabelNodePool]})
	}
	return Input{Pods: p.Pods, NodePools: p.NodePools, Snapshot: p.Snapshot(), InFlight: existing, TimeBudget: budget, Region: p.Region}
}

// Snapshot returns the problem's existing nodes with their pods.
func (p *OfflineProblem) Snapshot() *simulation.Snapshot {
	snap := simulation.NewSnapshot()
	for _, n := range p.Nodes {
		snap.AddNode(n, p.Bound[n.Name]...)
	}
	return snap
}
