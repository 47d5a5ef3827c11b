/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// burstLaunchDelay stands for an EC2 instance's boot to a Ready node (30-60 s on EKS's AMIs).
const burstLaunchDelay = 30 * time.Second

// BenchmarkBurstTimeToBind creates a burst of 20 pods (500m, 1Gi) in a sandbox whose instances take 30 s to become
// nodes, with a CapacityBuffer of 20 such chunks kept warm beforehand and without one, and reports how long the
// pods took from creation to binding (median and slowest) and how many NodeClaims were launched before the last
// pod bound. Run it with -benchtime 1x.
func BenchmarkBurstTimeToBind(b *testing.B) {
	for _, buffered := range []bool{true, false} {
		name := "buffer"
		if !buffered {
			name = "no-buffer"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runBurst(b, buffered)
			}
		})
	}
}

func runBurst(b *testing.B, buffered bool) {
	const n = 20
	ctx := context.Background()
	sb, err := sandbox.Start(ctx, sandbox.Options{WithScheduler: true, LaunchDelay: burstLaunchDelay})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Stop)
	ns := harness.Namespace(b, sb)
	harness.NodeClass(b, sb)
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Create(ctx, harness.NewNodePool("bench", "bench"), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if buffered {
		chunk := harness.Isolated(harness.Pod(ns, "chunk", "500m", "1Gi"), "bench")
		if _, err := sb.Kube.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: ns},
			Template: corev1.PodTemplateSpec{Spec: chunk.Spec}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		replicas := int32(n)
		if _, err := sb.Stevedore.StevedoreV1().CapacityBuffers(ns).Create(ctx, &stevedorev1.CapacityBuffer{
			ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: ns},
			Spec:       stevedorev1.CapacityBufferSpec{PodTemplateRef: &stevedorev1.LocalObjectReference{Name: "burst"}, Replicas: &replicas}},
			metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			buf, err := sb.Stevedore.StevedoreV1().CapacityBuffers(ns).Get(ctx, "burst", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !meta.IsStatusConditionTrue(buf.Status.Conditions, stevedorev1.ConditionReady) {
				return false, nil
			}
			for _, c := range harness.NodeClaimsOf(b, sb, "bench") {
				if !meta.IsStatusConditionTrue(c.Status.Conditions, stevedorev1.ConditionInitialized) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			b.Fatalf("waiting for the buffer's nodes: %v", err)
		}
	}
	claimsBefore := len(harness.NodeClaimsOf(b, sb, "bench"))
	pods, names := harness.Pods(ns, "bench", "burst", n, "500m", "1Gi")
	created := map[string]time.Time{}
	b.ResetTimer()
	for _, p := range pods {
		if _, err := sb.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		created[p.Name] = time.Now()
	}
	bound := map[string]time.Duration{}
	launched := 0
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if _, seen := bound[p.Name]; !seen && p.Spec.NodeName != "" {
				bound[p.Name] = time.Since(created[p.Name])
			}
		}
		if len(bound) < len(names) {
			launched = len(harness.NodeClaimsOf(b, sb, "bench")) - claimsBefore
		}
		return len(bound) == len(names), nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatalf("waiting for the burst to bind: %v (%d of %d bound)", err, len(bound), len(names))
	}
	times := make([]time.Duration, 0, len(bound))
	for _, d := range bound {
		times = append(times, d)
	}
	slices.Sort(times)
	median, slowest := times[len(times)/2], times[len(times)-1]
	b.ReportMetric(median.Seconds(), "s-median-to-bind")
	b.ReportMetric(slowest.Seconds(), "s-slowest-to-bind")
	b.ReportMetric(float64(launched), "launches-before-bound")
	b.Logf("%s: burst of %d pods (500m, 1Gi), nodes %s to come up: median %s, slowest %s from creation to binding; %d NodeClaims launched before the last pod bound",
		map[bool]string{true: "buffer of 20 chunks", false: "no buffer"}[buffered], n, burstLaunchDelay,
		median.Round(10*time.Millisecond), slowest.Round(10*time.Millisecond), launched)
}
