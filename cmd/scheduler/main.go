/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Command scheduler is Stevedore: kube-scheduler with the Provisioner plugin registered. With no subcommand it
// runs the scheduler (every kube-scheduler flag works); `sandbox` runs a local cluster with a simulated AWS,
// `plan` runs the provisioning solver offline (on Karpenter's objects too), `convert` writes Stevedore's manifests
// for Karpenter's, `version` prints the build.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"github.com/stevedore-dev/stevedore/pkg/schedulerapp"
)

func main() {
	cmd := schedulerapp.NewCommand(schedulerapp.Deps{})
	cmd.AddCommand(newVersionCommand(), newSandboxCommand(), newPlanCommand(), newConvertCommand(), newCostCommand())
	os.Exit(cli.Run(cmd))
}
