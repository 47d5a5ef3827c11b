/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package state

import (
	"k8s.io/apimachinery/pkg/labels"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
)

// NormalizedNodePools wraps a NodePool lister so that every reader sees NodePools in their canonical form
// (stevedorev1.NodePool.Normalize: older spellings read as the current ones, defaults filled in): the one place the
// controllers' NodePools are normalised. The objects are copies; the cache is left as it is.
func NormalizedNodePools(l listers.NodePoolLister) listers.NodePoolLister { return normalizedPools{l} }

type normalizedPools struct{ listers.NodePoolLister }

func (n normalizedPools) List(selector labels.Selector) ([]*stevedorev1.NodePool, error) {
	list, err := n.NodePoolLister.List(selector)
	if err != nil {
		return nil, err
	}
	out := make([]*stevedorev1.NodePool, len(list))
	for i, np := range list {
		out[i] = normalized(np)
	}
	return out, nil
}

func (n normalizedPools) Get(name string) (*stevedorev1.NodePool, error) {
	np, err := n.NodePoolLister.Get(name)
	if err != nil {
		return nil, err
	}
	return normalized(np), nil
}

func normalized(np *stevedorev1.NodePool) *stevedorev1.NodePool {
	cp := np.DeepCopy()
	cp.Normalize()
	return cp
}
