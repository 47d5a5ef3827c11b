/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package state

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
)

// Listers read a fixed set of objects the way controllers read informer caches (tests, and the offline
// commands that read a cluster dump). NodePools are normalised, as
// the operator wires them.
type Listers struct {
	Nodes      corelisters.NodeLister
	Pods       corelisters.PodLister
	DaemonSets appslisters.DaemonSetLister
	PDBs       policylisters.PodDisruptionBudgetLister
	// Deployments, ReplicaSets and HPAs are what a surge reads of the pods' owners.
	Deployments appslisters.DeploymentLister
	ReplicaSets appslisters.ReplicaSetLister
	HPAs        autoscalinglisters.HorizontalPodAutoscalerLister
	NodeClaims  listers.NodeClaimLister
	NodePools   listers.NodePoolLister
	// NodeOverlays, EC2NodeClasses and Commitments are listed as given.
	NodeOverlays   listers.NodeOverlayLister
	EC2NodeClasses listers.EC2NodeClassLister
	Commitments    listers.CommitmentLister

	indexers map[string]cache.Indexer
}

// NewListers returns listers over objs; it fails on an object of a kind it does not serve.
func NewListers(objs ...runtime.Object) (*Listers, error) {
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	l := &Listers{indexers: map[string]cache.Indexer{"Node": idx(), "Pod": idx(), "DaemonSet": idx(),
		"PodDisruptionBudget": idx(), "NodeClaim": idx(), "NodePool": idx(), "NodeOverlay": idx(), "EC2NodeClass": idx(), "Commitment": idx(),
		"Deployment": idx(), "ReplicaSet": idx(), "HorizontalPodAutoscaler": idx()}}
	l.Nodes = corelisters.NewNodeLister(l.indexers["Node"])
	l.Pods = corelisters.NewPodLister(l.indexers["Pod"])
	l.DaemonSets = appslisters.NewDaemonSetLister(l.indexers["DaemonSet"])
	l.PDBs = policylisters.NewPodDisruptionBudgetLister(l.indexers["PodDisruptionBudget"])
	l.Deployments = appslisters.NewDeploymentLister(l.indexers["Deployment"])
	l.ReplicaSets = appslisters.NewReplicaSetLister(l.indexers["ReplicaSet"])
	l.HPAs = autoscalinglisters.NewHorizontalPodAutoscalerLister(l.indexers["HorizontalPodAutoscaler"])
	l.NodeClaims = listers.NewNodeClaimLister(l.indexers["NodeClaim"])
	l.NodePools = NormalizedNodePools(listers.NewNodePoolLister(l.indexers["NodePool"]))
	l.NodeOverlays = listers.NewNodeOverlayLister(l.indexers["NodeOverlay"])
	l.EC2NodeClasses = listers.NewEC2NodeClassLister(l.indexers["EC2NodeClass"])
	l.Commitments = listers.NewCommitmentLister(l.indexers["Commitment"])
	for _, o := range objs {
		if err := l.Add(o); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Add puts an object into (or replaces it in) its lister.
func (l *Listers) Add(obj runtime.Object) error {
	kind, err := kindOf(obj)
	if err != nil {
		return err
	}
	return l.indexers[kind].Update(obj)
}

// Delete removes an object from its lister.
func (l *Listers) Delete(obj runtime.Object) error {
	kind, err := kindOf(obj)
	if err != nil {
		return err
	}
	return l.indexers[kind].Delete(obj)
}

func kindOf(obj runtime.Object) (string, error) {
	switch obj.(type) {
	case *corev1.Node:
		return "Node", nil
	case *corev1.Pod:
		return "Pod", nil
	case *appsv1.DaemonSet:
		return "DaemonSet", nil
	case *appsv1.Deployment:
		return "Deployment", nil
	case *appsv1.ReplicaSet:
		return "ReplicaSet", nil
	case *autoscalingv2.HorizontalPodAutoscaler:
		return "HorizontalPodAutoscaler", nil
	case *policyv1.PodDisruptionBudget:
		return "PodDisruptionBudget", nil
	case *stevedorev1.NodeClaim:
		return "NodeClaim", nil
	case *stevedorev1.NodePool:
		return "NodePool", nil
	case *stevedorev1.NodeOverlay:
		return "NodeOverlay", nil
	case *stevedorev1.EC2NodeClass:
		return "EC2NodeClass", nil
	case *stevedorev1.Commitment:
		return "Commitment", nil
	default:
		return "", fmt.Errorf("%T is not a kind these listers serve", obj)
	}
}
