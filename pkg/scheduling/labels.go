/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package scheduling

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Which labels a node Stevedore launches may carry, and who decides each one:
//   - the instance type decides its well-known keys (InstanceTypeKeys) and any label its catalog entry adds;
//   - the offering decides zone and capacity type (OfferingKeys), the cloud the region; the zone decides its ID
//     (LabelZoneID), and NodePool requirements on it are read as requirements on the zone (ZoneIDs);
//   - the NodePool decides its template labels, the keys its requirements name (a pod may narrow a
//     requirement that allows several values to one) and the EC2NodeClass label;
//   - Stevedore decides its own keys (stevedore.dev/*) and the hostname.
//
// A pod never adds a label: a key the pod requires that none of these defines makes the NodePool unusable for it
// (unless the pod's requirement is satisfied by the label's absence).

// InstanceTypeKeys are the well-known labels whose value the instance type decides.
var InstanceTypeKeys = []string{
	corev1.LabelInstanceTypeStable, corev1.LabelArchStable, corev1.LabelOSStable,
	stevedorev1.LabelInstanceCategory, stevedorev1.LabelInstanceFamily, stevedorev1.LabelInstanceGeneration,
	stevedorev1.LabelInstanceSize, stevedorev1.LabelInstanceCPU, stevedorev1.LabelInstanceMemory,
	stevedorev1.LabelInstanceHypervisor, stevedorev1.LabelInstanceCPUManufacturer, stevedorev1.LabelInstanceCPUSustainedClockSpeed,
	stevedorev1.LabelInstanceEncryptionInTransit, stevedorev1.LabelInstanceCapabilityFlex, stevedorev1.LabelInstanceTenancy,
	stevedorev1.LabelInstanceEBSBandwidth,
	// only types with GPUs, Neuron devices, NVMe storage or a published bandwidth carry these
	stevedorev1.LabelInstanceGPUName, stevedorev1.LabelInstanceGPUManufacturer, stevedorev1.LabelInstanceGPUCount,
	stevedorev1.LabelInstanceGPUMemory, stevedorev1.LabelInstanceAcceleratorName, stevedorev1.LabelInstanceAcceleratorManufacturer,
	stevedorev1.LabelInstanceAcceleratorCount, stevedorev1.LabelInstanceLocalNVMe, stevedorev1.LabelInstanceNetworkBandwidth,
}

// OfferingKeys are the labels whose value the offering (zone, capacity type) decides.
var OfferingKeys = []string{corev1.LabelTopologyZone, stevedorev1.LabelCapacityType}

// IsInstanceTypeKey reports whether the instance type decides a label's value.
func IsInstanceTypeKey(key string) bool {
	for _, k := range InstanceTypeKeys {
		if k == key {
			return true
		}
	}
	return false
}

// IsOfferingKey reports whether the offering decides a label's value.
func IsOfferingKey(key string) bool {
	return key == corev1.LabelTopologyZone || key == stevedorev1.LabelCapacityType
}

// IsWellKnown reports whether Stevedore knows a label's value for any node it launches: instance-type and
// offering keys, the region, the NodePool's name.
func IsWellKnown(key string) bool {
	return IsInstanceTypeKey(key) || IsOfferingKey(key) || key == corev1.LabelTopologyRegion || key == stevedorev1.LabelNodePool ||
		key == stevedorev1.LabelZoneID || key == stevedorev1.LabelNodeClass
}

// deprecatedKeys maps the deprecated beta label keys pods still use to the stable keys they stand for.
var deprecatedKeys = map[string]string{
	"beta.kubernetes.io/arch":           corev1.LabelArchStable,
	"beta.kubernetes.io/os":             corev1.LabelOSStable,
	corev1.LabelInstanceType:            corev1.LabelInstanceTypeStable,
	corev1.LabelFailureDomainBetaZone:   corev1.LabelTopologyZone,
	corev1.LabelFailureDomainBetaRegion: corev1.LabelTopologyRegion,
}

// StableKey returns the stable key a deprecated beta key stands for, or key itself.
func StableKey(key string) string {
	if s, ok := deprecatedKeys[key]; ok {
		return s
	}
	return key
}

// WithDeprecatedAliases adds to labels the deprecated beta keys of the stable keys it has, with the same values,
// so that pods still selecting the beta keys find the node (the kubelet sets the arch and os ones itself).
func WithDeprecatedAliases(labels map[string]string) map[string]string {
	for beta, stable := range deprecatedKeys {
		if v, ok := labels[stable]; ok {
			labels[beta] = v
		}
	}
	return labels
}

// IsRestricted reports whether a label key belongs to a domain a pod's request must never write onto a node:
// kubernetes.io and k8s.io (and their subdomains, node-restriction.kubernetes.io among them) except the
// well-known keys, karpenter.sh, karpenter.k8s.aws except the well-known keys, and stevedore.dev. A NodePool
// may still set such a key explicitly (a template label or a single-valued requirement).
func IsRestricted(key string) bool {
	if IsWellKnown(key) {
		return false
	}
	if _, ok := deprecatedKeys[key]; ok {
		return false
	}
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws", "stevedore.dev"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}
