/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package config carries Stevedore's KubeSchedulerConfiguration, embedded so that the sandbox runs the scheduler
// exactly as it is configured in production.
package config

import (
	"bytes"
	_ "embed"
)

//go:embed scheduler-config.yaml
var schedulerConfig []byte

// SchedulerConfig returns a copy of scheduler-config.yaml.
func SchedulerConfig() []byte { return bytes.Clone(schedulerConfig) }
