/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package schedulerapp

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/features"

	"github.com/stevedore-dev/stevedore/pkg/componentglobals"
)

// TestStevedoresDefaultGatesYieldToTheUsersFlag parses --feature-gates as the scheduler does and checks which of
// Stevedore's default features end up on.
func TestStevedoresDefaultGatesYieldToTheUsersFlag(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantOn   bool
		wantTurn []featuregate.Feature
	}{
		{name: "no flag: on by Stevedore's default", wantOn: true, wantTurn: []featuregate.Feature{features.SchedulerPreQueueingHints}},
		{name: "another gate named", args: []string{"--feature-gates=GenericWorkload=true"}, wantOn: true,
			wantTurn: []featuregate.Feature{features.SchedulerPreQueueingHints}},
		{name: "turned off by the user", args: []string{"--feature-gates=GenericWorkload=true,SchedulerPreQueueingHints=false"}},
		{name: "turned off by the user, with the component named", args: []string{"--feature-gates=kube:SchedulerPreQueueingHints=false"}},
		{name: "turned on by the user", args: []string{"--feature-gates=SchedulerPreQueueingHints=true"}, wantOn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// the scheduler's own flags, over a registry of their own (as Start builds it)
			reg, fg, err := componentglobals.New()
			if err != nil {
				t.Fatal(err)
			}
			opts := scheduleroptions.NewOptionsWithComponentGlobalsRegistry(reg)
			fs := pflag.NewFlagSet("scheduler", pflag.ContinueOnError)
			for _, f := range opts.Flags.FlagSets {
				fs.AddFlagSet(f)
			}
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := reg.Set(); err != nil {
				t.Fatal(err)
			}
			turned, err := setDefaultGates(fg, fs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantTurn, turned); diff != "" {
				t.Errorf("turned on (-want +got):\n%s", diff)
			}
			if got := fg.Enabled(features.SchedulerPreQueueingHints); got != tc.wantOn {
				t.Errorf("SchedulerPreQueueingHints on: %v, want %v", got, tc.wantOn)
			}
		})
	}
}
