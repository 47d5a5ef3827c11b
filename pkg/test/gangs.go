/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package test

import (
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	"github.com/stevedore-dev/stevedore/pkg/gang"
)

// PodGroups is a fixed set of coscheduling PodGroups by gang, read as gang.Groups reads a lister.
type PodGroups map[gang.Key]*schedv1alpha1.PodGroup

// Get returns the gang's PodGroup, or a NotFound error.
func (g PodGroups) Get(key gang.Key) (*schedv1alpha1.PodGroup, error) {
	if pg, ok := g[key]; ok {
		return pg, nil
	}
	return nil, apierrors.NewNotFound(schedv1alpha1.Resource("podgroups"), key.Name)
}

// WorkloadPodGroups is a fixed set of the Workload API's PodGroups by group, read as gang.WorkloadGroups reads a
// lister.
type WorkloadPodGroups map[gang.Key]*schedulingv1beta1.PodGroup

// Get returns the group's PodGroup, or a NotFound error.
func (g WorkloadPodGroups) Get(key gang.Key) (*schedulingv1beta1.PodGroup, error) {
	if pg, ok := g[key]; ok {
		return pg, nil
	}
	return nil, apierrors.NewNotFound(schedulingv1beta1.Resource("podgroups"), key.Name)
}
