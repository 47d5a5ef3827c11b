/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package schedulerapp

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/operator"
	"github.com/stevedore-dev/stevedore/pkg/plugins/provisioner"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// buildBackend is the plugin's BuildFunc: the controllers, built by package operator on the framework's clients,
// informers and event recorder, and the provisioner among them adapted to the plugin's Backend.
func buildBackend(leadership *state.Leadership, env func(string) string) provisioner.BuildFunc {
	return func(ctx context.Context, h fwk.Handle, args config.ProvisionerArgs, onInitialized func(string)) (provisioner.Backend, error) {
		c, err := operator.New(ctx, operator.Host{KubeConfig: h.KubeConfig(), ClientSet: h.ClientSet(), Informers: h.SharedInformerFactory(),
			Recorder: h.EventRecorder(), SchedulerName: h.ProfileName(), Leadership: leadership, OnInitialized: onInitialized, Queue: h},
			operator.OptionsFrom(args, env))
		if err != nil {
			return nil, err
		}
		return backend{c.Provisioner}, nil
	}
}

// backend is the provisioner as the plugin sees it: its decisions in the plugin's words.
type backend struct{ *provision.Provisioner }

// Consider answers in the plugin's decision kinds.
func (b backend) Consider(ctx context.Context, pod *corev1.Pod, refusedBy func(node string) (plugin, message string)) provisioner.Decision {
	d := b.Provisioner.Consider(ctx, pod, refusedBy)
	kind := provisioner.Unprovisionable
	switch d.Kind {
	case provision.Nominated:
		kind = provisioner.Nominated
	case provision.Waiting:
		kind = provisioner.Waiting
	case provision.Batched:
		kind = provisioner.Batched
	case provision.Unprovisionable:
	}
	return provisioner.Decision{Kind: kind, NodeName: d.NodeName, Claim: d.Claim, Reason: d.Reason}
}
