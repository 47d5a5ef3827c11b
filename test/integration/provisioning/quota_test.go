/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provision"
	"github.com/stevedore-dev/stevedore/pkg/quota"
	"github.com/stevedore-dev/stevedore/pkg/staticpool"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// createQuota creates a CapacityQuota selecting the nodes with the label, deleted when the test ends.
func createQuota(t *testing.T, name, key, value string, limits ...string) {
	t.Helper()
	resources := corev1.ResourceList{}
	for i := 0; i+1 < len(limits); i += 2 {
		resources[corev1.ResourceName(limits[i])] = resource.MustParse(limits[i+1])
	}
	cq := &autoscalingv1beta1.CapacityQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: autoscalingv1beta1.CapacityQuotaSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
		Limits:   autoscalingv1beta1.CapacityQuotaLimits{Resources: resources}}}
	quotas := sb.Stevedore.AutoscalingXV1beta1().CapacityQuotas()
	if _, err := quotas.Create(context.Background(), cq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = quotas.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// initializedClaims returns the live NodeClaims of the NodePools once every one is initialized (nil before).
func initializedClaims(t *testing.T, pools ...string) []stevedorev1.NodeClaim {
	t.Helper()
	var out []stevedorev1.NodeClaim
	for _, pool := range pools {
		for _, c := range harness.LiveNodeClaimsOf(t, sb, pool) {
			if !c.IsInitialized() {
				return nil
			}
			out = append(out, c)
		}
	}
	return out
}

// cpuOf sums the NodeClaims' cpu capacity, in cores.
func cpuOf(claims []stevedorev1.NodeClaim) int64 {
	var total int64
	for _, c := range claims {
		q := c.Status.Capacity[corev1.ResourceCPU]
		total += q.Value()
	}
	return total
}

// settled waits until the NodeClaims of the pools are initialized and the quota has then kept a node from launching
// once more, and returns the live NodeClaims: what a burst ends up with once a later plan was refused too.
func settled(t *testing.T, name string, pools ...string) []stevedorev1.NodeClaim {
	t.Helper()
	harness.EventuallyWithin(t, 3*time.Minute, "the NodeClaims of "+strings.Join(pools, ", ")+" initialized", func(context.Context) (bool, error) {
		return initializedClaims(t, pools...) != nil, nil
	})
	limited := func() float64 {
		return harness.Metric(t, "stevedore_capacity_quota_limited_total", map[string]string{"quota": name})
	}
	before := limited()
	harness.EventuallyWithin(t, 3*time.Minute, "one more plan held back by quota "+name, func(context.Context) (bool, error) {
		return limited() > before, nil
	})
	var claims []stevedorev1.NodeClaim
	harness.EventuallyWithin(t, 3*time.Minute, "the NodeClaims of "+strings.Join(pools, ", ")+" initialized", func(context.Context) (bool, error) {
		claims = initializedClaims(t, pools...)
		return claims != nil, nil
	})
	return claims
}

// TestABurstAgainstACapacityQuotaLaunchesExactlyUpToIt: two NodePools of 4-vCPU types share a CapacityQuota of 16
// CPUs; a burst of 30 one-CPU pods launches exactly 16 CPUs of nodes across both, whatever batches it takes; the
// pods left get FailedProvision naming the quota, which reports 16 CPUs used and LimitReached. Raising the limit to
// 24 launches exactly 8 CPUs more for them.
func TestABurstAgainstACapacityQuotaLaunchesExactlyUpToIt(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "quota-m5", "quota", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.xlarge")))
	harness.NodePool(t, sb, "quota-c5", "quota", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "c5.xlarge")))
	createQuota(t, "burst", harness.IsolationKey, "quota", "cpu", "16")
	pods, names := harness.Pods(ns, "quota", "burst", 30, "1", "512Mi")
	harness.CreatePods(t, sb, pods...)

	claims := settled(t, "burst", "quota-m5", "quota-c5")
	if got := cpuOf(claims); got != 16 {
		t.Fatalf("%d NodeClaims with %d CPUs in all, want exactly the quota's 16", len(claims), got)
	}
	t.Logf("30 one-CPU pods against a quota of 16 CPUs: %d NodeClaims, %d CPUs", len(claims), cpuOf(claims))
	var pending string
	for _, n := range names {
		p, err := sb.Kube.CoreV1().Pods(ns).Get(harness.Context(t), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName == "" {
			pending = n
		}
	}
	if pending == "" {
		t.Fatal("every pod got a node: the burst does not reach the quota")
	}
	harness.WaitEventSaying(t, sb, pending, provision.ReasonFailedProvision, "the CapacityQuota burst is reached (cpu)")
	harness.EventuallyWithin(t, time.Minute, "quota burst reporting 16 CPUs used and LimitReached", func(ctx context.Context) (bool, error) {
		cq, err := sb.Stevedore.AutoscalingXV1beta1().CapacityQuotas().Get(ctx, "burst", metav1.GetOptions{})
		if err != nil || cq.Status.Used == nil {
			return false, err
		}
		used := cq.Status.Used.Resources[corev1.ResourceCPU]
		cond := meta.FindStatusCondition(cq.Status.Conditions, autoscalingv1beta1.ConditionLimitReached)
		return used.Value() == 16 && cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == quota.ReasonLaunchLimited, nil
	})
	if got := harness.Metric(t, "stevedore_capacity_quota_usage", map[string]string{"quota": "burst", "resource": "cpu"}); got != 16 {
		t.Errorf("stevedore_capacity_quota_usage = %v, want 16", got)
	}

	// the boundary moves: 8 CPUs more, two 4-CPU nodes, for the pods left
	quotas := sb.Stevedore.AutoscalingXV1beta1().CapacityQuotas()
	cq, err := quotas.Get(harness.Context(t), "burst", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cq.Spec.Limits.Resources[corev1.ResourceCPU] = resource.MustParse("24")
	if _, err := quotas.Update(harness.Context(t), cq, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.EventuallyWithin(t, 3*time.Minute, "24 CPUs of nodes", func(context.Context) (bool, error) {
		return cpuOf(harness.LiveNodeClaimsOf(t, sb, "quota-m5"))+cpuOf(harness.LiveNodeClaimsOf(t, sb, "quota-c5")) >= 24, nil
	})
	raised := settled(t, "burst", "quota-m5", "quota-c5")
	if got := cpuOf(raised); got != 24 {
		t.Errorf("%d CPUs of nodes after raising the quota to 24", got)
	}
	t.Logf("quota raised to 24 CPUs: %d NodeClaims, %d CPUs", len(raised), cpuOf(raised))
}

// TestACapacityBufferStaysWithinACapacityQuota: a buffer of three chunks, each needing its own m5.large, under a
// quota of one node: one node comes up for the buffer, which reports the other chunks Unschedulable naming the
// quota.
func TestACapacityBufferStaysWithinACapacityQuota(t *testing.T) {
	ns := harness.Namespace(t, sb)
	ctx := harness.Context(t)
	createQuota(t, "warm", stevedorev1.LabelNodePool, "quota-warm", "nodes", "1")
	harness.NodePool(t, sb, "quota-warm", "quota-warm", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.large")))
	tmpl := harness.Isolated(harness.Pod(ns, "chunk", "1500m", "1Gi"), "quota-warm")
	if _, err := sb.Kube.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: ns},
		Template: corev1.PodTemplateSpec{Spec: tmpl.Spec}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	three := int32(3)
	buffers := sb.Stevedore.StevedoreV1().CapacityBuffers(ns)
	if _, err := buffers.Create(ctx, &stevedorev1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: ns},
		Spec: stevedorev1.CapacityBufferSpec{PodTemplateRef: &stevedorev1.LocalObjectReference{Name: "chunk"}, Replicas: &three}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = buffers.Delete(context.Background(), "warm", metav1.DeleteOptions{}) })
	harness.EventuallyWithin(t, 3*time.Minute, "the buffer Unschedulable naming the quota", func(ctx context.Context) (bool, error) {
		b, err := buffers.Get(ctx, "warm", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(b.Status.Conditions, stevedorev1.ConditionReady)
		return cond != nil && cond.Reason == "Unschedulable" && strings.Contains(cond.Message, "the CapacityQuota warm is reached (nodes)"), nil
	})
	if claims := settled(t, "warm", "quota-warm"); len(claims) != 1 {
		t.Errorf("%d nodes for the buffer, want the quota's 1", len(claims))
	}
}

// TestCapacityQuotasCapStaticNodePoolsAndHourlyCost: a quota of 2 nodes keeps a static NodePool of 3 replicas at 2
// (StaticScaleUpLimited names it), and a quota of $0.30 an hour on an on-demand NodePool launches as many nodes as
// fit in it, one per pod, and no more.
func TestCapacityQuotasCapStaticNodePoolsAndHourlyCost(t *testing.T) {
	three := int64(3)
	createQuota(t, "static-nodes", stevedorev1.LabelNodePool, "quota-static", "nodes", "2")
	harness.NodePool(t, sb, "quota-static", "quota-static", func(np *stevedorev1.NodePool) { np.Spec.Replicas = &three })

	ns := harness.Namespace(t, sb)
	createQuota(t, "cost", stevedorev1.LabelNodePool, "quota-cost", "stevedore.dev/hourly-cost", "0.3")
	harness.NodePool(t, sb, "quota-cost", "quota-cost", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.large"),
		harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")))
	pods, _ := harness.Pods(ns, "quota-cost", "priced", 6, "1", "512Mi", func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "priced"}}, TopologyKey: corev1.LabelHostname}}}}
	})
	harness.CreatePods(t, sb, pods...)

	harness.WaitEventSaying(t, sb, "quota-static", staticpool.ReasonStaticScaleUpLimited, "the CapacityQuota static-nodes is reached (nodes)")
	if static := settled(t, "static-nodes", "quota-static"); len(static) != 2 {
		t.Errorf("%d nodes in the static NodePool of 3 replicas, want the quota's 2", len(static))
	}

	priced := settled(t, "cost", "quota-cost")
	var cost, each float64
	for _, c := range priced {
		p, err := strconv.ParseFloat(c.Status.Price, 64)
		if err != nil {
			t.Fatalf("NodeClaim %s price %q: %v", c.Name, c.Status.Price, err)
		}
		cost, each = cost+p, p
	}
	if len(priced) == 0 || cost > 0.3 || cost+each <= 0.3 {
		t.Errorf("%d nodes at $%s/h in all, want as many $%s/h nodes as fit in $0.30/h", len(priced),
			stevedorev1.FormatPrice(cost), stevedorev1.FormatPrice(each))
	}
	t.Logf("%d on-demand m5.large nodes at $%s/h within a quota of $0.30/h", len(priced), stevedorev1.FormatPrice(cost))
}
