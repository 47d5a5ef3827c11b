/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package provision

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/solver"
)

func TestPodsClaimingDevicesAreKeptToTheTypesThatSatisfyThem(t *testing.T) {
	all, err := cloud.CatalogInstanceTypes(catalog.Default(), nil, 0.075)
	if err != nil {
		t.Fatal(err)
	}
	var its []*cloud.InstanceType
	for _, it := range all {
		if slices.Contains([]string{"m7i.large", "g5.xlarge", "g5.12xlarge", "g6e.12xlarge", "p4d.24xlarge"}, it.Name) {
			its = append(its, it)
		}
	}
	pools := []solver.NodePoolOption{{InstanceTypes: its}}
	claimIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	classIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = classIndex.Add(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com"`}}}}})
	claim := func(name string, count int64, selector string) {
		_ = claimIndex.Add(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID(name)},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpus",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
					Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}}}}}}}})
	}
	claim("big", 2, `device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0`)
	claim("big2", 2, `device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0`)
	claim("many", 16, "true")
	objects := DeviceObjects{Claims: resourcelisters.NewResourceClaimLister(claimIndex), Classes: resourcelisters.NewDeviceClassLister(classIndex)}
	pod := func(name, claim string, fromTemplate bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID(name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		if claim == "" {
			return p
		}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
		if fromTemplate {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("t")}}
			if claim != "-" {
				p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(claim)}}
			}
			return p
		}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim)}}
		return p
	}
	web, big, many, waiting := pod("web", "", false), pod("big", "big", false), pod("many", "many", false), pod("waiting", "-", true)
	var d deviceTypes

	// no pod claims devices: the same pods, untouched
	plain := []*corev1.Pod{web}
	out, refused, err := d.forSolver(t.Context(), objects, plain, pools, true)
	if err != nil || len(refused) != 0 || len(out) != 1 || out[0] != web {
		t.Fatalf("pods without claims: got %v, %v, %v", out, refused, err)
	}

	big2 := pod("big2", "big2", false)
	out, refused, err = d.forSolver(t.Context(), objects, []*corev1.Pod{web, big, many, waiting, big2}, pools, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0] != web || out[1].UID != "big" || out[2].UID != "big2" {
		t.Fatalf("got pods %v, want web untouched, big and big2 translated (many refused, waiting left out)", out)
	}
	if a, b := out[1].Spec.Affinity, out[2].Spec.Affinity; a.String() != b.String() {
		t.Errorf("two pods claiming the same devices were kept to different types: %v and %v", a, b)
	}
	if why := refused["many"]; !strings.Contains(why, "ResourceClaim ml/many (requests gpus): no instance type") {
		t.Errorf("the refusal of many does not name its claim and request: %q", why)
	}
	if _, ok := refused["waiting"]; ok || len(refused) != 1 {
		t.Errorf("refused %v, want many only (waiting waits for its claim)", refused)
	}
	translated := out[1]
	if big.Spec.Affinity != nil || len(big.Spec.Containers[0].Resources.Requests) != 0 {
		t.Error("the pod given was changed")
	}
	terms := translated.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != corev1.LabelInstanceTypeStable ||
		!slices.Equal(terms[0].MatchExpressions[0].Values, []string{"g6e.12xlarge", "p4d.24xlarge"}) {
		t.Errorf("the translated pod's node affinity is %+v, want instance types g6e.12xlarge and p4d.24xlarge", terms)
	}
	for _, rl := range []corev1.ResourceList{translated.Spec.Containers[0].Resources.Requests, translated.Spec.Containers[0].Resources.Limits} {
		if q := rl[stevedorev1.ResourceNVIDIAGPU]; q.Value() != 2 {
			t.Errorf("the translated pod takes %s GPUs, want 2", q.String())
		}
	}

	// placed anew (disruption's model): a pod's own claim from a template is made again, a shared claim stays
	// where its devices are
	allocated := func(name string, owner *corev1.Pod) {
		obj, _, _ := claimIndex.GetByKey("ml/big")
		c := obj.(*resourceapi.ResourceClaim).DeepCopy()
		c.Name, c.UID = name, types.UID(name)
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "gpus", Driver: "gpu.nvidia.com", Pool: "node-a", Device: "gpu-0"}, {Request: "gpus", Driver: "gpu.nvidia.com", Pool: "node-a", Device: "gpu-1"}}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}}}}}}}
		if owner != nil {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		}
		_ = claimIndex.Add(c)
	}
	own, shared := pod("own", "own-gpus", true), pod("shared", "shared-gpus", false)
	own.Spec.NodeName, shared.Spec.NodeName = "node-a", "node-a"
	allocated("own-gpus", own)
	allocated("shared-gpus", nil)
	out, refused, err = d.forSolver(t.Context(), objects, []*corev1.Pod{own, shared}, pools, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].UID != "own" || len(refused) != 1 || refused["shared"] == "" {
		t.Errorf("placed anew: got pods %v and refusals %v; want own placed and shared refused", out, refused)
	}

	// on its node, a pod takes the GPUs of its claims; a shared claim counts with the first pod it is reserved for
	if q := withAllocatedDevices(objects, own).Spec.Containers[0].Resources.Requests[stevedorev1.ResourceNVIDIAGPU]; q.Value() != 2 {
		t.Errorf("a pod whose own claim holds two GPUs is counted taking %s", q.String())
	}
	obj, _, _ := claimIndex.GetByKey("ml/shared-gpus")
	sharedClaim := obj.(*resourceapi.ResourceClaim)
	sharedClaim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "other", UID: "other"}, {Resource: "pods", Name: "shared", UID: "shared"}}
	if got := withAllocatedDevices(objects, shared); got != shared {
		t.Errorf("a pod second to use a shared claim is counted taking its GPUs again: %v", got.Spec.Containers[0].Resources.Requests)
	}
	if got := withAllocatedDevices(objects, web); got != web {
		t.Error("a pod without claims was changed")
	}
}
