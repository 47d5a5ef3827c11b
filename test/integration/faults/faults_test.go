/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package faults tests what Stevedore does when AWS misbehaves (throttling, server errors, slow answers, capacity
// running out mid-fleet, instances that never register), when a NodePool can never fit a pod, and that it never
// touches an instance this cluster does not own.
package faults

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	awscloud "github.com/stevedore-dev/stevedore/pkg/cloud/aws"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim/lifecycle"
	"github.com/stevedore-dev/stevedore/pkg/nodeclaim/termination"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

var sb *sandbox.Sandbox

const registrationTimeout = 15 * time.Second

func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{WithScheduler: true, LaunchDelay: 300 * time.Millisecond, PluginArgs: map[string]any{
		"disableDisruption":         true,
		"registrationTimeout":       registrationTimeout.String(),
		"garbageCollectionInterval": "2s",
	}}, func(s *sandbox.Sandbox) { sb = s })
}

// instancesOf returns the emulated instances launched for a NodePool, in every state.
func instancesOf(pool string) []*awsemu.Instance {
	var out []*awsemu.Instance
	for _, inst := range sb.AWS.EC2.Instances() {
		if inst.Tags[stevedorev1.LabelNodePool] == pool {
			out = append(out, inst)
		}
	}
	return out
}

func live(inst *awsemu.Instance) bool { return inst.State == "pending" || inst.State == "running" }

// checkOneInstancePerNodeClaim fails the test when a NodeClaim of the pool got more than one instance or a live
// instance has no live NodeClaim.
func checkOneInstancePerNodeClaim(t *testing.T, pool string) {
	t.Helper()
	claims := harness.LiveNodeClaimsOf(t, sb, pool)
	byID := map[string]bool{}
	for _, c := range claims {
		byID[c.Status.InstanceID] = true
	}
	perClaim := map[string]int{}
	for _, inst := range instancesOf(pool) {
		perClaim[inst.Tags[awscloud.TagNodeClaim]]++
		if live(inst) && !byID[inst.ID] {
			t.Errorf("instance %s (NodeClaim tag %q) runs without a live NodeClaim", inst.ID, inst.Tags[awscloud.TagNodeClaim])
		}
	}
	for claim, n := range perClaim {
		if n > 1 {
			t.Errorf("NodeClaim %s got %d instances, want one", claim, n)
		}
	}
}

// TestThrottlingAndServerErrorsAreRetriedAndReported makes CreateFleet fail more times than one call's SDK
// retries cover. The NodeClaim is tried again with backoff until the launch goes through; each failed attempt is a
// LaunchFailed event naming AWS's error code and a stevedore_nodeclaims_launch_failures_total sample, and no
// NodeClaim gets a second instance.
func TestThrottlingAndServerErrorsAreRetriedAndReported(t *testing.T) {
	for _, tc := range []struct {
		pool, code string
		status     int
	}{
		{"throttled", "RequestLimitExceeded", 503},
		{"servererror", "InternalError", 500},
	} {
		t.Run(tc.code, func(t *testing.T) {
			ns := harness.Namespace(t, sb)
			harness.NodePool(t, sb, tc.pool, tc.pool)
			failures0 := harness.Metric(t, "stevedore_nodeclaims_launch_failures_total", map[string]string{"nodepool": tc.pool, "reason": tc.code})
			calls0 := harness.Metric(t, "stevedore_cloudprovider_api_calls_total", map[string]string{"operation": "CreateFleet", "error": tc.code})
			sb.AWS.InjectFault(awsemu.Fault{Action: "CreateFleet", Code: tc.code, Status: tc.status, Times: 8})
			t.Cleanup(sb.AWS.ClearFaults)
			ps, names := harness.Pods(ns, tc.pool, "p", 2, "1", "1Gi")
			harness.CreatePods(t, sb, ps...)
			harness.WaitBound(t, sb, ns, names)

			claims := harness.LiveNodeClaimsOf(t, sb, tc.pool)
			found := false
			for _, c := range claims {
				evs, err := harness.Events(context.Background(), sb, c.Name)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range evs {
					found = found || (strings.HasPrefix(e, lifecycle.ReasonLaunchFailed+": ") && strings.Contains(e, tc.code))
				}
			}
			if !found {
				t.Errorf("no LaunchFailed event naming %s on the NodeClaims", tc.code)
			}
			if got := harness.Metric(t, "stevedore_nodeclaims_launch_failures_total", map[string]string{"nodepool": tc.pool, "reason": tc.code}) - failures0; got < 1 {
				t.Errorf("stevedore_nodeclaims_launch_failures_total{reason=%s} went up by %v, want at least 1", tc.code, got)
			}
			if got := harness.Metric(t, "stevedore_cloudprovider_api_calls_total", map[string]string{"operation": "CreateFleet", "error": tc.code}) - calls0; got < 1 {
				t.Errorf("stevedore_cloudprovider_api_calls_total{CreateFleet,%s} went up by %v, want at least 1", tc.code, got)
			}
			checkOneInstancePerNodeClaim(t, tc.pool)
		})
	}
}

