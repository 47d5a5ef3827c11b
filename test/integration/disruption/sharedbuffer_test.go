/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	autoscalingv1beta1 "github.com/stevedore-dev/stevedore/pkg/apis/autoscaling/v1beta1"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// karpenterBuffer is a CapacityBuffer as a Karpenter user writes it: the deprecated v1alpha1 its docs show, a
// PodTemplate selecting on-demand nodes through Karpenter's label and tolerating the NodePool's taint, replicas
// capped by limits (5 asked, 3 CPUs allowed: 3 chunks of 1 CPU).
const karpenterBuffer = `
apiVersion: autoscaling.x-k8s.io/v1alpha1
kind: CapacityBuffer
metadata:
  name: checkout-warm
spec:
  provisioningStrategy: "buffer.x-k8s.io/active-capacity"
  podTemplateRef:
    name: checkout-shape
  replicas: 5
  limits:
    cpu: "3"
    memory: 32Gi
---
apiVersion: v1
kind: PodTemplate
metadata:
  name: checkout-shape
template:
  metadata:
    labels:
      app: checkout
  spec:
    containers:
      - name: pause
        image: registry.k8s.io/pause:3.10
        resources:
          requests:
            cpu: "1"
            memory: 2Gi
    nodeSelector:
      karpenter.sh/capacity-type: on-demand
    tolerations:
      - key: team
        value: checkout
        effect: NoSchedule
`

// applyManifest creates every object of a multi-document YAML in a namespace, as written.
func applyManifest(t *testing.T, ns, manifest string) {
	t.Helper()
	client := dynamic.NewForConfigOrDie(sb.RESTConfig)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(manifest), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatal(err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		resource := map[string]string{"CapacityBuffer": "capacitybuffers", "PodTemplate": "podtemplates"}[gvk.Kind]
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource}
		if _, err := client.Resource(gvr).Namespace(ns).Create(context.Background(), &obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
	}
}

// TestAKarpenterCapacityBufferKeepsWarmCapacity applies a CapacityBuffer written for Karpenter, unchanged: Stevedore
// reads it through v1beta1, keeps room for its 3 chunks on on-demand nodes of the NodePool whose taint the template
// tolerates (launched with no pod asking, and left by emptiness), reports it as Karpenter and Cluster Autoscaler
// do (status.replicas, ReadyForProvisioning, Provisioning), and a burst of such pods binds on those nodes.
func TestAKarpenterCapacityBufferKeepsWarmCapacity(t *testing.T) {
	ns := harness.Namespace(t, sb)
	ctx := harness.Context(t)
	harness.NodePool(t, sb, "checkout", "checkout", func(np *stevedorev1.NodePool) {
		np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "team", Value: "checkout", Effect: corev1.TaintEffectNoSchedule}}
	})
	applyManifest(t, ns, karpenterBuffer)
	buffers := sb.Stevedore.AutoscalingXV1beta1().CapacityBuffers(ns)
	t.Cleanup(func() { _ = buffers.Delete(context.Background(), "checkout-warm", metav1.DeleteOptions{}) })

	var b *autoscalingv1beta1.CapacityBuffer
	harness.EventuallyWithin(t, 3*time.Minute, "the buffer Provisioning", func(ctx context.Context) (bool, error) {
		var err error
		b, err = buffers.Get(ctx, "checkout-warm", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(b.Status.Conditions, autoscalingv1beta1.ConditionProvisioning), nil
	})
	if b.Status.Replicas == nil || *b.Status.Replicas != 3 {
		t.Errorf("status.replicas = %v, want 3 (5 asked, limits allow 3 CPUs of 1-CPU chunks)", b.Status.Replicas)
	}
	if !meta.IsStatusConditionTrue(b.Status.Conditions, autoscalingv1beta1.ConditionReadyForProvisioning) {
		t.Errorf("ReadyForProvisioning is not True: %+v", b.Status.Conditions)
	}
	if b.Status.PodTemplateRef == nil || b.Status.PodTemplateRef.Name != "checkout-shape" || b.Status.PodTemplateGeneration == nil {
		t.Errorf("status.podTemplateRef %v, podTemplateGeneration %v: want checkout-shape and its generation", b.Status.PodTemplateRef, b.Status.PodTemplateGeneration)
	}
	if s := b.Status.ProvisioningStrategy; s == nil || *s != autoscalingv1beta1.ProvisioningStrategyActiveCapacity {
		t.Errorf("status.provisioningStrategy = %v", s)
	}
	chunks := map[string]string{"group": autoscalingv1beta1.GroupName, "namespace": ns, "name": "checkout-warm", "state": "withRoom"}
	if got := harness.Metric(t, "stevedore_capacity_buffer_chunks", chunks); got != 3 {
		t.Errorf("stevedore_capacity_buffer_chunks withRoom = %v, want 3", got)
	}

	warm := map[string]bool{}
	harness.EventuallyWithin(t, 2*time.Minute, "the buffer's nodes initialized", func(context.Context) (bool, error) {
		claims := harness.LiveNodeClaimsOf(t, sb, "checkout")
		for _, c := range claims {
			if !c.IsInitialized() {
				return false, nil
			}
			warm[c.Status.NodeName] = true
		}
		return len(claims) > 0, nil
	})
	for name := range warm {
		node, err := sb.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ct := node.Labels[stevedorev1.LabelCapacityType]; ct != "on-demand" {
			t.Errorf("node %s is %q, the template selects on-demand", name, ct)
		}
	}
	passes := harness.Metric(t, "stevedore_disruption_evaluation_duration_seconds", map[string]string{"method": disruption.MethodEmptiness})
	harness.EventuallyWithin(t, 2*time.Minute, "five more emptiness passes", func(context.Context) (bool, error) {
		return harness.Metric(t, "stevedore_disruption_evaluation_duration_seconds", map[string]string{"method": disruption.MethodEmptiness}) >= passes+5, nil
	})
	if got := len(harness.LiveNodeClaimsOf(t, sb, "checkout")); got != len(warm) {
		t.Fatalf("%d buffer nodes became %d: the warm capacity was consolidated away", len(warm), got)
	}

	pods, names := harness.Pods(ns, "", "checkout", 3, "1", "2Gi", func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{stevedorev1.LabelCapacityType: "on-demand"}
		p.Spec.Tolerations = []corev1.Toleration{{Key: "team", Value: "checkout", Effect: corev1.TaintEffectNoSchedule}}
	})
	harness.CreatePods(t, sb, pods...)
	for _, p := range harness.WaitBound(t, sb, ns, names) {
		if !warm[p.Spec.NodeName] {
			t.Errorf("pod %s bound to %s, not to a node of the buffer %v", p.Name, p.Spec.NodeName, warm)
		}
	}
}
