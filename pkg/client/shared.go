/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package client

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/stevedore-dev/stevedore/pkg/generated/informers/externalversions"
)

// Shared is what the parts of one scheduler process share about the APIs beyond Kubernetes' own: one factory of
// informers on Stevedore's resources and the coscheduling and autoscaling APIs it serves, so that the plugins and
// the controllers watch each kind once, and one answer per API to whether the cluster serves it, so that they never
// disagree. The zero value is ready to use.
type Shared struct {
	mu      sync.Mutex
	factory externalversions.SharedInformerFactory
	served  map[schema.GroupVersionResource]bool
}

// Informers returns the shared factory, built from cfg on the first call (later calls' cfg is not read: one
// process talks to one API server). Its informers drop their objects' managed fields.
func (s *Shared) Informers(cfg *rest.Config) (externalversions.SharedInformerFactory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.factory == nil {
		cs, err := NewStevedore(cfg)
		if err != nil {
			return nil, fmt.Errorf("client for Stevedore's resources: %w", err)
		}
		s.factory = externalversions.NewSharedInformerFactoryWithOptions(cs, 0, externalversions.WithTransform(TrimManagedFields))
	}
	return s.factory, nil
}

// Served reports whether the cluster serves resource gvr, asking discovery the first time only: the answer holds for
// the life of the process. A discovery that fails for another reason than the API being absent counts as served
// when servedOnError (the informer's errors then say what is wrong) and as absent otherwise (an API behind a feature
// gate that is off by default, whose informer would never sync); err is that failure, returned on the first call.
func (s *Shared) Served(disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource, servedOnError bool) (served bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if served, known := s.served[gvr]; known {
		return served, nil
	}
	served, err = Discover(disc, gvr.GroupVersion(), gvr.Resource)
	if err != nil {
		served = servedOnError
	}
	if s.served == nil {
		s.served = map[schema.GroupVersionResource]bool{}
	}
	s.served[gvr] = served
	return served, err
}

// TrimManagedFields drops an object's managed fields as it enters an informer's cache: nothing in Stevedore reads
// them, and in a cluster of thousands of nodes and NodeClaims they are a large share of the heap the garbage
// collector walks.
func TrimManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}