// TestSlowLaunchesLaunchOnce answers every CreateFleet after three seconds, longer than a provisioning batch
// idles: pods keep coming back through the scheduler while their nodes launch, and none gets a second node.
func TestSlowLaunchesLaunchOnce(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "slow", "slow")
	sb.AWS.InjectFault(awsemu.Fault{Action: "CreateFleet", Delay: 3 * time.Second, Times: -1})
	t.Cleanup(sb.AWS.ClearFaults)
	ps, names := harness.Pods(ns, "slow", "p", 6, "1", "1Gi")
	harness.CreatePods(t, sb, ps...)
	bound := harness.WaitBound(t, sb, ns, names)
	hosts := map[string]bool{}
	for _, p := range bound {
		hosts[p.Spec.NodeName] = true
	}
	for _, c := range harness.LiveNodeClaimsOf(t, sb, "slow") {
		if !hosts[c.Status.NodeName] {
			t.Errorf("NodeClaim %s hosts none of the pods: launched twice for them", c.Name)
		}
	}
	checkOneInstancePerNodeClaim(t, "slow")
}

// TestAPartialFleetLaunchesWhatItCanAndTheRestGoElsewhere leaves room for two m5.large in the preferred NodePool's
// only zone and asks for four nodes' worth of pods: the fleet launches two, the NodeClaims left without an instance
// are deleted with a LaunchFailed event and an InsufficientCapacity sample, the offering is marked unavailable, and
// their pods get nodes from the next NodePool.
func TestAPartialFleetLaunchesWhatItCanAndTheRestGoElsewhere(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "partial", "partial", harness.WithRequirements(
		harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.large"), harness.Req(corev1.LabelTopologyZone, "In", "us-east-1a"),
		harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")), func(np *stevedorev1.NodePool) { np.Spec.Weight = new(int32(50)) })
	harness.NodePool(t, sb, "partial-next", "partial", harness.WithRequirements(
		harness.Req(corev1.LabelInstanceTypeStable, "In", "c5.large"), harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")))
	sb.AWS.EC2.SetCapacity("m5.large", "us-east-1a", "on-demand", 2)
	t.Cleanup(func() { sb.AWS.EC2.SetCapacity("m5.large", "us-east-1a", "on-demand", -1) })
	ice0 := harness.Metric(t, "stevedore_nodeclaims_launch_failures_total", map[string]string{"nodepool": "partial", "reason": "InsufficientCapacity"})

	ps, names := harness.Pods(ns, "partial", "p", 4, "1500m", "2Gi")
	harness.CreatePods(t, sb, ps...)
	bound := harness.WaitBound(t, sb, ns, names)
	types := map[string]int{}
	for _, p := range bound {
		types[harness.Node(t, sb, p.Spec.NodeName).Labels[corev1.LabelInstanceTypeStable]]++
	}
	if types["m5.large"] != 2 || types["c5.large"] != 2 {
		t.Errorf("pods on %v, want 2 on m5.large (the capacity left) and 2 on c5.large from the next NodePool", types)
	}
	if got := harness.Metric(t, "stevedore_nodeclaims_launch_failures_total", map[string]string{"nodepool": "partial", "reason": "InsufficientCapacity"}) - ice0; got < 1 {
		t.Errorf("stevedore_nodeclaims_launch_failures_total{partial,InsufficientCapacity} went up by %v, want at least 1", got)
	}
	checkOneInstancePerNodeClaim(t, "partial")
	checkOneInstancePerNodeClaim(t, "partial-next")
}

// TestAnInstanceThatNeverRegistersIsReplaced withholds the Node of the first instance launched for a NodePool
// (a broken AMI or bootstrap): after the registration timeout its NodeClaim is deleted with a RegistrationTimeout
// event and metric sample, the instance is terminated, and the pod gets a node that does register.
func TestAnInstanceThatNeverRegistersIsReplaced(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "noreg", "noreg")
	var mu sync.Mutex
	withheld := ""
	sb.SetNodeRegistration(func(inst *awsemu.Instance) bool {
		mu.Lock()
		defer mu.Unlock()
		if inst.Tags[stevedorev1.LabelNodePool] != "noreg" {
			return false
		}
		if withheld == "" {
			withheld = inst.ID
		}
		return inst.ID == withheld
	})
	t.Cleanup(func() { sb.SetNodeRegistration(nil) })
	lapses0 := harness.Metric(t, "stevedore_nodeclaims_launch_failures_total", map[string]string{"nodepool": "noreg", "reason": "RegistrationTimeout"})

	ps, names := harness.Pods(ns, "noreg", "p", 1, "1", "1Gi")
	harness.CreatePods(t, sb, ps...)
	var first string
	harness.Eventually(t, "the first NodeClaim to launch", func(context.Context) (bool, error) {
		for _, c := range harness.NodeClaimsOf(t, sb, "noreg") {
			if c.Status.InstanceID != "" {
				first = c.Name
			}
		}
		return first != "", nil
	})
	harness.EventuallyWithin(t, registrationTimeout+2*time.Minute, "the pod to bind on a node that registered", func(context.Context) (bool, error) {
		p, err := sb.Kube.CoreV1().Pods(ns).Get(context.Background(), names[0], metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", err
	})
	mu.Lock()
	id := withheld
	mu.Unlock()
	if inst := sb.AWS.EC2.Instance(id); inst == nil || live(inst) {
		t.Errorf("the instance that never registered (%s) is still live", id)
	}
	ev := harness.WaitEvent(t, sb, first, lifecycle.ReasonRegistrationTimeout)
	t.Logf("event on the NodeClaim whose node never registered: %s", ev)
	if got := harness.Metric(t, "stevedore_nodeclaims_launch_failures_total", map[string]string{"nodepool": "noreg", "reason": "RegistrationTimeout"}) - lapses0; got != 1 {
		t.Errorf("stevedore_nodeclaims_launch_failures_total{noreg,RegistrationTimeout} went up by %v, want 1", got)
	}
	checkOneInstancePerNodeClaim(t, "noreg")
}

// TestANodePoolThatCanNeverFitAPodRecordsEventsAndLaunchesNothing: a pod asking for more CPU than the only type
// its NodePool allows gets a FailedProvisioning event, is found unschedulable again when the scheduler retries it,
// and no NodeClaim is ever created.
func TestANodePoolThatCanNeverFitAPodRecordsEventsAndLaunchesNothing(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "nofit", "nofit", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.large")))
	unschedulable0 := harness.Metric(t, "stevedore_provisioning_unschedulable_pods_total", nil)
	ps, _ := harness.Pods(ns, "nofit", "big", 1, "3", "1Gi")
	harness.CreatePods(t, sb, ps...)
	ev := harness.WaitEvent(t, sb, "big-0", provision.ReasonFailedProvision)
	t.Logf("event on the pod: %s", ev)
	// the scheduler retries the pod with backoff: wait for one more verdict on it
	harness.EventuallyWithin(t, 3*time.Minute, "the pod to be found unschedulable twice", func(context.Context) (bool, error) {
		return harness.Metric(t, "stevedore_provisioning_unschedulable_pods_total", nil)-unschedulable0 >= 2, nil
	})
	if n := len(harness.NodeClaimsOf(t, sb, "nofit")); n != 0 {
		t.Errorf("%d NodeClaims for a NodePool that cannot fit the pod, want none", n)
	}
	if got := harness.Metric(t, "stevedore_nodeclaims_created_total", map[string]string{"nodepool": "nofit"}); got != 0 {
		t.Errorf("stevedore_nodeclaims_created_total{nofit} = %v, want 0", got)
	}
}

// TestInstancesThisClusterDoesNotOwnSurvive plants instances in the emulated EC2 next to one of the cluster's
// nodes: one with no tags, one of another cluster, one of this cluster with no NodeClaim (an orphan), and a second
// instance tagged with the live NodeClaim (a duplicate). Garbage collection terminates the last two; then a
// NodeClaim naming the foreign instance is deleted: it goes, with a NotOwned event, and both foreign instances run
// on.
func TestInstancesThisClusterDoesNotOwnSurvive(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "owned", "owned")
	ps, names := harness.Pods(ns, "owned", "p", 1, "1", "1Gi")
	harness.CreatePods(t, sb, ps...)
	harness.WaitBound(t, sb, ns, names)
	claim := harness.LiveNodeClaimsOf(t, sb, "owned")[0]

	owned := awscloud.OwnershipTag("my-cluster")
	foreign := sb.AWS.EC2.RunInstance("m5.large", "us-east-1a", map[string]string{"Name": "someone-else"})
	otherCluster := sb.AWS.EC2.RunInstance("m5.large", "us-east-1a", map[string]string{
		awscloud.OwnershipTag("other-cluster"): "owned", stevedorev1.LabelNodePool: "owned"})
	orphan := sb.AWS.EC2.RunInstance("m5.large", "us-east-1a", map[string]string{owned: "owned", stevedorev1.LabelNodePool: "owned"})
	duplicate := sb.AWS.EC2.RunInstance("m5.large", "us-east-1a", map[string]string{owned: "owned",
		stevedorev1.LabelNodePool: "owned", awscloud.TagNodeClaim: claim.Name})
	harness.EventuallyWithin(t, 3*time.Minute, "garbage collection of the orphan and the duplicate", func(context.Context) (bool, error) {
		return !live(sb.AWS.EC2.Instance(orphan.ID)) && !live(sb.AWS.EC2.Instance(duplicate.ID)), nil
	})
	if inst := sb.AWS.EC2.Instance(claim.Status.InstanceID); !live(inst) {
		t.Errorf("the NodeClaim's own instance %s is %s", inst.ID, inst.State)
	}

	// a NodeClaim that names the foreign instance, copied from one of Stevedore's with its finalizer, as a
	// mistaken or hostile client could write it
	ctx := context.Background()
	nc := &stevedorev1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "names-a-foreign-instance", Labels: map[string]string{stevedorev1.LabelNodePool: "owned"},
		Finalizers: []string{stevedorev1.TerminationFinalizer}},
		// a node class that does not exist: Stevedore cannot launch for the NodeClaim before the test names the
		// foreign instance in its status
		Spec: stevedorev1.NodeClaimSpec{NodeClassRef: &stevedorev1.NodeClassReference{Name: "no-such-class"}}}
	if _, err := sb.Stevedore.StevedoreV1().NodeClaims().Create(ctx, nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Stevedore's controllers write the new NodeClaim's status too (its launch fails for want of a node class):
	// read-modify-write until the write lands on the latest version
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := sb.Stevedore.StevedoreV1().NodeClaims().Get(ctx, nc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.InstanceID, cur.Status.ProviderID = foreign.ID, "aws:///us-east-1a/"+foreign.ID
		cur.Status.NodeName = "ip-foreign.ec2.internal"
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: stevedorev1.ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched"})
		_, err = sb.Stevedore.StevedoreV1().NodeClaims().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Stevedore.StevedoreV1().NodeClaims().Delete(ctx, nc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, "the NodeClaim naming the foreign instance to go", func(ctx context.Context) (bool, error) {
		_, err := sb.Stevedore.StevedoreV1().NodeClaims().Get(ctx, nc.Name, metav1.GetOptions{})
		return err != nil, nil
	})
	ev := harness.WaitEvent(t, sb, nc.Name, termination.ReasonNotOwned)
	t.Logf("event on the NodeClaim: %s", ev)
	for _, inst := range []*awsemu.Instance{foreign, otherCluster} {
		if got := sb.AWS.EC2.Instance(inst.ID); !live(got) {
			t.Errorf("instance %s (tags %v) not owned by this cluster is %s", inst.ID, inst.Tags, got.State)
		}
	}
}

// TestTheFirstLaunchFollowsTheFirstGoodCatalogRead restarts the scheduler while AWS fails its catalog reads: the
// first two reads fail (each after the SDK's own retries), and with no catalog held nothing can be launched. The
// reads are tried again within seconds, doubling (not a minute later), and once one succeeds the pods waiting are
// planned and bound without waiting for their next retry.
func TestTheFirstLaunchFollowsTheFirstGoodCatalogRead(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "catalog", "catalog")
	if err := sb.StopScheduler(); err != nil {
		t.Fatal(err)
	}
	const failedReads = 2
	// each read asks DescribeInstanceTypes first; the SDK makes three attempts at it
	sb.AWS.InjectFault(awsemu.Fault{Action: "DescribeInstanceTypes", Code: "RequestLimitExceeded", Status: 503, Times: 3 * failedReads})
	t.Cleanup(sb.AWS.ClearFaults)
	failures0 := harness.Metric(t, "stevedore_cloudprovider_catalog_refresh_failures_total", nil)
	reads0 := sb.AWS.Calls()["EC2.DescribeInstanceTypes"]
	if err := sb.StartScheduler(context.Background()); err != nil {
		t.Fatal(err)
	}
	ps, names := harness.Pods(ns, "catalog", "p", 2, "1", "1Gi")
	harness.CreatePods(t, sb, ps...)
	// the old retry interval alone (a minute after each failed read) is more than this wait
	harness.EventuallyWithin(t, 45*time.Second, "the pods to bind once the catalog is read", func(ctx context.Context) (bool, error) {
		for _, name := range names {
			pod, err := sb.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || pod.Spec.NodeName == "" {
				return false, err
			}
		}
		return true, nil
	})
	if got := harness.Metric(t, "stevedore_cloudprovider_catalog_refresh_failures_total", nil) - failures0; got != failedReads {
		t.Errorf("stevedore_cloudprovider_catalog_refresh_failures_total went up by %v, want %d", got, failedReads)
	}
	if got := sb.AWS.Calls()["EC2.DescribeInstanceTypes"] - reads0; got <= 3*failedReads {
		t.Errorf("DescribeInstanceTypes asked %d times since the restart, want the %d failed attempts and a good read", got, 3*failedReads)
	}
}
