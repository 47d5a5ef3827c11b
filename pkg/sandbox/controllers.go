/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/configz"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"

	"github.com/stevedore-dev/stevedore/pkg/componentglobals"
)

// sandboxControllers are the kube-controller-manager controllers a user of a real cluster relies on.
// node-lifecycle removes the not-ready taint once kwok reports a node Ready; taint-eviction evicts pods from
// NoExecute-tainted nodes; disruption keeps PodDisruptionBudget status for the Eviction API; the
// HorizontalPodAutoscaler controller keeps replicas within an HPA's bounds (the sandbox serves no metrics); the
// ResourceClaim controller creates pods' claims from their templates.
const sandboxControllers = "deployment,replicaset,daemonset,statefulset,job,cronjob,garbagecollector," +
	"nodelifecycle,taint-eviction-controller,podgc,disruption,namespace,serviceaccount,endpointslice," +
	"ttl-after-finished,clusterrole-aggregation,horizontalpodautoscaling,resourceclaim-controller"

// controllerManagerArgs are the flags of the sandbox's kube-controller-manager, of whichever minor; a node whose
// simulated kubelet stops renewing its Lease is marked unreachable after nodeGrace (20 s by default, rather than
// the 50 s of a real cluster).
func controllerManagerArgs(kubeconfig string, nodeGrace time.Duration) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=" + sandboxControllers,
		"--node-monitor-grace-period=" + nodeGrace.String(),
		// the default 20 QPS would take the not-ready taint off a burst of new nodes at a few per second
		"--kube-api-qps=500", "--kube-api-burst=1000",
	}
}

// controllerManager is kube-controller-manager running in this process.
type controllerManager struct {
	cancel  context.CancelFunc
	stopped chan error
}

// startControllerManager runs kube-controller-manager in this process with its own component-globals registry.
func startControllerManager(ctx context.Context, kubeconfig string, nodeGrace time.Duration) (*controllerManager, error) {
	s, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	reg, _, err := componentglobals.New()
	if err != nil {
		return nil, err
	}
	s.ComponentGlobalsRegistry = reg

	all, disabled, aliases := kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases()
	nfs := s.Flags(all, disabled, aliases)
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range nfs.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(controllerManagerArgs(kubeconfig, nodeGrace)); err != nil {
		return nil, fmt.Errorf("kube-controller-manager flags: %w", err)
	}
	s.ParsedFlags = &nfs
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	c, err := s.Config(ctx, all, disabled, aliases)
	if err != nil {
		return nil, fmt.Errorf("kube-controller-manager config: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cm := &controllerManager{cancel: cancel, stopped: make(chan error, 1)}
	go func() {
		defer close(cm.stopped)
		if err := kcmapp.Run(ctx, c.Complete()); err != nil && ctx.Err() == nil {
			cm.stopped <- err
		}
	}()
	return cm, nil
}

func (c *controllerManager) stop() {
	c.cancel()
	for range c.stopped {
	}
	configz.Delete(kcmapp.ConfigzName)
}
