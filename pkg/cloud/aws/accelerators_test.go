/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

const al2023Params = "/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/"

// TestAcceleratedTypesReadFromTheAPIsMatchTheEmbeddedCatalog reads the region's catalog through
// DescribeInstanceTypes (the emulator describes GPUs, Neuron devices, EFA, NVMe storage and bandwidth from its
// catalog) and checks the entries equal the embedded catalog's, then what the instance types offer pods and say in
// labels.
func TestAcceleratedTypesReadFromTheAPIsMatchTheEmbeddedCatalog(t *testing.T) {
	f := newFixture(t, nil)
	live := map[string]catalog.InstanceType{}
	for _, it := range f.provider.Catalog(testCtx(t)).InstanceTypes {
		live[it.Name] = it
	}
	embedded := map[string]catalog.InstanceType{}
	for _, it := range catalog.Default().InstanceTypes {
		embedded[it.Name] = it
	}
	for _, name := range []string{"g5.xlarge", "g4ad.8xlarge", "p5.48xlarge", "inf2.24xlarge", "trn1.32xlarge", "dl1.24xlarge", "g5g.xlarge", "i7ie.large", "m5.large"} {
		got, want := live[name], embedded[name]
		if got.Name == "" || want.Name == "" {
			t.Fatalf("%s: live %v, embedded %v; want both", name, got.Name != "", want.Name != "")
		}
		if !equalAccelerators(got.GPUs, want.GPUs) || !equalAccelerators(got.Neuron, want.Neuron) || got.EFA != want.EFA ||
			got.LocalNVMeGB != want.LocalNVMeGB || got.NetworkBandwidthMbps != want.NetworkBandwidthMbps {
			t.Errorf("%s from the APIs: gpus %+v neuron %+v efa %d nvme %d bandwidth %d; embedded gpus %+v neuron %+v efa %d nvme %d bandwidth %d",
				name, got.GPUs, got.Neuron, got.EFA, got.LocalNVMeGB, got.NetworkBandwidthMbps, want.GPUs, want.Neuron, want.EFA, want.LocalNVMeGB, want.NetworkBandwidthMbps)
		}
	}
	its, err := f.provider.InstanceTypes(testCtx(t), test.NodePool("default").Obj())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*cloud.InstanceType{}
	for _, it := range its {
		byName[it.Name] = it
	}
	cases := []struct {
		name      string
		resources map[corev1.ResourceName]int64
		labels    map[string]string
		variant   string
	}{
		{"g5.12xlarge", map[corev1.ResourceName]int64{stevedorev1.ResourceNVIDIAGPU: 4, stevedorev1.ResourceEFA: 1},
			map[string]string{stevedorev1.LabelInstanceGPUName: "a10g", stevedorev1.LabelInstanceGPUManufacturer: "nvidia",
				stevedorev1.LabelInstanceGPUCount: "4", stevedorev1.LabelInstanceGPUMemory: "22888", stevedorev1.LabelInstanceLocalNVMe: "3800",
				stevedorev1.LabelInstanceNetworkBandwidth: "40000"}, "nvidia"},
		{"g4ad.8xlarge", map[corev1.ResourceName]int64{stevedorev1.ResourceAMDGPU: 2},
			map[string]string{stevedorev1.LabelInstanceGPUName: "radeon-pro-v520", stevedorev1.LabelInstanceGPUManufacturer: "amd"}, "standard"},
		{"inf2.24xlarge", map[corev1.ResourceName]int64{stevedorev1.ResourceAWSNeuron: 6, stevedorev1.ResourceAWSNeuronCore: 12},
			map[string]string{stevedorev1.LabelInstanceAcceleratorName: "inferentia2", stevedorev1.LabelInstanceAcceleratorManufacturer: "aws",
				stevedorev1.LabelInstanceAcceleratorCount: "6"}, "neuron"},
		{"p5.48xlarge", map[corev1.ResourceName]int64{stevedorev1.ResourceNVIDIAGPU: 8, stevedorev1.ResourceEFA: 32},
			map[string]string{stevedorev1.LabelInstanceGPUName: "h100", stevedorev1.LabelInstanceGPUMemory: "81920"}, "nvidia"},
		{"dl1.24xlarge", map[corev1.ResourceName]int64{stevedorev1.ResourceHabanaGaudi: 8, stevedorev1.ResourceEFA: 4},
			map[string]string{stevedorev1.LabelInstanceGPUManufacturer: "habana"}, "standard"},
		{"m5.large", nil, map[string]string{stevedorev1.LabelInstanceNetworkBandwidth: "750"}, "standard"},
	}
	for _, tc := range cases {
		it := byName[tc.name]
		if it == nil {
			t.Errorf("%s is not among the node class's instance types", tc.name)
			continue
		}
		for name, want := range tc.resources {
			if q := it.Allocatable()[name]; q.Value() != want {
				t.Errorf("%s allocatable %s = %d, want %d", tc.name, name, q.Value(), want)
			}
		}
		if acc := it.AllocatableAccelerators(); acc.Any() != (len(tc.resources) > 0) {
			t.Errorf("%s accelerator counts %v, want some: %v", tc.name, acc, len(tc.resources) > 0)
		}
		for k, v := range tc.labels {
			if got := it.Labels()[k]; got != v {
				t.Errorf("%s label %s = %q, want %q", tc.name, k, got, v)
			}
		}
		if tc.name == "m5.large" {
			if _, ok := it.Labels()[stevedorev1.LabelInstanceGPUCount]; ok || it.Accelerated() {
				t.Errorf("m5.large has GPU labels or counts as accelerated")
			}
		}
		if it.ImageVariant() != tc.variant {
			t.Errorf("%s image variant %q, want %q", tc.name, it.ImageVariant(), tc.variant)
		}
	}
}

