/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// The GPU training shape of the gang benchmarks: one A100 per worker, eight workers on a p4d.24xlarge.
const (
	gangInstanceType = "p4d.24xlarge"
	gangZone         = "us-east-1a"
	gangPool         = "gpu-gang"
)

// BenchmarkGangTimeToBind creates 64 GPU workers (one GPU, 8 CPUs, 64Gi each: 8 p4d.24xlarge) at once, as a
// coscheduling PodGroup of minMember 64 ("gang") and as plain pods ("plain"), with nodes that register at once
// (delay-0s), after the sandbox's default 2 s, and after 30 s (an EC2 boot), and reports the seconds from the
// first pod created to the first and to the last bound, and the instances launched. Run it with -benchtime 1x.
func BenchmarkGangTimeToBind(b *testing.B) {
	for _, delay := range []time.Duration{0, 2 * time.Second, 30 * time.Second} {
		for _, gang := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/delay-%s", gangOrPlain(gang), delay), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					runGangToBind(b, gang, delay)
				}
			})
		}
	}
}

// BenchmarkGangThreeOfFour leaves EC2 room for three of the four p4d.24xlarge 32 GPU workers need and watches 60
// s from the pods' creation: with a PodGroup of minMember 32 ("gang") and as plain pods ("plain"). It reports what
// the pool's instances were billed in that minute (instance-seconds from launch to termination, and dollars at
// their price), the instances launched and running at its end, and the pods bound. Run it with -benchtime 1x.
func BenchmarkGangThreeOfFour(b *testing.B) {
	for _, gang := range []bool{true, false} {
		b.Run(gangOrPlain(gang), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runGangThreeOfFour(b, gang)
			}
		})
	}
}

func gangOrPlain(gang bool) string {
	if gang {
		return "gang"
	}
	return "plain"
}

// startGangSandbox starts a sandbox with the GPU NodePool (p4d.24xlarge, on-demand, one zone) and returns it with
// the namespace of the workers.
func startGangSandbox(b *testing.B, delay time.Duration) (*sandbox.Sandbox, string) {
	sb, err := sandbox.Start(context.Background(), sandbox.Options{WithScheduler: true, LaunchDelay: delay})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Stop)
	ns := harness.Namespace(b, sb)
	harness.NodePool(b, sb, gangPool, gangPool, harness.WithRequirements(
		harness.Req(corev1.LabelInstanceTypeStable, "In", gangInstanceType), harness.Req(corev1.LabelTopologyZone, "In", gangZone),
		harness.Req(stevedorev1.LabelCapacityType, "In", stevedorev1.CapacityTypeOnDemand)))
	return sb, ns
}

// createWorkers creates n GPU workers, in a PodGroup of minMember n when gang, and returns their names and when
// the first was created.
func createWorkers(b *testing.B, sb *sandbox.Sandbox, ns string, n int, gang bool) ([]string, time.Time) {
	ctx := context.Background()
	if gang {
		if _, err := sb.Stevedore.CoschedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
			Spec:       schedv1alpha1.PodGroupSpec{MinMember: int32(n)}, //nolint:gosec // G115: a benchmark's few dozen pods
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	gpu := resource.MustParse("1")
	pods, names := harness.Pods(ns, gangPool, "worker", n, "8", "64Gi", func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources.Requests[stevedorev1.ResourceNVIDIAGPU] = gpu
		c.Resources.Limits = corev1.ResourceList{stevedorev1.ResourceNVIDIAGPU: gpu}
		if gang {
			p.Labels[schedv1alpha1.PodGroupLabel] = "train"
		}
	})
	start := time.Now()
	for _, p := range pods {
		if _, err := sb.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return names, start
}

// watchBound records in seen when each of the namespace's pods was first seen bound to a node.
func watchBound(ctx context.Context, sb *sandbox.Sandbox, ns string, seen map[string]time.Time) error {
	list, err := sb.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		if _, ok := seen[p.Name]; !ok && p.Spec.NodeName != "" {
			seen[p.Name] = time.Now()
		}
	}
	return nil
}

