/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package devices models the devices a node of an instance type will offer through Dynamic Resource Allocation
// before the node exists: the ResourceSlices its DRA drivers would publish once it runs, built from the type's
// accelerator labels (which come from EC2's DescribeInstanceTypes). The planner allocates pods' ResourceClaims
// from these models with kube-scheduler's own DynamicResources plugin; once a node registers, the slices its
// drivers publish replace the model.
package devices

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// The drivers whose devices are modelled, by the name they publish ResourceSlices under.
const (
	// DriverNVIDIA is NVIDIA's DRA driver for GPUs (github.com/NVIDIA/k8s-dra-driver-gpu, its gpu-kubelet-plugin).
	DriverNVIDIA = "gpu.nvidia.com"
	// DriverNeuron is the AWS Neuron DRA driver (the Neuron Helm chart's draDriver).
	DriverNeuron = "neuron.aws.com"
	// DriverEFA is DRANET (kubernetes-sigs/dranet), which EKS's aws-dranet chart installs for EFA devices.
	DriverEFA = "dra.net"
)

// Resources names the extended resource a device plugin advertises for the devices of each modelled driver: the
// planner counts the devices a pod's claims take as that resource.
func Resources() map[string]corev1.ResourceName {
	return map[string]corev1.ResourceName{DriverNVIDIA: stevedorev1.ResourceNVIDIAGPU, DriverNeuron: stevedorev1.ResourceAWSNeuron,
		DriverEFA: stevedorev1.ResourceEFA}
}

// nvidiaGPU is what NVIDIA's DRA driver reports of one GPU model, beyond what EC2 says (count and memory).
type nvidiaGPU struct {
	// productName is the name NVML reports (what nvidia-smi prints), architecture NVIDIA's name of the
	// generation, computeCapability the CUDA compute capability (NVIDIA's "CUDA GPUs" table,
	// developer.nvidia.com/cuda-gpus).
	productName, architecture, computeCapability string
}

// nvidiaGPUOf returns the model of an NVIDIA GPU by the value of its karpenter.k8s.aws/instance-gpu-name label (EC2's
// GPU name in lower case). The product names are those nvidia-smi prints on the instance types listed.
func nvidiaGPUOf(name string) (nvidiaGPU, bool) {
	switch name {
	case "t4": // g4dn
		return nvidiaGPU{"Tesla T4", "Turing", "7.5"}, true
	case "t4g": // g5g
		return nvidiaGPU{"NVIDIA T4G", "Turing", "7.5"}, true
	case "a10g": // g5
		return nvidiaGPU{"NVIDIA A10G", "Ampere", "8.6"}, true
	case "l4": // g6, gr6
		return nvidiaGPU{"NVIDIA L4", "Ada Lovelace", "8.9"}, true
	case "l40s": // g6e
		return nvidiaGPU{"NVIDIA L40S", "Ada Lovelace", "8.9"}, true
	case "a100": // p4d (40 GB), p4de (80 GB): the product name carries the memory
		return nvidiaGPU{"NVIDIA A100-SXM4-%dGB", "Ampere", "8.0"}, true
	case "h100": // p5
		return nvidiaGPU{"NVIDIA H100 80GB HBM3", "Hopper", "9.0"}, true
	case "v100": // p3 (16 GB), p3dn (32 GB)
		return nvidiaGPU{"Tesla V100-SXM2-%dGB", "Volta", "7.0"}, true
	}
	return nvidiaGPU{}, false
}

