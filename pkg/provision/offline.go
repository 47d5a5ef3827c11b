package provision

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/provision/simulation"
)

// OfflineInput is what `scheduler plan` reads: Kubernetes objects and an instance-type catalog; no cluster, no
// cloud.
type OfflineInput struct {
	Objects []runtime.Object
	Catalog *catalog.File
	// VMMemoryOverheadPercent as the plugin argument of the same name.
	VMMemoryOverheadPercent float64
	TimeBudget              time.Duration
}

// OfflineProblem is an offline input turned into a solver input, ready to solve (repeatedly, for benchmarks).
type OfflineProblem struct {
	Pods      []*corev1.Pod
	NodePools []NodePoolOption
	Nodes     []*corev1.Node
	Bound     map[string][]*corev1.Pod
	Region    string
}

// NewOfflineProblem collects NodePools, EC2NodeClasses, Pods, Nodes and DaemonSets from objects. Pods without a
// node are the ones to place; pods bound to a listed Node stay on it.
func NewOfflineProblem(in OfflineInput) (*OfflineProblem, error) {
	classes := map[string]*stevedorev1.EC2NodeClass{}
	var pools []*stevedorev1.NodePool
	var daemonSets []*corev1.Pod
	p := &OfflineProblem{Bound: map[string][]*corev1.Pod{}, Region: in.Catalog.Region}
	seen := map[types.UID]bool{}
	for _, obj := range in.Objects {
		switch o := obj.(type) {
		case *stevedorev1.NodePool:
			pools = append(pools, o)
		case *stevedorev1.EC2NodeClass:
			classes[o.Name] = o
		case *appsv1.DaemonSet:
			daemonSets = append(daemonSets, DaemonSetPod(o))
		case *corev1.Node:
			p.Nodes = append(p.Nodes, o)
		case *corev1.Pod:
			pod := o.DeepCopy()
			if pod.Namespace == "" {
				pod.Namespace = "default"
			}
			if pod.UID == "" {
				pod.UID = types.UID(pod.Namespace + "/" + pod.Name)
			}
			if seen[pod.UID] {
				return nil, fmt.Errorf("pod %s/%s appears twice", pod.Namespace, pod.Name)
			}
			seen[pod.UID] = true
			if pod.Spec.NodeName != "" {
				p.Bound[pod.Spec.NodeName] = append(p.Bound[pod.Spec.NodeName], pod)
				continue
			}
			p.Pods = append(p.Pods, pod)
		}
	}
	if len(pools) == 0 {
		return nil, fmt.Errorf("no NodePool in the input")
	}
	for _, np := range pools {
		model := cloud.DefaultOverheadModel()
		model.VMMemoryPercent = in.VMMemoryOverheadPercent
		if np.Spec.Template.Spec.NodeClassRef != nil {
			if nc, ok := classes[np.Spec.Template.Spec.NodeClassRef.Name]; ok {
				model.Kubelet = nc.Spec.Kubelet
			}
		}
		var its []*cloud.InstanceType
		for _, ct := range in.Catalog.InstanceTypes {
			it, err := cloud.NewInstanceType(ct, model, nil)
			if err != nil {
				return nil, err
			}
			its = append(its, it)
		}
		opt, err := NewNodePoolOption(np, its, remainingFromLimits(np), daemonSets)
		if err != nil {
			return nil, err
		}
		p.NodePools = append(p.NodePools, opt)
	}
	SortNodePools(p.NodePools)
	sort.SliceStable(p.Pods, func(i, j int) bool { return p.Pods[i].UID < p.Pods[j].UID })
	return p, nil
}

// remainingFromLimits is the NodePool's limits with nothing used yet.
func remainingFromLimits(np *stevedorev1.NodePool) corev1.ResourceList {
	if len(np.Spec.Limits) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range np.Spec.Limits {
		out[k] = v.DeepCopy()
	}
	return out
}

// Solve plans the problem with a fresh snapshot.
func (p *OfflineProblem) Solve(ctx context.Context, sim *simulation.Simulator, budget time.Duration) (*Plan, error) {
	return NewSolver(sim).Solve(ctx, p.Input(budget))
}

// Input is the solver input of the problem, on a fresh snapshot of its nodes.
func (p *OfflineProblem) Input(budget time.Duration) Input {
	return Input{Pods: p.Pods, NodePools: p.NodePools, Snapshot: p.Snapshot(), TimeBudget: budget, Region: p.Region}
}

// Snapshot returns the problem's existing nodes with their pods.
func (p *OfflineProblem) Snapshot() *simulation.Snapshot {
	snap := simulation.NewSnapshot()
	for _, n := range p.Nodes {
		snap.AddNode(n, p.Bound[n.Name]...)
	}
	return snap
}
