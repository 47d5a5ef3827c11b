/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provisioning

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/provreq"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// bookingTime is how long this sandbox holds a Provisioned request's room.
const bookingTime = 40 * time.Second

// TestAProvisioningRequestLaunchesAllOrNothingAndItsPodsTakeTheRoom asks for three 3-CPU pods, one per
// m5.xlarge, with best-effort-atomic-scale-up: with a NodePool limit that allows two of the three nodes nothing is
// launched and the request says why; with the limit raised the three nodes launch in one group and the request is
// Provisioned once they are up; a check-capacity request for one more such pod then finds no room (the booked
// room is not its); the three pods that consume the request bind on the nodes launched for it, and the booking
// ends consumed.
func TestAProvisioningRequestLaunchesAllOrNothingAndItsPodsTakeTheRoom(t *testing.T) {
	ctx := harness.Context(t)
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "provreq", "provreq", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.xlarge")),
		func(np *stevedorev1.NodePool) {
			np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("8")}
		})
	template(t, ns, "worker", harness.Isolated(harness.Pod(ns, "worker", "3", "1Gi"), "provreq"))
	request(t, ns, "train", autoscalingv1.ClassBestEffortAtomicScaleUp, "worker", 3)

	waitCondition(t, ns, "train", autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	waitCondition(t, ns, "train", autoscalingv1.ConditionAccepted, metav1.ConditionTrue, provreq.ReasonAccepted)
	if claims := harness.NodeClaimsOf(t, sb, "provreq"); len(claims) > 0 {
		t.Fatalf("%d NodeClaims launched for a request only two thirds of which fit, want none", len(claims))
	}

	np, err := sb.Stevedore.StevedoreV1().NodePools().Get(ctx, "provreq", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np.Spec.Limits = stevedorev1.Limits{corev1.ResourceCPU: resource.MustParse("12")}
	if _, err := sb.Stevedore.StevedoreV1().NodePools().Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, "train", autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	claims := harness.NodeClaimsOf(t, sb, "provreq")
	if len(claims) != 3 {
		t.Fatalf("%d NodeClaims launched for the request, want 3", len(claims))
	}
	booked := map[string]bool{}
	group := claims[0].Annotations[stevedorev1.AnnotationLaunchGroup]
	for _, c := range claims {
		if got := c.Annotations[stevedorev1.AnnotationProvisioningRequest]; got != ns+"/train" {
			t.Errorf("NodeClaim %s names request %q, want %s/train", c.Name, got, ns)
		}
		if g := c.Annotations[stevedorev1.AnnotationLaunchGroup]; g == "" || g != group {
			t.Errorf("NodeClaim %s launch group %q, want the three in one group (%q)", c.Name, g, group)
		}
		if !c.IsInitialized() {
			t.Errorf("request Provisioned while NodeClaim %s is not initialized", c.Name)
		}
		booked[c.Status.NodeName] = true
	}

	// the booked room is the request's: a check of one more such pod finds none, and launches nothing
	request(t, ns, "check", autoscalingv1.ClassCheckCapacity, "worker", 1)
	waitCondition(t, ns, "check", autoscalingv1.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)

	pods, names := harness.Pods(ns, "provreq", "consumer", 3, "3", "1Gi", func(p *corev1.Pod) {
		p.Annotations = map[string]string{autoscalingv1.AnnotationConsume: "train", autoscalingv1.AnnotationClass: autoscalingv1.ClassBestEffortAtomicScaleUp}
	})
	harness.CreatePods(t, sb, pods...)
	for name, p := range harness.WaitBound(t, sb, ns, names) {
		if !booked[p.Spec.NodeName] {
			t.Errorf("pod %s bound to %s, not a node launched for the request", name, p.Spec.NodeName)
		}
	}
	waitCondition(t, ns, "train", autoscalingv1.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonBookingConsumed)
	if n := len(harness.NodeClaimsOf(t, sb, "provreq")); n != 3 {
		t.Errorf("%d NodeClaims after the pods came, want the 3 launched for them", n)
	}
}

// TestACheckCapacityRequestIsHeldThenExpires checks room the nodes have: a request for a pod that fits a node up
// already is Provisioned (CapacityIsFound) with no launch, and its booking expires after the booking time when no
// pod comes for it.
func TestACheckCapacityRequestIsHeldThenExpires(t *testing.T) {
	ns := harness.Namespace(t, sb)
	harness.NodePool(t, sb, "check", "check", harness.WithRequirements(harness.Req(corev1.LabelInstanceTypeStable, "In", "m5.xlarge")))
	pods, names := harness.Pods(ns, "check", "resident", 1, "1", "1Gi")
	harness.CreatePods(t, sb, pods...)
	harness.WaitBound(t, sb, ns, names)
	before := len(harness.NodeClaimsOf(t, sb, "check"))

	template(t, ns, "small", harness.Isolated(harness.Pod(ns, "small", "1", "1Gi"), "check"))
	request(t, ns, "fits", autoscalingv1.ClassCheckCapacity, "small", 2)
	provisioned := waitCondition(t, ns, "fits", autoscalingv1.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	if after := len(harness.NodeClaimsOf(t, sb, "check")); after != before {
		t.Errorf("%d NodeClaims after a check-capacity request, want the %d there were", after, before)
	}
	expired := waitCondition(t, ns, "fits", autoscalingv1.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonBookingTimeExpired)
	if held := expired.LastTransitionTime.Sub(provisioned.LastTransitionTime.Time); held < bookingTime-time.Second {
		t.Errorf("booking held %s, want at least the booking time %s", held, bookingTime)
	}
}

// template creates a PodTemplate from a pod.
func template(t *testing.T, ns, name string, pod *corev1.Pod) {
	t.Helper()
	pt := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}
	if _, err := sb.Kube.CoreV1().PodTemplates(ns).Create(harness.Context(t), pt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// request creates a ProvisioningRequest for count pods of a PodTemplate.
func request(t *testing.T, ns, name, class, tmpl string, count int32) {
	t.Helper()
	pr := &autoscalingv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: autoscalingv1.ProvisioningRequestSpec{ProvisioningClassName: class,
			PodSets: []autoscalingv1.PodSet{{PodTemplateRef: autoscalingv1.Reference{Name: tmpl}, Count: count}}}}
	if _, err := sb.Stevedore.AutoscalingXV1().ProvisioningRequests(ns).Create(harness.Context(t), pr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitCondition waits for a request's condition to have a status and reason, and returns it.
func waitCondition(t *testing.T, ns, name, condition string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	var last string
	harness.Eventually(t, fmt.Sprintf("ProvisioningRequest %s %s=%s (%s)", name, condition, status, reason), func(ctx context.Context) (bool, error) {
		pr, err := sb.Stevedore.AutoscalingXV1().ProvisioningRequests(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(pr.Status.Conditions, condition)
		if c == nil {
			return false, nil
		}
		if s := fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message); s != last {
			t.Logf("%s %s: %s", name, condition, s)
			last = s
		}
		got = *c
		return c.Status == status && c.Reason == reason, nil
	})
	return got
}