func equalAccelerators(a, b *catalog.Accelerators) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// TestAcceleratedTypesLaunchWithTheirImageVariant launches GPU, Neuron and plain types from the al2023 and
// Bottlerocket aliases and a node class that selects its own image: each alias type gets the variant AWS
// publishes for it, a NodeClaim spanning plain and GPU types gets one launch template per image, and a type whose
// variant is not published is not offered.
func TestAcceleratedTypesLaunchWithTheirImageVariant(t *testing.T) {
	f := newFixture(t, nil)
	param := func(path string) string {
		v, ok := f.emu.SSM.Get(path)
		if !ok {
			t.Fatalf("the emulator publishes no %s", path)
		}
		return v
	}
	custom := f.emu.AddImage("team-gpu-image", "amd64", nil)
	f.addNodeClass(t, &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "bottlerocket", UID: "uid-br"},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole", SubnetSelectorTerms: []stevedorev1.SubnetSelectorTerm{{ID: "subnet-0a000000000001"}},
			AMISelectorTerms: []stevedorev1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}}})
	f.addNodeClass(t, &stevedorev1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "custom", UID: "uid-custom"},
		Spec: stevedorev1.EC2NodeClassSpec{Role: "NodeRole", SubnetSelectorTerms: []stevedorev1.SubnetSelectorTerm{{ID: "subnet-0a000000000001"}},
			AMISelectorTerms: []stevedorev1.AMISelectorTerm{{ID: custom}}}})
	cases := []struct {
		claim, nodeClass, instanceType, wantImage string
	}{
		{"gpu", "default", "g5.xlarge", param(al2023Params + "x86_64/nvidia/recommended/image_id")},
		{"arm-gpu", "default", "g5g.xlarge", param(al2023Params + "arm64/nvidia/recommended/image_id")},
		{"neuron", "default", "inf2.xlarge", param(al2023Params + "x86_64/neuron/recommended/image_id")},
		{"plain", "default", "m5.large", param(al2023Params + "x86_64/standard/recommended/image_id")},
		{"amd-gpu", "default", "g4ad.xlarge", param(al2023Params + "x86_64/standard/recommended/image_id")},
		{"br-gpu", "bottlerocket", "g5.xlarge", param("/aws/service/bottlerocket/aws-k8s-1.37-nvidia/x86_64/latest/image_id")},
		{"br-neuron", "bottlerocket", "inf2.xlarge", param("/aws/service/bottlerocket/aws-k8s-1.37/x86_64/latest/image_id")},
		{"custom-gpu", "custom", "g5.xlarge", custom},
	}
	for _, tc := range cases {
		c := claim("nc-"+tc.claim, in(corev1.LabelInstanceTypeStable, tc.instanceType))
		c.Spec.NodeClassRef.Name = tc.nodeClass
		inst, err := f.provider.Create(testCtx(t), c)
		if err != nil {
			t.Fatalf("%s: %v", tc.claim, err)
		}
		if inst.ImageID != tc.wantImage {
			t.Errorf("%s (%s, node class %s) launched with %s, want %s", tc.claim, tc.instanceType, tc.nodeClass, inst.ImageID, tc.wantImage)
		}
	}

	templates := f.emu.EC2.Calls()["CreateLaunchTemplate"]
	if _, err := f.provider.Create(testCtx(t), claim("nc-mixed", in(corev1.LabelInstanceTypeStable, "c5.large", "g4dn.xlarge"))); err != nil {
		t.Fatal(err)
	}
	fleet := f.emu.EC2.LastRequest("CreateFleet")
	if fleet.Get("LaunchTemplateConfigs.2.LaunchTemplateSpecification.LaunchTemplateName") == "" ||
		fleet.Get("LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName") == fleet.Get("LaunchTemplateConfigs.2.LaunchTemplateSpecification.LaunchTemplateName") {
		t.Errorf("a NodeClaim of c5.large and g4dn.xlarge made the fleet request %v; want two launch templates, one per image", fleet)
	}
	if got := f.emu.EC2.Calls()["CreateLaunchTemplate"] - templates; got != 0 {
		t.Errorf("%d new launch templates for c5.large and g4dn.xlarge, want the standard and nvidia ones already made", got)
	}

	// AWS no longer publishes the Neuron variant: Neuron types leave the al2023 node class's types
	f.emu.SSM.Delete(al2023Params + "x86_64/neuron/recommended/image_id")
	f.clock.Step(2 * discoveryTTL)
	its, err := f.provider.InstanceTypes(testCtx(t), test.NodePool("default").Obj())
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.ImageVariant() == "neuron" {
			t.Fatalf("%s offered without a Neuron image", it.Name)
		}
	}
}
