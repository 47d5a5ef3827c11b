/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package dryrun runs one disruption pass offline over a dump of a cluster (`scheduler plan --disrupt`): the live
// loop's controller over listers of the objects given, with the instance-type catalog in place of the cloud.
package dryrun

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	awscloud "github.com/stevedore-dev/stevedore/pkg/cloud/aws"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/cloud/offline"
	"github.com/stevedore-dev/stevedore/pkg/cloud/overlay"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/solver/simulation"
	"github.com/stevedore-dev/stevedore/pkg/state"
	"github.com/stevedore-dev/stevedore/pkg/surge"
)

// Options are the settings of a dry run besides the objects: the instance-type catalog, and the plugin arguments
// (those that change decisions: vmMemoryOverheadPercent, minValuesPolicy, spotToSpotConsolidation; unset ones
// take their defaults, the region is the catalog's).
type Options struct {
	Catalog *catalog.File
	Args    config.ProvisionerArgs
}

// readable returns the objects of the kinds the dry run reads; another kind is an error naming the object.
func readable(objs []runtime.Object) ([]runtime.Object, error) {
	var kept []runtime.Object
	for _, obj := range objs {
		switch obj.(type) {
		case *stevedorev1.NodePool, *stevedorev1.EC2NodeClass, *stevedorev1.NodeOverlay, *stevedorev1.Commitment, *stevedorev1.NodeClaim, *corev1.Node,
			*corev1.Pod, *appsv1.DaemonSet, *policyv1.PodDisruptionBudget, *appsv1.Deployment, *appsv1.ReplicaSet,
			*autoscalingv2.HorizontalPodAutoscaler:
			kept = append(kept, obj)
		default:
			return nil, fmt.Errorf("%s: scheduler plan --disrupt does not read this kind (it reads NodePools, EC2NodeClasses, "+
				"NodeOverlays, Commitments, NodeClaims, Nodes, Pods, DaemonSets, PodDisruptionBudgets, Deployments, ReplicaSets and "+
				"HorizontalPodAutoscalers)", manifest.Name(obj))
		}
	}
	return kept, nil
}

// appliedOverlays lists the NodeOverlays; one that would not be applied is an error saying why.
func appliedOverlays(l *state.Listers) ([]*stevedorev1.NodeOverlay, error) {
	overlays, err := l.NodeOverlays.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	if set := overlay.NewSet(overlays); len(set.Problems) > 0 {
		for _, o := range overlays {
			if why, ok := set.Problems[o.Name]; ok {
				return nil, fmt.Errorf("NodeOverlay %s is not applied: %s", o.Name, why)
			}
		}
	}
	return overlays, nil
}

// Run builds the disruption controller over the objects (listers over them, the catalog in place of the cloud)
// and runs one pass without acting. It reads NodePools, EC2NodeClasses, NodeOverlays, Commitments, NodeClaims, Nodes, Pods,
// DaemonSets, PodDisruptionBudgets, and the Deployments, ReplicaSets and HorizontalPodAutoscalers that say which
// pods would move by Surge (with no ReplicaSet in the input, every pod is previewed as evicted); an object of
// another kind is an error naming it.
func Run(ctx context.Context, objs []runtime.Object, in Options) (*disruption.DryRunResult, error) {
	kept, err := readable(objs)
	if err != nil {
		return nil, err
	}
	l, err := state.NewListers(kept...)
	if err != nil {
		return nil, err
	}
	pools, err := l.NodePools.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	if len(pools) == 0 {
		return nil, errors.New("no NodePool in the input")
	}
	classes := map[string]*stevedorev1.EC2NodeClass{}
	ncs, err := l.EC2NodeClasses.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, nc := range ncs {
		classes[nc.Name] = nc
	}
	overlays, err := appliedOverlays(l)
	if err != nil {
		return nil, err
	}
	args := in.Args
	args.Region = in.Catalog.Region
	args.DisableDisruption = false // the dry run is of the voluntary methods too
	args = args.Defaults(nil)
	base, err := offline.New(offline.Options{Catalog: in.Catalog, NodeClasses: classes, VMMemoryOverheadPercent: *args.VMMemoryOverheadPercent,
		NodeClassHash: awscloud.NodeClassHash})
	if err != nil {
		return nil, err
	}
	provider := overlay.NewProvider(base, l.NodeOverlays)
	provSim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		return nil, err
	}
	prov := provision.New(provision.Options{Args: args, SchedulerName: "stevedore",
		Nodes: l.Nodes, Pods: l.Pods, DaemonSets: l.DaemonSets, NodeClaims: l.NodeClaims, NodePools: l.NodePools, Cloud: provider,
		Simulator: provSim, Commitments: l.Commitments,
		NodeClassHash: func(_ context.Context, ref *stevedorev1.NodeClassReference) string {
			if nc, ok := classes[ref.Name]; ok {
				return awscloud.NodeClassHash(nc)
			}
			return ""
		}})
	sim, err := simulation.New(ctx, simulation.NewSnapshot(), simulation.Options{})
	if err != nil {
		return nil, err
	}
	// the pods' owners, when the input has them, say which pods would surge; without any, every pod is evicted
	var surger *surge.Surger
	if rss, err := l.ReplicaSets.List(labels.Everything()); err == nil && len(rss) > 0 {
		surger = surge.New(surge.Options{Pods: l.Pods, ReplicaSets: l.ReplicaSets, Deployments: l.Deployments, HPAs: l.HPAs})
	}
	d := disruption.New(disruption.Options{Nodes: l.Nodes, Pods: l.Pods, PDBs: l.PDBs, NodeClaims: l.NodeClaims, NodePools: l.NodePools,
		Provisioner: prov, Cloud: provider, Simulator: sim, Args: args, DryRun: true, Surge: surger, Coverage: prov.Coverage,
		OverlaidTypes: func(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, bool) {
			if len(overlays) == 0 {
				return nil, false
			}
			its, err := provider.InstanceTypes(ctx, np)
			return its, err == nil
		}})
	return d.DryRun(ctx)
}
