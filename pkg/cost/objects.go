/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package cost

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/cloud/offline"
	"github.com/stevedore-dev/stevedore/pkg/cloud/overlay"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// FromObjects attributes the cost of a cluster given as objects (a dump, or what Live read): NodePools,
// EC2NodeClasses, NodeOverlays, NodeClaims, Nodes and Pods, priced from the catalog with the NodeOverlays applied;
// nodes Stevedore did not launch at the catalog's list price, from their labels.
// DaemonSets and PodDisruptionBudgets are accepted and not needed; another kind is an error naming the object.
// unpriced lists the nodes left out, with why.
func FromObjects(ctx context.Context, objs []runtime.Object, cat *catalog.File) (r *Report, unpriced []string, err error) {
	var kept []runtime.Object
	for _, obj := range objs {
		switch obj.(type) {
		case *stevedorev1.NodePool, *stevedorev1.EC2NodeClass, *stevedorev1.NodeOverlay, *stevedorev1.NodeClaim, *corev1.Node, *corev1.Pod:
			kept = append(kept, obj)
		case *appsv1.DaemonSet, *policyv1.PodDisruptionBudget:
		default:
			return nil, nil, fmt.Errorf("%s: scheduler cost does not read this kind (it reads NodePools, EC2NodeClasses, NodeOverlays, "+
				"NodeClaims, Nodes and Pods)", manifest.Name(obj))
		}
	}
	l, err := state.NewListers(kept...)
	if err != nil {
		return nil, nil, err
	}
	classes := map[string]*stevedorev1.EC2NodeClass{}
	ncs, _ := l.EC2NodeClasses.List(labels.Everything())
	for _, nc := range ncs {
		classes[nc.Name] = nc
	}
	base, err := offline.New(offline.Options{Catalog: cat, NodeClasses: classes})
	if err != nil {
		return nil, nil, err
	}
	pools, _ := l.NodePools.List(labels.Everything())
	nodes, _ := l.Nodes.List(labels.Everything())
	claims, _ := l.NodeClaims.List(labels.Everything())
	pods, _ := l.Pods.List(labels.Everything())
	book := NewPriceBook(overlay.NewProvider(base, l.NodeOverlays), pools).PricingOthers(cat.Pricer())
	priced, unpriced := Collect(ctx, book, nodes, claims, pods)
	return Attribute(priced), unpriced, nil
}

// Live reads the objects FromObjects needs from a cluster.
func Live(ctx context.Context, kube kubernetes.Interface, stevedore versioned.Interface) ([]runtime.Object, error) {
	opts := metav1.ListOptions{}
	kinds := []struct {
		name string
		list func() (runtime.Object, error)
	}{
		{"NodePools", func() (runtime.Object, error) { return stevedore.StevedoreV1().NodePools().List(ctx, opts) }},
		{"EC2NodeClasses", func() (runtime.Object, error) { return stevedore.StevedoreV1().EC2NodeClasses().List(ctx, opts) }},
		{"NodeOverlays", func() (runtime.Object, error) { return stevedore.StevedoreV1().NodeOverlays().List(ctx, opts) }},
		{"NodeClaims", func() (runtime.Object, error) { return stevedore.StevedoreV1().NodeClaims().List(ctx, opts) }},
		{"Nodes", func() (runtime.Object, error) { return kube.CoreV1().Nodes().List(ctx, opts) }},
		{"Pods", func() (runtime.Object, error) { return kube.CoreV1().Pods("").List(ctx, opts) }},
	}
	var out []runtime.Object
	for _, kind := range kinds {
		list, err := kind.list()
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind.name, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind.name, err)
		}
		out = append(out, items...)
	}
	return out, nil
}