// Slices returns the ResourceSlices the DRA drivers would publish for a node named nodeName whose instance type has
// the given labels (the type's well-known labels, as the node would carry them), launched with efaInterfaces EFA
// interfaces:
//   - for an NVIDIA GPU type, a slice of NVIDIA's driver with a device per GPU, named and described as that driver
//     does (gpu-0, gpu-1...; type, productName, architecture, cudaComputeCapability; memory as capacity);
//   - for a Trainium or Inferentia type, a slice of the Neuron driver with a device per Neuron device
//     (neuron-device-0...; deviceId, instanceType, resourceType);
//   - for each EFA interface attached, a device of the EFA driver, DRANET (efa-0...; pciDevice, pciVendor,
//     pciSubsystem, rdma).
//
// What a driver learns only on the running node (a GPU's UUID, PCIe bus, driver and CUDA versions; an EFA device's
// PCI address and NUMA node; the Neuron devices' topology groups) is not modelled: a claim that selects on it is
// planned as no type satisfying it. A type without devices a known driver serves has none.
func Slices(nodeName string, labels map[string]string, efaInterfaces int) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, s := range []*resourceapi.ResourceSlice{nvidiaSlice(nodeName, labels), neuronSlice(nodeName, labels), efaSlice(nodeName, efaInterfaces)} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// slice is a node's one slice of a driver's devices, its pool named after the node.
func slice(nodeName, driver string, devices []resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(nodeName),
			Pool:     resourceapi.ResourcePool{Name: nodeName, ResourceSliceCount: 1},
			Devices:  devices,
		},
	}
}

// neuronSlice models the devices the AWS Neuron DRA driver publishes on a Trainium or Inferentia node (the EKS
// user guide's "Manage Neuron devices", and the Neuron documentation's attribute reference for its DRA driver).
func neuronSlice(nodeName string, labels map[string]string) *resourceapi.ResourceSlice {
	if labels[stevedorev1.LabelInstanceAcceleratorManufacturer] != "aws" {
		return nil
	}
	count, err := strconv.Atoi(labels[stevedorev1.LabelInstanceAcceleratorCount])
	if err != nil || count <= 0 {
		return nil
	}
	devices := make([]resourceapi.Device, 0, count)
	for i := range count {
		devices = append(devices, resourceapi.Device{
			Name: fmt.Sprintf("neuron-device-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"deviceId":     {IntValue: ptr.To(int64(i))},
				"instanceType": {StringValue: ptr.To(labels[corev1.LabelInstanceTypeStable])},
				"resourceType": {StringValue: ptr.To("neuron_device")},
			},
		})
	}
	return slice(nodeName, DriverNeuron, devices)
}

// efaSlice models the EFA devices DRANET (kubernetes-sigs/dranet, as EKS installs it) publishes for the EFA
// interfaces attached to a node.
func efaSlice(nodeName string, interfaces int) *resourceapi.ResourceSlice {
	if interfaces <= 0 {
		return nil
	}
	devices := make([]resourceapi.Device, 0, interfaces)
	for i := range interfaces {
		devices = append(devices, resourceapi.Device{
			Name: fmt.Sprintf("efa-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"pciDevice":    {StringValue: ptr.To("Elastic Fabric Adapter (EFA)")},
				"pciVendor":    {StringValue: ptr.To("Amazon.com, Inc.")},
				"pciSubsystem": {StringValue: ptr.To(fmt.Sprintf("efa%d", i))},
				"rdma":         {BoolValue: ptr.To(true)},
			},
		})
	}
	return slice(nodeName, DriverEFA, devices)
}

func nvidiaSlice(nodeName string, labels map[string]string) *resourceapi.ResourceSlice {
	if labels[stevedorev1.LabelInstanceGPUManufacturer] != "nvidia" {
		return nil
	}
	gpu, ok := nvidiaGPUOf(labels[stevedorev1.LabelInstanceGPUName])
	if !ok {
		return nil
	}
	count, err := strconv.Atoi(labels[stevedorev1.LabelInstanceGPUCount])
	if err != nil || count <= 0 {
		return nil
	}
	memoryMiB, _ := strconv.ParseInt(labels[stevedorev1.LabelInstanceGPUMemory], 10, 64)
	product := gpu.productName
	if strings.Contains(product, "%d") {
		if memoryMiB <= 0 {
			return nil
		}
		product = fmt.Sprintf(product, (memoryMiB+1023)/1024)
	}
	devices := make([]resourceapi.Device, 0, count)
	for i := range count {
		d := resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                  {StringValue: ptr.To("gpu")},
				"productName":           {StringValue: ptr.To(product)},
				"architecture":          {StringValue: ptr.To(gpu.architecture)},
				"cudaComputeCapability": {VersionValue: ptr.To(gpu.computeCapability + ".0")},
			},
		}
		if memoryMiB > 0 {
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(memoryMiB<<20, resource.BinarySI)},
			}
		}
		devices = append(devices, d)
	}
	return slice(nodeName, DriverNVIDIA, devices)
}
