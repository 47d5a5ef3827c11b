/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package cloud

import (
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

// AcceleratorCounts are the amounts of each of stevedorev1.AcceleratorResources, in that order: what the solver packs
// besides cpu, memory and pods. (int32 keeps the solver's resource vectors small; no node has 2^31 devices.)
type AcceleratorCounts [6]int32

var acceleratorResources = func() [6]corev1.ResourceName {
	var out [6]corev1.ResourceName
	for i, name := range stevedorev1.AcceleratorResources() {
		out[i] = corev1.ResourceName(name)
	}
	return out
}()

// AcceleratorCountsOf reads the accelerator resources of a resource list.
func AcceleratorCountsOf(rl corev1.ResourceList) AcceleratorCounts {
	var out AcceleratorCounts
	if len(rl) == 0 {
		return out
	}
	for i, name := range acceleratorResources {
		if q, ok := rl[name]; ok {
			out[i] = int32(max(min(q.Value(), math.MaxInt32), math.MinInt32))
		}
	}
	return out
}

// Any reports whether any count is not zero.
func (a AcceleratorCounts) Any() bool { return a != AcceleratorCounts{} }

// manufacturerNVIDIA is NVIDIA as labelValue spells a GPU manufacturer.
const manufacturerNVIDIA = "nvidia"

// The kinds of EKS-optimized image ImageVariant returns.
const (
	imageVariantNVIDIA   = "nvidia"
	imageVariantNeuron   = "neuron"
	imageVariantStandard = "standard"
)

// gpuResources names the extended resource each GPU manufacturer's device plugin advertises.
var gpuResources = map[string]corev1.ResourceName{
	manufacturerNVIDIA: stevedorev1.ResourceNVIDIAGPU, "amd": stevedorev1.ResourceAMDGPU, "habana": stevedorev1.ResourceHabanaGaudi,
}

// AcceleratorCapacity is the extended resources a node of the type offers: its GPUs (by manufacturer), Neuron
// devices and cores, and EFA interfaces.
func AcceleratorCapacity(it catalog.InstanceType) corev1.ResourceList {
	out := corev1.ResourceList{}
	if g := it.GPUs; g != nil {
		if name, ok := gpuResources[labelValue(g.Manufacturer)]; ok {
			out[name] = *resource.NewQuantity(int64(g.Count), resource.DecimalSI)
		}
	}
	if n := it.Neuron; n != nil {
		out[stevedorev1.ResourceAWSNeuron] = *resource.NewQuantity(int64(n.Count), resource.DecimalSI)
		out[stevedorev1.ResourceAWSNeuronCore] = *resource.NewQuantity(int64(n.Count*n.CoresPerDevice), resource.DecimalSI)
	}
	if it.EFA > 0 {
		out[stevedorev1.ResourceEFA] = *resource.NewQuantity(int64(it.EFA), resource.DecimalSI)
	}
	return out
}

// AcceleratorLabels are the labels of the type's accelerators, local NVMe storage and network bandwidth (only those
// it has): GPUs as instance-gpu-*, Neuron devices as instance-accelerator-*, values in lower kebab case.
func AcceleratorLabels(it catalog.InstanceType) map[string]string {
	out := map[string]string{}
	if g := it.GPUs; g != nil {
		out[stevedorev1.LabelInstanceGPUName] = labelValue(g.Name)
		out[stevedorev1.LabelInstanceGPUManufacturer] = labelValue(g.Manufacturer)
		out[stevedorev1.LabelInstanceGPUCount] = strconv.Itoa(g.Count)
		if g.MemoryMiB > 0 {
			out[stevedorev1.LabelInstanceGPUMemory] = strconv.FormatInt(g.MemoryMiB, 10)
		}
	}
	if n := it.Neuron; n != nil {
		out[stevedorev1.LabelInstanceAcceleratorName] = labelValue(n.Name)
		out[stevedorev1.LabelInstanceAcceleratorManufacturer] = labelValue(n.Manufacturer)
		out[stevedorev1.LabelInstanceAcceleratorCount] = strconv.Itoa(n.Count)
	}
	if it.LocalNVMeGB > 0 {
		out[stevedorev1.LabelInstanceLocalNVMe] = strconv.Itoa(it.LocalNVMeGB)
	}
	if it.NetworkBandwidthMbps > 0 {
		out[stevedorev1.LabelInstanceNetworkBandwidth] = strconv.Itoa(it.NetworkBandwidthMbps)
	}
	return out
}

// labelValue is a device name or maker as a label value: lower case, spaces as dashes ("Radeon Pro V520" ->
// "radeon-pro-v520").
func labelValue(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), " ", "-")
}

// ImageVariant is the kind of EKS-optimized image a type needs: "nvidia" for NVIDIA GPUs, "neuron" for Neuron
// devices, "standard" for the rest.
func ImageVariant(it catalog.InstanceType) string {
	switch {
	case it.GPUs != nil && labelValue(it.GPUs.Manufacturer) == manufacturerNVIDIA:
		return imageVariantNVIDIA
	case it.Neuron != nil:
		return imageVariantNeuron
	}
	return imageVariantStandard
}
