/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package scale

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{WithScheduler: true, LaunchDelay: 0,
		PluginArgs: map[string]any{"disableDisruption": true}}, func(s *sandbox.Sandbox) { sb = s })
}

// TestAThousandPendingPodsAreAllBound creates 1000 pods of mixed sizes at once and waits until every one is bound
// to a node Stevedore launched. The wall time is reported, not asserted (make bench measures it).
func TestAThousandPendingPodsAreAllBound(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "scale", "scale")
	sizes := []struct{ cpu, mem string }{{"100m", "128Mi"}, {"250m", "512Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}, {"1500m", "3Gi"}}
	var names []string
	start := time.Now()
	for i := 0; i < 1000; i++ {
		s := sizes[i%len(sizes)]
		p := harness.Isolated(harness.Pod(ns, fmt.Sprintf("pod-%04d", i), s.cpu, s.mem), "scale")
		p.Labels = map[string]string{"app": "scale"}
		harness.CreatePods(t, sb, p)
		names = append(names, p.Name)
	}
	created := time.Since(start)
	harness.EventuallyWithin(t, 10*time.Minute, "1000 pods bound", func(ctx context.Context) (bool, error) {
		list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == len(names), nil
	})
	claims := harness.NodeClaimsOf(t, sb, "scale")
	t.Logf("1000 pods created in %s, all bound %s after the first was created, on %d nodes",
		created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), len(claims))
	_ = corev1.PodRunning
}
