/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package gang

import (
	"context"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/klog/v2"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	schedlisters "github.com/stevedore-dev/stevedore/pkg/generated/listers/scheduling/v1alpha1"
)

// Served reports whether the API server serves coscheduling PodGroups. A failed discovery counts as served (the
// informer then retries, and logs why), so that a slow API server at start does not turn gangs off.
func Served(ctx context.Context, disc discovery.DiscoveryInterface) bool {
	resources, err := disc.ServerResourcesForGroupVersion(schedv1alpha1.SchemeGroupVersion.String())
	if err != nil {
		if meta.IsNoMatchError(err) || isNotFound(err) {
			klog.FromContext(ctx).Info("The cluster does not serve coscheduling PodGroups: pods labelled with a gang wait with an event saying so; install the PodGroup CRD (manifests/crds) to schedule gangs",
				"groupVersion", schedv1alpha1.SchemeGroupVersion.String())
			return false
		}
		return true
	}
	for _, r := range resources.APIResources {
		if r.Name == "podgroups" {
			return true
		}
	}
	return false
}

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

// WorkloadServed reports whether the API server serves the Workload API's PodGroups (scheduling.k8s.io/v1beta1,
// behind the GenericWorkload feature gate, off by default). A failed discovery counts as not served: an informer
// on an API that is not there would never sync.
func WorkloadServed(ctx context.Context, disc discovery.DiscoveryInterface) bool {
	resources, err := disc.ServerResourcesForGroupVersion(schedulingv1beta1.SchemeGroupVersion.String())
	if err != nil {
		if !meta.IsNoMatchError(err) && !isNotFound(err) {
			klog.FromContext(ctx).Error(err, "Discovering the Workload API failed: its PodGroups are not read until the scheduler restarts")
		}
		return false
	}
	for _, r := range resources.APIResources {
		if r.Name == "podgroups" {
			klog.FromContext(ctx).Info("The cluster serves the Workload API's PodGroups: pods whose PodGroup has a gang policy are planned and launched whole",
				"groupVersion", schedulingv1beta1.SchemeGroupVersion.String())
			return true
		}
	}
	return false
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
