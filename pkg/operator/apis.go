/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package operator

import (
	"context"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	autoscalingv1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1"
	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/client"
)

// optionalAPI is an API the cluster may not serve (its CRD not installed, its feature gate off), and the informers
// the controllers read from it where it does.
type optionalAPI struct {
	gvr schema.GroupVersionResource
	// enabled: the arguments leave the API to Stevedore (CapacityBuffers and CapacityQuotas may be left to another
	// autoscaler).
	enabled bool
	// servedOnError: a discovery that fails for another reason than the API being absent counts as served (the
	// informer's errors then say what is wrong), rather than as absent (an API behind a feature gate that is off by
	// default, whose informer would never sync).
	servedOnError bool
	// absent is logged where the cluster does not serve the API, present where it does ("": nothing).
	absent, present string
	// register asks the factories for the API's informers, keeps them in the set, and returns them.
	register func(in *informerSet) []cache.SharedIndexInformer
}

// optionalAPIs are the APIs the controllers read where the cluster serves them.
func optionalAPIs(args config.ProvisionerArgs) []optionalAPI {
	return []optionalAPI{{
		gvr:     schedv1alpha1.SchemeGroupVersion.WithResource("podgroups"),
		enabled: true, servedOnError: true,
		absent: "The cluster does not serve coscheduling PodGroups: pods labelled with a gang wait with an event saying so; " +
			"install the PodGroup CRD (manifests/crds) to schedule gangs",
		register: func(in *informerSet) []cache.SharedIndexInformer {
			in.podGroups = in.sf.Coscheduling().V1alpha1().PodGroups()
			return []cache.SharedIndexInformer{in.podGroups.Informer()}
		},
	}, {
		gvr:     schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups"),
		enabled: true,
		present: "The cluster serves the Workload API's PodGroups: pods whose PodGroup has a gang policy are planned and launched whole",
		register: func(in *informerSet) []cache.SharedIndexInformer {
			in.workloadGroups = in.kf.Scheduling().V1beta1().PodGroups()
			return []cache.SharedIndexInformer{in.workloadGroups.Informer()}
		},
	}, {
		gvr:     autoscalingv1.SchemeGroupVersion.WithResource("provisioningrequests"),
		enabled: true, servedOnError: true,
		absent: "The cluster does not serve ProvisioningRequests: install their CRD (manifests/crds) for Kueue's ProvisioningRequest admission check",
		register: func(in *informerSet) []cache.SharedIndexInformer {
			in.requests, in.templates = in.sf.AutoscalingX().V1().ProvisioningRequests(), in.kf.Core().V1().PodTemplates()
			return []cache.SharedIndexInformer{in.requests.Informer(), in.templates.Informer()}
		},
	}, {
		gvr:     autoscalingv1beta1.SchemeGroupVersion.WithResource("capacitybuffers"),
		enabled: *args.SharedCapacityBuffers, servedOnError: true,
		absent: "The cluster does not serve autoscaling.x-k8s.io CapacityBuffers: install their CRD (manifests/crds) to use them",
		register: func(in *informerSet) []cache.SharedIndexInformer {
			in.sharedBuffers = in.sf.AutoscalingX().V1beta1().CapacityBuffers()
			return []cache.SharedIndexInformer{in.sharedBuffers.Informer()}
		},
	}, {
		gvr:     stevedorev1.SchemeGroupVersion.WithResource("commitments"),
		enabled: true, servedOnError: true,
		absent: "The cluster does not serve Commitments: install their CRD (the stevedore-crd chart, manifests/crds) to declare Savings Plans and Reserved Instances",
		register: func(in *informerSet) []cache.SharedIndexInformer {
			in.commitments = in.sf.Stevedore().V1().Commitments()
			return []cache.SharedIndexInformer{in.commitments.Informer()}
		},
	}, {
		gvr:     autoscalingv1beta1.SchemeGroupVersion.WithResource("capacityquotas"),
		enabled: *args.SharedCapacityQuotas, servedOnError: true,
		absent: "The cluster does not serve autoscaling.x-k8s.io CapacityQuotas: install their CRD (manifests/crds) to use them",
		register: func(in *informerSet) []cache.SharedIndexInformer {
			in.quotas = in.sf.AutoscalingX().V1beta1().CapacityQuotas()
			return []cache.SharedIndexInformer{in.quotas.Informer()}
		},
	}}
}

// registerOptional registers the informers of the enabled APIs the cluster serves, and logs what it decided.
func (in *informerSet) registerOptional(ctx context.Context, shared *client.Shared, disc discovery.DiscoveryInterface, apis []optionalAPI) {
	logger := klog.FromContext(ctx)
	for _, api := range apis {
		if !api.enabled {
			continue
		}
		served, err := shared.Served(disc, api.gvr, api.servedOnError)
		if err != nil {
			logger.Error(err, "Discovering an optional API failed", "resource", api.gvr.Resource, "groupVersion", api.gvr.GroupVersion().String(),
				"served", served)
		}
		if !served {
			if api.absent != "" {
				logger.Info(api.absent, "groupVersion", api.gvr.GroupVersion().String())
			}
			continue
		}
		if api.present != "" {
			logger.Info(api.present, "groupVersion", api.gvr.GroupVersion().String())
		}
		in.optional = append(in.optional, api.register(in)...)
	}
}
