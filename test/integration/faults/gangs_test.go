/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package faults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestAGangFacingThreeOfFourKeepsNothingRunningThenRunsWholeElsewhere leaves EC2 room for three of the four
// m5.xlarge a gang of four 3-CPU workers needs: the gang's four NodeClaims share one all-or-nothing fleet, which
// launches nothing; the offering is marked unavailable, the gang cannot be placed whole and its pods say so, and
// no pod of it is bound. With a NodePool of another type added, the gang is planned there and binds whole.
func TestAGangFacingThreeOfFourKeepsNothingRunningThenRunsWholeElsewhere(t *testing.T) {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "gang34", "gang34", harness.WithRequirements(
		harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.xlarge"), harness.Req(corev1.LabelTopologyZone, "In", "us-east-1a"),
		harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")))
	sb.AWS.EC2.SetCapacity("m5.xlarge", "us-east-1a", "on-demand", 3)
	t.Cleanup(func() { sb.AWS.EC2.SetCapacity("m5.xlarge", "us-east-1a", "on-demand", -1) })
	fleets := sb.AWS.EC2.Calls()["CreateFleet"]

	// the pods placed wait at Permit for the rest of the gang at most 10 s
	timeout := int32(10)
	if _, err := sb.Stevedore.CoschedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: 4, ScheduleTimeoutSeconds: &timeout},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	workers, names := harness.Pods(ns, "gang34", "worker", 4, "3", "1Gi", func(p *corev1.Pod) {
		p.Labels[schedv1alpha1.PodGroupLabel] = "train"
	})
	harness.CreatePods(t, sb, workers...)

	// the fleet launched nothing, and the gang, planned again, cannot be placed whole
	want := "gang " + ns + "/train needs 4 pods placed at once"
	harness.WaitEventSaying(t, sb, names[0], provision.ReasonFailedProvision, want)
	if calls := sb.AWS.EC2.Calls()["CreateFleet"] - fleets; calls != 1 {
		t.Errorf("%d CreateFleet calls, want the gang's one", calls)
	}
	if launched := instancesOf("gang34"); len(launched) != 0 {
		t.Errorf("%d instances of gang34 launched, want none: the gang's fleet is all or nothing", len(launched))
	}
	harness.CheckUnbound(ctx, t, sb, ns, names)

	// capacity elsewhere: the gang is planned there, whole
	harness.NodePool(t, sb, "gang34-next", "gang34", harness.WithRequirements(
		harness.Req(corev1.LabelInstanceTypeStable, "In", "c5.xlarge"), harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")))
	bound := harness.WaitBound(t, sb, ns, names)
	for _, p := range bound {
		if pool := harness.Node(t, sb, p.Spec.NodeName).Labels[stevedorev1.LabelNodePool]; pool != "gang34-next" {
			t.Errorf("pod %s on a node of NodePool %s, want gang34-next", p.Name, pool)
		}
	}
	for _, inst := range instancesOf("gang34") {
		if live(inst) {
			t.Errorf("instance %s of gang34 runs, want none", inst.ID)
		}
	}
	checkOneInstancePerNodeClaim(t, "gang34-next")
}
