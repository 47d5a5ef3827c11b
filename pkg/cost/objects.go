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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/cloud/offline"
	"github.com/stevedore-dev/stevedore/pkg/cloud/overlay"
	"github.com/stevedore-dev/stevedore/pkg/commitment"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// FromObjects attributes the cost of a cluster given as objects (a dump, or what Live read): NodePools,
// EC2NodeClasses, NodeOverlays, NodeClaims, Nodes and Pods, priced from the catalog with the NodeOverlays applied;
// nodes Stevedore did not launch at the catalog's list price, from their labels. With Commitments, the report
// says how they cover the on-demand nodes (a Commitment that cannot apply is an error naming it).
// DaemonSets and PodDisruptionBudgets are accepted and not needed; another kind is an error naming the object.
// unpriced lists the nodes left out, with why.
func FromObjects(ctx context.Context, objs []runtime.Object, cat *catalog.File) (r *Report, unpriced []string, err error) {
	var kept []runtime.Object
	var commitments []*stevedorev1.Commitment
	for _, obj := range objs {
		switch o := obj.(type) {
		case *stevedorev1.NodePool, *stevedorev1.EC2NodeClass, *stevedorev1.NodeOverlay, *stevedorev1.NodeClaim, *corev1.Node, *corev1.Pod:
			kept = append(kept, obj)
		case *stevedorev1.Commitment:
			commitments = append(commitments, o)
		case *appsv1.DaemonSet, *policyv1.PodDisruptionBudget:
		default:
			return nil, nil, fmt.Errorf("%s: scheduler cost does not read this kind (it reads NodePools, EC2NodeClasses, NodeOverlays, "+
				"Commitments, NodeClaims, Nodes and Pods)", manifest.Name(obj))
		}
	}
	compiled, problems := commitment.CompileAll(commitments)
	for _, c := range commitments {
		if err, ok := problems[c.Name]; ok {
			return nil, nil, fmt.Errorf("the Commitment %s cannot apply: %w", c.Name, err)
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
	r = Attribute(priced)
	if len(compiled) > 0 {
		cov := commitment.Cover(compiled, commitment.Instances(claims, nodes, cat.Pricer()))
		r.Commitments = &cov
	}
	return r, unpriced, nil
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
		{"Commitments", func() (runtime.Object, error) {
			list, err := stevedore.StevedoreV1().Commitments().List(ctx, opts)
			if apierrors.IsNotFound(err) {
				return &stevedorev1.CommitmentList{}, nil // their CRD is not installed: none are declared
			}
			return list, err
		}},
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
