/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package componentglobals gives a Kubernetes component run inside this process (the scheduler, and the sandbox's
// API server and controller manager) a component-globals registry of its own, so that its flags and feature gates
// do not touch another's.
package componentglobals

import (
	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
)

// New returns a registry over a copy of the process's feature gates, with the build's effective version, and that
// copy.
func New() (compatibility.ComponentGlobalsRegistry, featuregate.MutableVersionedFeatureGate, error) {
	fg := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	ev := utilcompatibility.DefaultBuildEffectiveVersion()
	ev.SetEmulationVersion(fg.EmulationVersion())
	ev.SetMinCompatibilityVersion(fg.MinCompatibilityVersion())
	reg := compatibility.NewComponentGlobalsRegistry()
	if err := reg.Register(compatibility.DefaultKubeComponent, ev, fg); err != nil {
		return nil, nil, err
	}
	return reg, fg, nil
}
