/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package interruption tests interruption handling on a sandbox: notices sent to the emulated SQS queue as
// EventBridge would, and the emulated EC2 taking spot instances away when the notice runs out.
package interruption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentmetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

// spotNotice is shorter than AWS's two minutes to keep the tests short; the scheduler is told the same.
const spotNotice = 40 * time.Second

func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{WithScheduler: true, LaunchDelay: 500 * time.Millisecond, SpotNotice: spotNotice,
		// rebalance recommendations replace the node (the default only records them)
		PluginArgs: map[string]any{"disruptionPollInterval": "1s", "disruptionValidationDelay": "1s", "rebalanceAction": "Replace"}},
		func(s *sandbox.Sandbox) { sb = s })
}

func capacityType(values ...string) func(*stevedorev1.NodePool) {
	return func(np *stevedorev1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, stevedorev1.NodeSelectorRequirementWithMinValues{
			Key: stevedorev1.LabelCapacityType, Operator: "In", Values: values})
		np.Spec.Disruption.ConsolidateAfter = stevedorev1.NeverDuration()
	}
}

// interruptedNode returns a node running pods of app, with its NodeClaim.
func interruptedNode(t *testing.T, ns, app string, pool string) (string, stevedorev1.NodeClaim) {
	t.Helper()
	pods, err := harness.RunningPods(context.Background(), sb, ns, app)
	if err != nil || len(pods) == 0 {
		t.Fatalf("no running pod of %s: %v", app, err)
	}
	node := pods[0].Spec.NodeName
	for _, c := range harness.NodeClaimsOf(t, sb, pool) {
		if c.Status.NodeName == node {
			return node, c
		}
	}
	t.Fatalf("node %s has no NodeClaim in %s", node, pool)
	return "", stevedorev1.NodeClaim{}
}

// TestASpotInterruptionMovesPodsBeforeTheInstanceIsTerminated: a spot warning for a node with pods launches a
// replacement in another offering, and every pod is Running elsewhere while the emulated instance still runs; the
// emulator then terminates it when the notice runs out.
func TestASpotInterruptionMovesPodsBeforeTheInstanceIsTerminated(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "spot", "spot", capacityType(stevedorev1.CapacityTypeSpot))
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "app", 3, "500m", "512Mi"), "spot")
	harness.WaitRunning(t, sb, ns, "app", 3)
	node, claim := interruptedNode(t, ns, "app", "spot")
	onNode := 0
	pods, _ := harness.RunningPods(context.Background(), sb, ns, "app")
	for _, p := range pods {
		if p.Spec.NodeName == node {
			onNode++
		}
	}
	id, err := sb.Interrupt(node, awsemu.NoticeSpot)
	if err != nil {
		t.Fatal(err)
	}
	movedInTime := false
	harness.EventuallyWithin(t, 3*time.Minute, "the interrupted instance to be terminated", func(ctx context.Context) (bool, error) {
		inst := sb.AWS.EC2.Instance(id)
		if inst.State == "running" && !movedInTime {
			pods, err := harness.RunningPods(ctx, sb, ns, "app")
			if err != nil {
				return false, err
			}
			elsewhere := 0
			for _, p := range pods {
				if p.Spec.NodeName != node {
					elsewhere++
				}
			}
			movedInTime = elsewhere == 3
		}
		return inst.State == "shutting-down" || inst.State == "terminated", nil
	})
	if !movedInTime {
		t.Errorf("the %d pods of the interrupted node were not all Running elsewhere before its instance was terminated", onNode)
	}
	harness.WaitRunning(t, sb, ns, "app", 3)
	var replacement *stevedorev1.NodeClaim
	for _, c := range harness.NodeClaimsOf(t, sb, "spot") {
		if strings.Contains(c.Annotations["stevedore.dev/replaces"], node) {
			replacement = &c
		}
	}
	if replacement == nil {
		t.Fatalf("no NodeClaim was launched as the replacement of %s", node)
	}
	if replacement.Status.InstanceType == claim.Status.InstanceType && replacement.Status.Zone == claim.Status.Zone {
		t.Errorf("the replacement %s runs in the interrupted offering %s/%s; it should have been marked unavailable",
			replacement.Name, claim.Status.InstanceType, claim.Status.Zone)
	}
	if got := metricValue(t, metrics.InterruptionActions.WithLabelValues("SpotInterruption", "replace-and-drain")); got < 1 {
		t.Errorf("interruption actions{SpotInterruption,replace-and-drain} = %v, want at least 1", got)
	}
}

