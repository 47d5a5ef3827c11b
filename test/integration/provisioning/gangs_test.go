/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedv1alpha1 "github.com/stevedore-dev/stevedore/pkg/apis/scheduling/v1alpha1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/plugins/coscheduling"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestAGangBindsWholeOrNotAtAll runs a coscheduling PodGroup of four 3-CPU workers, one per m5.xlarge, through
// what stops a gang: its PodGroup missing (the pods wait, saying so, and nothing is launched), a NodePool limit
// that allows three of the four nodes (nothing launched, nothing bound, the pods say why), and the limit raised
// (the four nodes launched and the four pods bound).
func TestAGangBindsWholeOrNotAtAll(t *testing.T) {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "gang", "gang", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.xlarge")),
		func(np *stevedorev1.NodePool) {
			np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("12")}
		})
	workers, names := harness.Pods(ns, "gang", "worker", 4, "3", "1Gi", func(p *corev1.Pod) {
		p.Labels[schedv1alpha1.PodGroupLabel] = "train"
	})
	harness.CreatePods(t, sb, workers...)

	// no PodGroup yet: the pods wait before scheduling, and say why
	if ev := harness.WaitEvent(t, sb, names[0], coscheduling.ReasonGangWaiting); !strings.Contains(ev, "PodGroup "+ns+"/train") {
		t.Errorf("event %q, want it to name the missing PodGroup", ev)
	}
	assertNothingLaunchedOrBound(ctx, t, ns, names)

	minMember := int32(4)
	if _, err := sb.Stevedore.CoschedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: minMember},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// room for three of the four: nothing of the gang is launched
	want := "gang " + ns + "/train needs 4 pods placed at once and only 3 can be"
	harness.Eventually(t, "every worker to say the gang cannot be placed whole", func(ctx context.Context) (bool, error) {
		for _, name := range names {
			evs, err := harness.Events(ctx, sb, name)
			if err != nil {
				return false, err
			}
			found := false
			for _, e := range evs {
				found = found || strings.HasPrefix(e, provision.ReasonFailedProvision+": ") && strings.Contains(e, want)
			}
			if !found {
				return false, nil
			}
		}
		return true, nil
	})
	assertNothingLaunchedOrBound(ctx, t, ns, names)

	// room for the four: the gang binds whole
	np, err := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, "gang", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("16")}
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := harness.WaitBound(t, sb, ns, names)
	nodes := map[string]bool{}
	for _, p := range bound {
		nodes[p.Spec.NodeName] = true
	}
	if len(nodes) != 4 {
		t.Errorf("the gang's 4 pods are on %d nodes, want one each", len(nodes))
	}
	harness.Eventually(t, "PodGroup train Running with 4 pods running", func(ctx context.Context) (bool, error) {
		pg, err := sb.Stevedore.CoschedulingV1alpha1().PodGroups(ns).Get(ctx, "train", metav1.GetOptions{})
		return err == nil && pg.Status.Phase == schedv1alpha1.PodGroupRunning && pg.Status.Running == 4, err
	})
}

// assertNothingLaunchedOrBound checks that the gang's NodePool has no NodeClaim and no pod of the gang is bound.
func assertNothingLaunchedOrBound(ctx context.Context, t *testing.T, ns string, names []string) {
	t.Helper()
	if claims := harness.NodeClaimsOf(t, sb, "gang"); len(claims) > 0 {
		t.Errorf("%d NodeClaims launched for a gang that cannot run, want none", len(claims))
	}
	harness.CheckUnbound(ctx, t, sb, ns, names)
}

// TestAGangRequestingEFALaunchesWholeIntoAClusterPlacementGroupOfItsOwn: a PodGroup of sixteen workers, each asking
// for eight GPUs and four EFA interfaces, on a NodePool of p4d.24xlarge whose EC2NodeClass gives each gang a cluster
// placement group: the sixteen nodes launch in one fleet into one placement group created for the gang (cluster
// strategy, tagged for the cluster and the gang), in one zone, each with its four EFA interfaces, and the gang binds
// whole.
func TestAGangRequestingEFALaunchesWholeIntoAClusterPlacementGroupOfItsOwn(t *testing.T) {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	nc := harness.NewNodeClass()
	nc.Name, nc.Spec.GangPlacementGroup = "training", stevedorev1.GangPlacementGroupCluster
	if _, err := sb.Stevedore.StevedoreV1().EC2NodeClasses().Create(ctx, nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sb.Stevedore.StevedoreV1().EC2NodeClasses().Delete(context.Background(), "training", metav1.DeleteOptions{})
	})
	harness.NodePool(t, sb, "train-efa", "train-efa", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "p4d.24xlarge")),
		func(np *stevedorev1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "training" })
	const size = 16
	if _, err := sb.Stevedore.CoschedulingV1alpha1().PodGroups(ns).Create(ctx, &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: ns}, Spec: schedv1alpha1.PodGroupSpec{MinMember: size},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	workers, names := harness.Pods(ns, "train-efa", "worker", size, "4", "16Gi", requesting(stevedorev1.ResourceNVIDIAGPU, 8),
		requesting(stevedorev1.ResourceEFA, 4), func(p *corev1.Pod) { p.Labels[schedv1alpha1.PodGroupLabel] = "train" })
	harness.CreatePods(t, sb, workers...)
	bound := harness.WaitBound(t, sb, ns, names)

	groups, zones, nodes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, p := range bound {
		nodes[p.Spec.NodeName] = true
		inst := sb.AWS.EC2.InstanceByNodeName(p.Spec.NodeName)
		if inst == nil {
			t.Fatalf("no instance for node %s", p.Spec.NodeName)
		}
		groups[inst.PlacementGroup], zones[inst.Zone] = true, true
		efa := efaInterfacesOf(inst)
		if efa != 4 {
			t.Errorf("instance %s of worker %s has %d EFA interfaces, want 4", inst.ID, p.Name, efa)
		}
	}
	if len(nodes) != size || len(zones) != 1 || len(groups) != 1 || groups[""] {
		t.Fatalf("the gang runs on %d nodes in zones %v and placement groups %v; want %d nodes in one zone and one placement group",
			len(nodes), zones, groups, size)
	}
	for name := range groups {
		g := sb.AWS.EC2.PlacementGroups()[name]
		if g.Strategy != "cluster" || g.Tags["stevedore.dev/gang"] != ns+"/train" {
			t.Errorf("placement group %s: strategy %q, tags %v; want a cluster group tagged with the gang %s/train", name, g.Strategy, g.Tags, ns)
		}
		t.Logf("the %d workers run on p4d.24xlarge nodes in %v, placement group %s (%s)", size, zones, name, g.Strategy)
	}
}

// efaInterfacesOf counts the EFA interfaces an emulated instance was launched with.
func efaInterfacesOf(inst *awsemu.Instance) int {
	n := 0
	for _, ni := range inst.LaunchTemplate.NetworkInterfaces {
		if ni.InterfaceType == "efa" {
			n++
		}
	}
	return n
}
