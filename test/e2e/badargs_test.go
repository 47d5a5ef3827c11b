/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMalformedPluginArgumentsStopStartUp starts the scheduler binary with broken Provisioner arguments: it must
// exit non-zero at once with a message naming the argument, before it talks to any API server (the kubeconfig
// points at a closed port).
func TestMalformedPluginArgumentsStopStartUp(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: x, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: x, context: {cluster: x, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: x
`)
	for _, tc := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"negative batch idle", map[string]any{"batchIdleDuration": "-1s"}, []string{"batchIdleDuration", "must be positive"}},
		{"batch max below idle", map[string]any{"batchIdleDuration": "5s", "batchMaxDuration": "2s"}, []string{"batchMaxDuration", "must not be shorter than batchIdleDuration"}},
		{"too many instance types", map[string]any{"maxInstanceTypes": 500}, []string{"maxInstanceTypes", "between 1 and 200"}},
		{"permit timeout above the scheduler's cap", map[string]any{"permitTimeout": "1h"}, []string{"permitTimeout", "at most 15m"}},
		{"memory overhead out of range", map[string]any{"vmMemoryOverheadPercent": 80}, []string{"vmMemoryOverheadPercent"}},
		{"plain http cluster endpoint", map[string]any{"clusterEndpoint": "http://api.example"}, []string{"clusterEndpoint", "https://"}},
		{"unknown rebalance action", map[string]any{"rebalanceAction": "Panic"}, []string{"rebalanceAction", "Unsupported value", "Replace"}},
		{"misspelt argument", map[string]any{"batchIdle": "1s"}, []string{`unknown field \"batchIdle\"`}},
		{"duration that is no duration", map[string]any{"registrationTimeout": "soon"}, []string{`invalid duration \"soon\"`}},
		{"several at once", map[string]any{"batchIdleDuration": "-1s", "maxInstanceTypes": -1, "spotInterruptionNotice": "-5s"},
			[]string{"batchIdleDuration", "maxInstanceTypes", "spotInterruptionNotice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := schedulerConfig(t, t.TempDir(), "bad.yaml", func(_, args map[string]any) {
				for k, v := range tc.args {
					args[k] = v
				}
			})
			out, err := run(t, []string{"STEVEDORE_CLUSTER_NAME=my-cluster", "AWS_REGION=us-east-1"}, scheduler,
				"--config", config, "--kubeconfig", kubeconfig, "--secure-port=0")
			if err == nil {
				t.Fatalf("the scheduler exited 0 with %v:\n%s", tc.args, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the start-up error does not say %q:\n%s", w, lastLines(out, 5))
				}
			}
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
