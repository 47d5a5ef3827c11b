/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package nodeclaim holds what the NodeClaim controllers share: finding a NodeClaim's Node. Its subpackages are
// the phases of a NodeClaim's life that run on their own (termination).
package nodeclaim

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// NodeOf returns the Node of a NodeClaim (by name when its provider ID agrees, else by provider ID), or nil.
func NodeOf(nodes corelisters.NodeLister, claim *stevedorev1.NodeClaim) *corev1.Node {
	if claim.Status.NodeName != "" {
		if n, err := nodes.Get(claim.Status.NodeName); err == nil && (claim.Status.ProviderID == "" || n.Spec.ProviderID == claim.Status.ProviderID) {
			return n
		}
	}
	if claim.Status.ProviderID == "" {
		return nil
	}
	list, _ := nodes.List(labels.Everything())
	for _, n := range list {
		if n.Spec.ProviderID == claim.Status.ProviderID {
			return n
		}
	}
	return nil
}