func runGangToBind(b *testing.B, gang bool, delay time.Duration) {
	const n = 64
	sb, ns := startGangSandbox(b, delay)
	b.ResetTimer()
	names, start := createWorkers(b, sb, ns, n, gang)
	bound := map[string]time.Time{}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		return len(bound) == len(names), watchBound(ctx, sb, ns, bound)
	})
	b.StopTimer()
	if err != nil {
		b.Fatalf("waiting for the %d workers to bind: %v (%d bound)", n, err, len(bound))
	}
	first, last := time.Time{}, time.Time{}
	for _, at := range bound {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	launched := len(instancesOfPool(sb, gangPool))
	b.ReportMetric(first.Sub(start).Seconds(), "s-to-first-bound")
	b.ReportMetric(last.Sub(start).Seconds(), "s-to-all-bound")
	b.ReportMetric(float64(launched), "instances")
	b.Logf("%s, nodes registering %s after launch: %d GPU workers on %d %s; first bound %.1fs, all bound %.1fs after creation",
		gangOrPlain(gang), delay, n, launched, gangInstanceType, first.Sub(start).Seconds(), last.Sub(start).Seconds())
}

func runGangThreeOfFour(b *testing.B, gang bool) {
	const (
		n      = 32
		window = time.Minute
	)
	sb, ns := startGangSandbox(b, 2*time.Second)
	sb.AWS.EC2.SetCapacity(gangInstanceType, gangZone, stevedorev1.CapacityTypeOnDemand, 3)
	fleets := sb.AWS.EC2.Calls()["CreateFleet"]
	b.ResetTimer()
	_, start := createWorkers(b, sb, ns, n, gang)
	bound := map[string]time.Time{}
	// a measurement window, not a wait for a state: the pods are watched until it ends
	_ = wait.PollUntilContextTimeout(context.Background(), time.Second, window-time.Since(start), true, func(ctx context.Context) (bool, error) {
		return false, watchBound(ctx, sb, ns, bound)
	})
	end := time.Now()
	b.StopTimer()
	billed, instanceSeconds, running := 0.0, 0.0, 0
	instances := instancesOfPool(sb, gangPool)
	for _, inst := range instances {
		stop := end
		if !inst.TerminatedAt.IsZero() && inst.TerminatedAt.Before(end) {
			stop = inst.TerminatedAt
		} else {
			running++
		}
		instanceSeconds += stop.Sub(inst.LaunchTime).Seconds()
		billed += inst.Price * stop.Sub(inst.LaunchTime).Seconds() / 3600
	}
	b.ReportMetric(billed, "usd-billed")
	b.ReportMetric(instanceSeconds, "instance-seconds")
	b.ReportMetric(float64(sb.AWS.EC2.Calls()["CreateFleet"]-fleets), "fleet-calls")
	b.ReportMetric(float64(len(instances)), "instances-launched")
	b.ReportMetric(float64(running), "instances-running")
	b.ReportMetric(float64(len(bound)), "pods-bound")
	b.Logf("%s, EC2 room for 3 of the 4 %s %d GPU workers need, watched %s: %d instances launched, %d running at the end, %.0f instance-seconds, $%.2f billed, %d of %d pods bound (a job of %d cannot start)",
		gangOrPlain(gang), gangInstanceType, n, window, len(instances), running, instanceSeconds, billed, len(bound), n, n)
}

// instancesOfPool returns the emulated instances launched for a NodePool, terminated or not.
func instancesOfPool(sb *sandbox.Sandbox, pool string) []awsemu.Instance {
	var out []awsemu.Instance
	for _, inst := range sb.AWS.EC2.Instances() {
		if inst.Tags[stevedorev1.LabelNodePool] == pool {
			out = append(out, *inst)
		}
	}
	return out
}
