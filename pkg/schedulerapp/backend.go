/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package schedulerapp

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/client"
	"github.com/stevedore-dev/stevedore/pkg/operator"
	"github.com/stevedore-dev/stevedore/pkg/plugins/provisioner"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/state"
	"github.com/stevedore-dev/stevedore/pkg/surge"
)

// buildBackend is the plugin's BuildFunc: the controllers, built by package operator on the framework's clients,
// informers and event recorder; the provisioner among them is the plugin's Backend.
func buildBackend(leadership *state.Leadership, shared *client.Shared, env func(string) string) provisioner.BuildFunc {
	return func(ctx context.Context, h fwk.Handle, args config.ProvisionerArgs, onInitialized func(string)) (provisioner.Backend, error) {
		c, err := operator.New(ctx, operator.Host{KubeConfig: h.KubeConfig(), ClientSet: h.ClientSet(), Informers: h.SharedInformerFactory(),
			Recorder: h.EventRecorder(), SchedulerName: h.ProfileName(), Leadership: leadership, OnInitialized: onInitialized, Queue: h, Env: env,
			Shared: shared},
			args)
		if err != nil {
			return nil, err
		}
		return backend{Provisioner: c.Provisioner, Nominations: c.Nominations}, nil
	}
}

// backend is the plugin's Backend: the provisioner, and the nominations of the successors disruption surges.
type backend struct {
	*provision.Provisioner
	*surge.Nominations
}