// TestStateChangeAndScheduledChangeReplaceTheNode: an instance stopping and an AWS Health scheduled change each
// drain the node onto a replacement.
func TestStateChangeAndScheduledChangeReplaceTheNode(t *testing.T) {
	for _, kind := range []string{awsemu.NoticeStop, awsemu.NoticeScheduled} {
		t.Run(kind, func(t *testing.T) {
			ns := harness.Namespace(t, sb)
			pool := "change-" + kind
			harness.NodePool(t, sb, pool, pool, capacityType(stevedorev1.CapacityTypeOnDemand))
			harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "app", 2, "500m", "512Mi"), pool)
			harness.WaitRunning(t, sb, ns, "app", 2)
			node, claim := interruptedNode(t, ns, "app", pool)
			if _, err := sb.Interrupt(node, kind); err != nil {
				t.Fatal(err)
			}
			harness.EventuallyWithin(t, 3*time.Minute, "the pods to run on other nodes and the NodeClaim to go", func(ctx context.Context) (bool, error) {
				pods, err := harness.RunningPods(ctx, sb, ns, "app")
				if err != nil || len(pods) != 2 {
					return false, err
				}
				for _, p := range pods {
					if p.Spec.NodeName == node {
						return false, nil
					}
				}
				_, err = sb.Stevedore.StevedoreV1().NodeClaims().Get(ctx, claim.Name, metav1.GetOptions{})
				return err != nil, nil
			})
		})
	}
}

// TestMalformedAndUnknownMessagesAreDeletedAndCounted sends 100 malformed messages, 5 events of a kind Stevedore
// does not handle and 10 spot warnings for instances it does not manage: all are deleted and counted, and a
// rebalance recommendation sent after them is still acted on (replace within the budget).
func TestMalformedAndUnknownMessagesAreDeletedAndCounted(t *testing.T) {
	unparseable := metricValue(t, metrics.InterruptionMessages.WithLabelValues("Unparseable"))
	unknown := metricValue(t, metrics.InterruptionMessages.WithLabelValues("Unknown"))
	unmanaged := metricValue(t, metrics.InterruptionActions.WithLabelValues("SpotInterruption", "unknown-instance"))
	send := func(body string) {
		if _, err := sb.AWS.SQS.Send(sb.InterruptionQueueURL, body); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		switch i % 4 {
		case 0:
			send(fmt.Sprintf("not json %d", i))
		case 1:
			send(`{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":42}}`)
		case 2:
			send(`{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-0123456789abcdef0","state":"exploded"}}`)
		default:
			send(`[]`)
		}
	}
	for i := 0; i < 5; i++ {
		send(`{"version":"0","id":"x","source":"aws.s3","detail-type":"Object Created","detail":{}}`)
	}
	for i := 0; i < 10; i++ {
		send(fmt.Sprintf(`{"version":"0","id":"s%d","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"2026-11-26T10:00:00Z","detail":{"instance-id":"i-0fffffffffff%05d","instance-action":"terminate"}}`, i, i))
	}
	harness.EventuallyWithin(t, 2*time.Minute, "the queue to be drained", func(context.Context) (bool, error) {
		return sb.AWS.SQS.Depth(sb.InterruptionQueueURL) == 0, nil
	})
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"messages{Unparseable}", metricValue(t, metrics.InterruptionMessages.WithLabelValues("Unparseable")) - unparseable, 100},
		{"messages{Unknown}", metricValue(t, metrics.InterruptionMessages.WithLabelValues("Unknown")) - unknown, 5},
		{"actions{SpotInterruption,unknown-instance}", metricValue(t, metrics.InterruptionActions.WithLabelValues("SpotInterruption", "unknown-instance")) - unmanaged, 10},
	} {
		if c.got != c.want {
			t.Errorf("%s went up by %v, want %v", c.name, c.got, c.want)
		}
	}

	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "rebalance", "rebalance", capacityType(stevedorev1.CapacityTypeSpot))
	harness.IsolatedDeployment(t, sb, harness.Deployment(ns, "app", 1, "500m", "512Mi"), "rebalance")
	harness.WaitRunning(t, sb, ns, "app", 1)
	node, claim := interruptedNode(t, ns, "app", "rebalance")
	if _, err := sb.Interrupt(node, awsemu.NoticeRebalance); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 3*time.Minute, "the rebalanced node to be replaced", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, "app")
		if err != nil || len(pods) != 1 || pods[0].Spec.NodeName == node {
			return false, err
		}
		_, err = sb.Stevedore.StevedoreV1().NodeClaims().Get(ctx, claim.Name, metav1.GetOptions{})
		return err != nil, nil
	})
}

func metricValue(t *testing.T, c componentmetrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
