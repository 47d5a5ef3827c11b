/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package schedulerapp

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/features"
)

// stevedoreDefaultGates are the kube-scheduler features Stevedore turns on unless --feature-gates names them.
// SchedulerPreQueueingHints (alpha in 1.37) lets the Provisioner narrow the node events and binds the scheduling
// queue weighs its parked pods for to the pods it does not hold: without it, the queue walks the whole backlog
// of a burst at every bind, and the scheduler's CPU per pod grows with the burst.
func stevedoreDefaultGates() []featuregate.Feature {
	return []featuregate.Feature{features.SchedulerPreQueueingHints}
}

// setDefaultGates turns on, in fg, each of Stevedore's default features the --feature-gates flag does not name,
// and returns those it turned on.
func setDefaultGates(fg featuregate.MutableFeatureGate, flags *pflag.FlagSet) ([]featuregate.Feature, error) {
	var named string
	if flags != nil {
		if f := flags.Lookup("feature-gates"); f != nil && f.Changed {
			named = f.Value.String()
		}
	}
	on := map[string]bool{}
	var turned []featuregate.Feature
	for _, g := range stevedoreDefaultGates() {
		if namesGate(named, g) || fg.Enabled(g) {
			continue
		}
		on[string(g)] = true
		turned = append(turned, g)
	}
	if len(on) == 0 {
		return nil, nil
	}
	if err := fg.SetFromMap(on); err != nil {
		return nil, fmt.Errorf("turning on Stevedore's default features: %w", err)
	}
	return turned, nil
}

// namesGate reports whether a --feature-gates value (key=value pairs, keys optionally prefixed by a component,
// "kube:Name=false") sets the gate.
func namesGate(value string, g featuregate.Feature) bool {
	for pair := range strings.SplitSeq(value, ",") {
		key, _, _ := strings.Cut(strings.TrimSpace(pair), "=")
		if _, name, ok := strings.Cut(key, ":"); ok {
			key = name
		}
		if key == string(g) {
			return true
		}
	}
	return false
}
