/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package zeronode

import (
	"fmt"
	"testing"
	"time"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{WithScheduler: true, NoBootstrapNodes: true, LaunchDelay: 500 * time.Millisecond,
		PluginArgs: map[string]any{"disableDisruption": true}},
		func(s *sandbox.Sandbox) { sb = s })
}

// TestPodsInAClusterWithNoNodeGetNodes covers the case the scheduler never calls PostFilter for: with no node at
// all it fails the pods before any plugin runs, and the pending-pod watcher has to find them.
func TestPodsInAClusterWithNoNodeGetNodes(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "first", "first")
	var names []string
	for i := 0; i < 3; i++ {
		p := harness.Isolated(harness.Pod(ns, fmt.Sprintf("first-%d", i), "500m", "512Mi"), "first")
		harness.CreatePods(t, sb, p)
		names = append(names, p.Name)
	}
	harness.WaitBound(t, sb, ns, names)
}
