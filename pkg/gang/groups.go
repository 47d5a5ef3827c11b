/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package gang

import (
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	schedlisters "github.com/stevedore-dev/stevedore/pkg/generated/listers/scheduling/v1alpha1"
)

// ListerGroups adapts a PodGroup lister.
type ListerGroups struct{ Lister schedlisters.PodGroupLister }

// Get returns the gang's PodGroup.
func (g ListerGroups) Get(key Key) (*schedv1alpha1.PodGroup, error) {
	return g.Lister.PodGroups(key.Namespace).Get(key.Name)
}

// WorkloadListerGroups adapts a lister of the Workload API's PodGroups.
type WorkloadListerGroups struct {
	Lister schedulinglisters.PodGroupLister
}

// Get returns the group's PodGroup.
func (g WorkloadListerGroups) Get(key Key) (*schedulingv1beta1.PodGroup, error) {
	return g.Lister.PodGroups(key.Namespace).Get(key.Name)
}
