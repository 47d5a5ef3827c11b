/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package offline is a cloud.Provider that answers from an instance-type catalog and the EC2NodeClasses given,
// for the commands that decide without a cloud (`scheduler plan --disrupt`): instance types and prices from the
// catalog, drift by the node class hash only, and every call that would act on an instance refused.
package offline

import (
	"context"
	"errors"
	"fmt"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

// ErrOffline is returned by every call that would act on an instance.
var ErrOffline = errors.New("no cloud: an offline provider launches, reads and terminates nothing")

// Options configure the provider.
type Options struct {
	Catalog *catalog.File
	// NodeClasses are the EC2NodeClasses, by name: their kubelet settings and instance-store policy size the
	// instance types of the NodePools that use them.
	NodeClasses map[string]*stevedorev1.EC2NodeClass
	// VMMemoryOverheadPercent as the plugin argument of the same name.
	VMMemoryOverheadPercent float64
	// NodeClassHash, when set, hashes a node class as the live provider does: a NodeClaim whose recorded hash
	// differs has drifted (NodeClassDrift). AMI drift needs the cloud and is not detected.
	NodeClassHash func(*stevedorev1.EC2NodeClass) string
}

// Provider is the offline provider.
type Provider struct {
	opts Options
}

// New returns an offline provider.
func New(opts Options) (*Provider, error) {
	if opts.Catalog == nil {
		return nil, errors.New("offline provider: no catalog")
	}
	return &Provider{opts: opts}, nil
}

var _ cloud.Provider = (*Provider)(nil)

// InstanceTypes returns the catalog's types sized under the NodePool's node class.
func (p *Provider) InstanceTypes(_ context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, error) {
	return cloud.CatalogInstanceTypes(p.opts.Catalog, p.nodeClass(np.Spec.Template.Spec.NodeClassRef), p.opts.VMMemoryOverheadPercent)
}

// IsDrifted compares the NodeClaim's recorded node class hash with the node class's.
func (p *Provider) IsDrifted(_ context.Context, claim *stevedorev1.NodeClaim) (string, error) {
	nc := p.nodeClass(claim.Spec.NodeClassRef)
	if nc == nil || p.opts.NodeClassHash == nil {
		return "", nil
	}
	if h := claim.Annotations[stevedorev1.AnnotationNodeClassHash]; h != "" && h != p.opts.NodeClassHash(nc) {
		return "NodeClassDrift", nil
	}
	return "", nil
}

func (p *Provider) nodeClass(ref *stevedorev1.NodeClassReference) *stevedorev1.EC2NodeClass {
	if ref == nil {
		return nil
	}
	return p.opts.NodeClasses[ref.Name]
}

// Create refuses: nothing is launched offline.
func (p *Provider) Create(_ context.Context, claim *stevedorev1.NodeClaim) (*cloud.Instance, error) {
	return nil, fmt.Errorf("launching NodeClaim %s: %w", claim.Name, ErrOffline)
}

// Delete refuses.
func (p *Provider) Delete(_ context.Context, id string) error {
	return fmt.Errorf("terminating %s: %w", id, ErrOffline)
}

// Reboot refuses.
func (p *Provider) Reboot(_ context.Context, id string) error {
	return fmt.Errorf("rebooting %s: %w", id, ErrOffline)
}

// Get refuses.
func (p *Provider) Get(_ context.Context, id string) (*cloud.Instance, error) {
	return nil, fmt.Errorf("reading %s: %w", id, ErrOffline)
}

// List refuses.
func (p *Provider) List(context.Context) ([]*cloud.Instance, error) {
	return nil, fmt.Errorf("listing instances: %w", ErrOffline)
}

// MarkUnavailable does nothing: offline offerings do not change.
func (p *Provider) MarkUnavailable(string, string, string, string) {}
