/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package schedulerapp

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// gatedAPI is a scheduler feature gate and an API it makes the scheduler list and watch. An informer of an API
// the server does not serve never syncs, and the scheduler waits for it for ever before it schedules anything.
type gatedAPI struct {
	gate     featuregate.Feature
	api      schema.GroupVersionResource
	required string // what the API is, for messages
}

// gatedAPIs are the APIs kube-scheduler 1.37 watches under a feature gate that API servers of older minors (or
// newer ones with the API off) do not serve.
func gatedAPIs() []gatedAPI {
	return []gatedAPI{
		{features.DynamicResourceAllocation, schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"},
			"dynamic resource allocation (Kubernetes 1.34 or newer)"},
		{features.DRADeviceTaintRules, schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "devicetaintrules"},
			"DRA device taint rules (Kubernetes 1.37 or newer)"},
		{features.GenericWorkload, schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"},
			"the Workload API's PodGroups (Kubernetes 1.37 or newer, with scheduling.k8s.io/v1beta1 and GenericWorkload on in the API server)"},
		{features.CompositePodGroup, schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1alpha3", Resource: "compositepodgroups"},
			"composite PodGroups (scheduling.k8s.io/v1alpha3)"},
		{features.CoordinatedLeaderElection, schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1beta1", Resource: "leasecandidates"},
			"coordinated leader election (coordination.k8s.io/v1beta1)"},
	}
}

// gateChange is what fitGates decided for one gate.
type gateChange struct {
	gate featuregate.Feature
	api  schema.GroupVersionResource
}

// fitGates turns off, in fg, each feature on by default whose API the server does not serve (served says which
// it does), and returns what it turned off. A feature whose API is missing is an error when it cannot be turned
// off: locked on, or turned on by the user (--feature-gates) although it is off by default.
func fitGates(fg featuregate.MutableFeatureGate, served func(schema.GroupVersionResource) (bool, error)) ([]gateChange, error) {
	specs := fg.GetAll()
	var off []gateChange
	for _, g := range gatedAPIs() {
		if !fg.Enabled(g.gate) {
			continue
		}
		ok, err := served(g.api)
		if err != nil {
			return nil, err
		}
		if ok {
			continue
		}
		spec := specs[g.gate]
		switch {
		case spec.LockToDefault:
			return nil, fmt.Errorf("the API server does not serve %s (%s), which this scheduler needs: Stevedore runs against "+
				"Kubernetes 1.34 or newer", formatGVR(g.api), g.required)
		case !spec.Default:
			return nil, fmt.Errorf("--feature-gates turns %s on, but the API server does not serve %s, %s: turn the gate off or "+
				"enable the API in the API server", g.gate, formatGVR(g.api), g.required)
		}
		off = append(off, gateChange{gate: g.gate, api: g.api})
	}
	if len(off) == 0 {
		return nil, nil
	}
	m := map[string]bool{}
	for _, c := range off {
		m[string(c.gate)] = false
	}
	if err := fg.SetFromMap(m); err != nil {
		return nil, fmt.Errorf("turning off the features the API server does not serve: %w", err)
	}
	return off, nil
}

func formatGVR(gvr schema.GroupVersionResource) string {
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}

// fitGatesToServer reads from the API server (at kubeconfig, or in-cluster when empty; master overrides its
// address) which APIs it serves, and fits the process's feature gates to it (fitGates). It logs the server's
// version and each gate it turned off. With stevedore (a profile runs Stevedore's plugin), Stevedore's CRDs must
// be served.
func fitGatesToServer(ctx context.Context, fg featuregate.MutableFeatureGate, master, kubeconfig string, stevedore bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags(master, kubeconfig)
	if err != nil {
		return fmt.Errorf("the API server's address and credentials: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	info, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the API server's version: %w", err)
	}
	resources := map[schema.GroupVersion]map[string]bool{}
	served := func(gvr schema.GroupVersionResource) (bool, error) {
		gv := gvr.GroupVersion()
		if _, ok := resources[gv]; !ok {
			list, err := dc.ServerResourcesForGroupVersion(gv.String())
			switch {
			case apierrors.IsNotFound(err):
				resources[gv] = map[string]bool{}
			case err != nil:
				return false, fmt.Errorf("asking the API server whether it serves %s: %w", gv, err)
			default:
				resources[gv] = map[string]bool{}
				for _, r := range list.APIResources {
					if !strings.Contains(r.Name, "/") {
						resources[gv][r.Name] = true
					}
				}
			}
		}
		return resources[gv][gvr.Resource], nil
	}
	off, err := fitGates(fg, served)
	if err != nil {
		return fmt.Errorf("API server %s: %w", info.GitVersion, err)
	}
	if stevedore {
		if err := requireCRDs(served); err != nil {
			return err
		}
	}
	logger.Info("API server", "version", info.GitVersion)
	for _, c := range off {
		logger.Info("Feature turned off: the API server does not serve its API", "featureGate", c.gate, "api", formatGVR(c.api),
			"serverVersion", info.GitVersion)
	}
	return nil
}

// stevedoreResources are the resources of Stevedore's CRDs; the scheduler's informers wait for each before any
// controller starts.
var stevedoreResources = []string{"nodepools", "nodeclaims", "ec2nodeclasses", "nodeoverlays", "capacitybuffers"}

// requireCRDs refuses to start when the API server does not serve one of Stevedore's CRDs: an informer of a
// missing resource never syncs, and every controller would wait for it silently.
func requireCRDs(served func(schema.GroupVersionResource) (bool, error)) error {
	var missing []string
	for _, resource := range stevedoreResources {
		gvr := stevedorev1.SchemeGroupVersion.WithResource(resource)
		ok, err := served(gvr)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, resource+"."+gvr.Group)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the API server does not serve the CustomResourceDefinition %s (%s): install Stevedore's CRDs "+
			"first (the stevedore-crd chart, or kubectl apply --server-side -k manifests/crds)", strings.Join(missing, ", "), stevedorev1.SchemeGroupVersion)
	}
	return nil
}
