/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package overlay

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// Lister lists NodeOverlays (the informer's lister).
type Lister interface {
	List(selector labels.Selector) ([]*stevedorev1.NodeOverlay, error)
}

// Provider is a cloud provider whose instance types carry the NodeOverlays in force.
type Provider struct {
	cloud.Provider
	overlays Lister
}

// NewProvider wraps a cloud provider.
func NewProvider(p cloud.Provider, overlays Lister) *Provider {
	return &Provider{Provider: p, overlays: overlays}
}

// InstanceTypes returns the NodePool's instance types with the NodeOverlays applied.
func (p *Provider) InstanceTypes(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, error) {
	its, err := p.Provider.InstanceTypes(ctx, np)
	if err != nil {
		return nil, err
	}
	list, err := p.overlays.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return NewSet(list).Apply(np, its), nil
}

// CollectLaunchTemplates is the wrapped provider's, when it keeps launch templates (the garbage collector finds it
// through the wrapper).
func (p *Provider) CollectLaunchTemplates(ctx context.Context) (int, error) {
	if lc, ok := p.Provider.(cloud.LaunchTemplateCollector); ok {
		return lc.CollectLaunchTemplates(ctx)
	}
	return 0, nil
}

// CollectPlacementGroups is the wrapped provider's, when it creates placement groups.
func (p *Provider) CollectPlacementGroups(ctx context.Context) (int, error) {
	if pc, ok := p.Provider.(cloud.PlacementGroupCollector); ok {
		return pc.CollectPlacementGroups(ctx)
	}
	return 0, nil
}
