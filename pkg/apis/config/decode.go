/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Decode reads the plugin's pluginConfig args strictly (an unknown or misspelt field is an error), applies
// defaults and validates them.
func Decode(obj runtime.Object, env func(string) string) (ProvisionerArgs, error) {
	var a ProvisionerArgs
	if obj != nil {
		raw, ok := obj.(*runtime.Unknown)
		if !ok {
			return a, fmt.Errorf("%s args: want runtime.Unknown, got %T", PluginName, obj)
		}
		if len(raw.Raw) > 0 {
			if err := yaml.UnmarshalStrict(raw.Raw, &a); err != nil {
				return a, fmt.Errorf("%s args: %w", PluginName, err)
			}
		}
	}
	a = a.Defaults(env)
	if errs := a.Validate(); len(errs) > 0 {
		return a, fmt.Errorf("%s args: %w", PluginName, errs.ToAggregate())
	}
	return a, nil
}
