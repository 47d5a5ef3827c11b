/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// reservedNodeClass creates an EC2NodeClass like the default one that also selects the capacity reservations
// tagged stevedore-test=<isolation>, deleted when the test ends.
func reservedNodeClass(t *testing.T, name, isolation string) {
	t.Helper()
	nc := harness.NewNodeClass()
	nc.Name = name
	nc.Spec.CapacityReservationSelectorTerms = []stevedorev1.CapacityReservationSelectorTerm{{Tags: map[string]string{harness.IsolationKey: isolation}}}
	if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(context.Background(), nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sb.Stevedore.StevedoreV1().EC2NodeClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// reservedPool creates a NodePool of one instance type on a node class, allowing reserved and on-demand capacity.
func reservedPool(t *testing.T, name, isolation, nodeClass, instanceType string) {
	t.Helper()
	harness.NodePool(t, sb, name, isolation, harness.WithRequirements(
		harness.Req(corev1.LabelInstanceTypeStable, "In", instanceType),
		harness.Req(stevedorev1.LabelCapacityType, "In", stevedorev1.CapacityTypeReserved, stevedorev1.CapacityTypeOnDemand)),
		func(np *stevedorev1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = nodeClass })
}

func ec2Client() *ec2.Client {
	return ec2.NewFromConfig(aws.Config{Region: sb.AWS.Region(), BaseEndpoint: aws.String(sb.AWS.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
}

func oneNodeEach(app string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelHostname}}}}
	}
}

// TestAReservationIsFilledBeforeOnDemand creates an On-Demand Capacity Reservation for two m5.large through the
// EC2 API; three pods that need a node each get the reservation's two instances (capacity type reserved, the
// reservation's id and type as labels) and one on-demand node.
func TestAReservationIsFilledBeforeOnDemand(t *testing.T) {
	ns := harness.Namespace(t, sb)
	out, err := ec2Client().CreateCapacityReservation(harness.Context(t), &ec2.CreateCapacityReservationInput{
		InstanceType: aws.String("m5.large"), AvailabilityZone: aws.String("us-east-1a"), InstanceCount: aws.Int32(2),
		InstancePlatform: ec2types.CapacityReservationInstancePlatformLinuxUnix, InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeCapacityReservation,
			Tags: []ec2types.Tag{{Key: aws.String(harness.IsolationKey), Value: aws.String("odcr")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.CapacityReservation.CapacityReservationId)
	reservedNodeClass(t, "odcr", "odcr")
	harness.Eventually(t, "the node class's status to list the reservation", func(ctx context.Context) (bool, error) {
		nc, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Get(ctx, "odcr", metav1.GetOptions{})
		return err == nil && len(nc.Status.CapacityReservations) == 1 && nc.Status.CapacityReservations[0].ID == id, err
	})
	reservedPool(t, "odcr", "odcr", "odcr", "m5.large")
	ps, names := harness.Pods(ns, "odcr", "db", 3, "1", "2Gi", oneNodeEach("db"))
	harness.CreatePods(t, sb, ps...)
	bound := harness.WaitBound(t, sb, ns, names)
	reserved, onDemand := 0, 0
	for _, name := range names {
		node := harness.Node(t, sb, bound[name].Spec.NodeName)
		switch node.Labels[stevedorev1.LabelCapacityType] {
		case stevedorev1.CapacityTypeReserved:
			reserved++
			if node.Labels[stevedorev1.LabelCapacityReservationID] != id || node.Labels[stevedorev1.LabelCapacityReservationType] != "default" {
				t.Errorf("reserved node %s has reservation labels %q/%q, want %s/default", node.Name,
					node.Labels[stevedorev1.LabelCapacityReservationID], node.Labels[stevedorev1.LabelCapacityReservationType], id)
			}
		case stevedorev1.CapacityTypeOnDemand:
			onDemand++
		}
	}
	if reserved != 2 || onDemand != 1 {
		t.Errorf("%d reserved and %d on-demand nodes, want the reservation's 2 filled first and 1 on-demand", reserved, onDemand)
	}
	if r := sb.AWS.EC2.Reservation(id); r == nil || r.Available != 0 {
		t.Errorf("reservation %s has %v instances free, want 0", id, r)
	}
}

// TestACapacityBlockEndingDrainsItsNodeInTime launches a Deployment's GPU pod onto a node in a Capacity Block that
// ends in 41 minutes:
// a minute later the block is within 40 minutes of its end, and the node is replaced (on-demand, the block's
// offering is gone) and drained long before EC2 would reclaim it (30 minutes before the end).
func TestACapacityBlockEndingDrainsItsNodeInTime(t *testing.T) {
	ns := harness.Namespace(t, sb)
	end := time.Now().Add(41 * time.Minute)
	block := sb.AWS.EC2.AddCapacityBlock("g5.xlarge", "us-east-1a", 1, end, map[string]string{harness.IsolationKey: "block"})
	reservedNodeClass(t, "block", "block")
	reservedPool(t, "block", "block", "block", "g5.xlarge")
	d := harness.Deployment(ns, "trainer", 1, "1", "4Gi")
	pod := &corev1.Pod{Spec: d.Spec.Template.Spec}
	requesting(stevedorev1.ResourceNVIDIAGPU, 1)(pod)
	d.Spec.Template.Spec = pod.Spec
	harness.IsolatedDeployment(t, sb, d, "block")
	first := harness.WaitRunning(t, sb, ns, "trainer", 1)[0].Spec.NodeName
	if node := harness.Node(t, sb, first); node.Labels[stevedorev1.LabelCapacityReservationID] != block {
		t.Fatalf("the pod's first node %s is in reservation %q, want Capacity Block %s", first,
			node.Labels[stevedorev1.LabelCapacityReservationID], block)
	}
	reclaim := end.Add(-30 * time.Minute)
	harness.EventuallyWithin(t, 5*time.Minute, "the trainer to run on another node and the block's node to be gone", func(ctx context.Context) (bool, error) {
		pods, err := harness.RunningPods(ctx, sb, ns, "trainer")
		if err != nil || len(pods) != 1 || pods[0].Spec.NodeName == first {
			return false, err
		}
		_, err = sb.Kube.CoreV1().Nodes().Get(ctx, first, metav1.GetOptions{})
		return err != nil, nil
	})
	if now := time.Now(); !now.Before(reclaim) {
		t.Errorf("the block's node was drained at %s, after EC2 starts reclaiming it (%s)", now.Format(time.RFC3339), reclaim.Format(time.RFC3339))
	}
	var reasons []string
	for _, c := range harness.NodeClaimsOf(t, sb, "block") {
		reasons = append(reasons, string(c.Status.DisruptionReason))
	}
	t.Logf("NodeClaims of the pool now: disruption reasons %v", reasons)
}
