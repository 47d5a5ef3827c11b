/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package simulation

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/devices"
)

// gpuClass is the DeviceClass NVIDIA's driver installs for whole GPUs.
func gpuClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`}}}}}
}

// gpuClaim asks for count GPUs of the class, each passing every selector.
func gpuClaim(name string, count int64, selectors ...string) *resourceapi.ResourceClaim {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, s := range selectors {
		req.Selectors = append(req.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &req}}}}}
}

// claimingPod uses the claim directly, or (fromTemplate) through a template whose claim kube-controller-manager named
// in the pod's status.
func claimingPod(claim string, fromTemplate bool) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: "ml", UID: "trainer"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}}}}
	if fromTemplate {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("two-big-gpus")}}
		pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(claim)}}
	} else {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim)}}
	}
	return pod
}

const atLeast40Gi = `device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0`

// TestDeviceFitAllocatesClaimsFromTheModelOfEachType runs kube-scheduler's DynamicResources plugin over the modelled
// devices of catalog instance types: a type fits when the plugin allocates the pod's claim on a node of it.
func TestDeviceFitAllocatesClaimsFromTheModelOfEachType(t *testing.T) {
	ctx := t.Context()
	types, err := cloud.CatalogInstanceTypes(catalog.Default(), nil, 0.075)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*cloud.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	fitter, err := NewDeviceFitter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	candidates := []string{"m7i.large", "g5.12xlarge", "g6e.xlarge", "g6e.12xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "g4ad.8xlarge"}
	for _, tc := range []struct {
		name         string
		claim        *resourceapi.ResourceClaim
		fromTemplate bool
		// allocated are claims already allocated on the node, by device
		allocated []string
		want      map[string]int // type -> GPUs allocated; a missing type does not fit
	}{
		{name: "two GPUs of at least 40 GiB, from a template", claim: gpuClaim("trainer-gpus-x7k2", 2, atLeast40Gi), fromTemplate: true,
			want: map[string]int{"g6e.12xlarge": 2, "p4d.24xlarge": 2, "p4de.24xlarge": 2, "p5.48xlarge": 2}},
		{name: "one GPU of any kind", claim: gpuClaim("any", 1),
			want: map[string]int{"g5.12xlarge": 1, "g6e.xlarge": 1, "g6e.12xlarge": 1, "p4d.24xlarge": 1, "p4de.24xlarge": 1, "p5.48xlarge": 1}},
		{name: "by product name", claim: gpuClaim("a100-40", 4, `device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-40GB"`),
			want: map[string]int{"p4d.24xlarge": 4}},
		{name: "by compute capability", claim: gpuClaim("hopper", 8, `device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.9.0"))`),
			want: map[string]int{"p5.48xlarge": 8}},
		{name: "by architecture", claim: gpuClaim("ada", 4, `device.attributes["gpu.nvidia.com"].architecture == "Ada Lovelace"`),
			want: map[string]int{"g6e.12xlarge": 4}},
		{name: "more GPUs than any type has", claim: gpuClaim("sixteen", 16), want: map[string]int{}},
		{name: "devices already allocated on the node are not given twice", claim: gpuClaim("two", 2),
			allocated: []string{"gpu-0", "gpu-1", "gpu-2"},
			want:      map[string]int{"p4d.24xlarge": 2, "p4de.24xlarge": 2, "p5.48xlarge": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]int{}
			for _, name := range candidates {
				it := byName[name]
				if it == nil {
					t.Fatalf("the catalog has no %s", name)
				}
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Labels: it.Labels()}}
				nodeSlices := devices.Slices(node.Name, it.Labels(), 0)
				objects := DeviceObjects{Claims: []*resourceapi.ResourceClaim{tc.claim}, Classes: []*resourceapi.DeviceClass{gpuClass()}}
				if len(tc.allocated) > 0 {
					taken := gpuClaim("taken", int64(len(tc.allocated)))
					taken.UID = "taken"
					taken.Status.Allocation = &resourceapi.AllocationResult{}
					for _, d := range tc.allocated {
						taken.Status.Allocation.Devices.Results = append(taken.Status.Allocation.Devices.Results,
							resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: devices.DriverNVIDIA, Pool: node.Name, Device: d})
					}
					objects.Claims = append(objects.Claims, taken)
				}
				pod := claimingPod(tc.claim.Name, tc.fromTemplate)
				if tc.fromTemplate {
					tc.claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
				}
				fit, err := fitter.Fit(ctx, pod, node, nodeSlices, objects)
				if err != nil {
					if !strings.Contains(err.Error(), "cannot allocate all claims") {
						t.Errorf("%s: the refusal does not say the claims cannot be allocated: %v", name, err)
					}
					continue
				}
				got[name] = fit.Count(devices.DriverNVIDIA)
				for _, d := range fit.Devices[devices.DriverNVIDIA] {
					if slices.Contains(tc.allocated, strings.TrimPrefix(d, node.Name+"/")) {
						t.Errorf("%s: device %s given twice", name, d)
					}
				}
			}
			if !mapsEqual(got, tc.want) {
				t.Errorf("types fitting, with the GPUs allocated: got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDeviceFitOfAPodWithoutClaimsTakesNothing: the plugin skips a pod that claims no devices.
func TestDeviceFitOfAPodWithoutClaimsTakesNothing(t *testing.T) {
	fitter, err := NewDeviceFitter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ml"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	fit, err := fitter.Fit(t.Context(), pod, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, nil, DeviceObjects{})
	if err != nil || len(fit.Devices) != 0 {
		t.Fatalf("got %v, %v; want no devices and no error", fit, err)
	}
}

// TestDeviceFitRefusesAClaimWhoseClassDoesNotExist names the missing class, as kube-scheduler does.
func TestDeviceFitRefusesAClaimWhoseClassDoesNotExist(t *testing.T) {
	fitter, err := NewDeviceFitter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = fitter.Fit(t.Context(), claimingPod("any", false), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, nil,
		DeviceObjects{Claims: []*resourceapi.ResourceClaim{gpuClaim("any", 1)}})
	if err == nil || !strings.Contains(err.Error(), "gpu.nvidia.com") {
		t.Fatalf("got %v; want a refusal naming device class gpu.nvidia.com", err)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestDeviceFitServesAnExtendedResourceThroughDRA: a DeviceClass naming nvidia.com/gpu as its extended resource
// serves a pod's nvidia.com/gpu request from the node's DRA devices when no device plugin advertises it.
func TestDeviceFitServesAnExtendedResourceThroughDRA(t *testing.T) {
	types, err := cloud.CatalogInstanceTypes(catalog.Default(), nil, 0.075)
	if err != nil {
		t.Fatal(err)
	}
	fitter, err := NewDeviceFitter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	class := gpuClass()
	class.Spec.ExtendedResourceName = ptr.To("nvidia.com/gpu")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: "ml", UID: "trainer"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}, Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}}}
	got := map[string]int{}
	for _, it := range types {
		if !slices.Contains([]string{"g5.xlarge", "g5.12xlarge", "p4d.24xlarge"}, it.Name) {
			continue
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + it.Name, Labels: it.Labels()},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}
		fit, err := fitter.Fit(t.Context(), pod, node, devices.Slices(node.Name, it.Labels(), 0), DeviceObjects{Classes: []*resourceapi.DeviceClass{class}})
		if err != nil {
			continue
		}
		got[it.Name] = fit.Count(devices.DriverNVIDIA)
	}
	if want := map[string]int{"g5.12xlarge": 2, "p4d.24xlarge": 2}; !mapsEqual(got, want) {
		t.Errorf("types serving nvidia.com/gpu: 2 through DRA, with the GPUs allocated: got %v, want %v", got, want)
	}
}
