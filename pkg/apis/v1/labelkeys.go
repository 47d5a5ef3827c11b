/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	"slices"
	"strings"
)

// KarpenterAWSLabels are the karpenter.k8s.aws/ label keys a NodePool may require or set (the labels Stevedore
// gives its nodes from the instance type, and the EC2NodeClass's name). The API server refuses any other key of
// that domain (the CEL rules on requirements[].key and template labels list the same keys; a test keeps them in
// step).
func KarpenterAWSLabels() []string {
	return []string{
		LabelInstanceCategory, LabelInstanceFamily, LabelInstanceGeneration, LabelInstanceSize, LabelInstanceCPU,
		LabelInstanceMemory, LabelInstanceHypervisor, LabelInstanceGPUName, LabelInstanceGPUManufacturer,
		LabelInstanceGPUCount, LabelInstanceGPUMemory, LabelInstanceAcceleratorName, LabelInstanceAcceleratorManufacturer,
		LabelInstanceAcceleratorCount, LabelInstanceLocalNVMe, LabelInstanceNetworkBandwidth, LabelInstanceCPUManufacturer,
		LabelInstanceCPUSustainedClockSpeed, LabelInstanceEBSBandwidth, LabelInstanceEncryptionInTransit,
		LabelInstanceCapabilityFlex, LabelInstanceTenancy, LabelNodeClass,
	}
}

// UnsupportedRequirementKey says why a NodePool may not have a requirement on key ("" when it may), as the API
// server's CEL rules refuse it: a key Stevedore sets itself, a Karpenter key Stevedore does not launch nodes with.
func UnsupportedRequirementKey(key string) string {
	switch {
	case key == LabelHostname || key == LabelNodePool || key == LabelNodeClaim:
		return key + " is set by Stevedore"
	case strings.HasPrefix(key, "karpenter.sh/") && key != LabelCapacityType:
		return key + " is not a label Stevedore launches nodes with: the only karpenter.sh key it reads is karpenter.sh/capacity-type"
	case strings.HasPrefix(key, "karpenter.k8s.aws/capacity-reservation-"):
		return key + ": Stevedore selects capacity reservations with capacityReservationSelectorTerms of the EC2NodeClass"
	case strings.HasPrefix(key, "karpenter.k8s.aws/placement-group-"):
		return key + ": Stevedore does not launch into placement groups"
	case strings.HasPrefix(key, "karpenter.k8s.aws/") && !slices.Contains(KarpenterAWSLabels(), key):
		return key + " is not a label Stevedore knows under karpenter.k8s.aws/"
	case strings.HasPrefix(key, "topology.k8s.aws/") && key != LabelZoneID:
		return key + " is not a label Stevedore knows: the only topology.k8s.aws key it reads is topology.k8s.aws/zone-id"
	}
	return ""
}

// UnsupportedRequirement says why a NodePool may not have requirement r ("" when it may): its key
// (UnsupportedRequirementKey) unless it is satisfied by the label's absence (DoesNotExist, NotIn: Stevedore's nodes
// do not carry such labels; pods kept off Karpenter's nodes have karpenter.sh/nodepool DoesNotExist), or a tenancy
// other than default.
func UnsupportedRequirement(r NodeSelectorRequirementWithMinValues) string {
	if why := UnsupportedTenancy(r); why != "" {
		return why
	}
	if r.Operator == "DoesNotExist" || r.Operator == "NotIn" {
		return ""
	}
	return UnsupportedRequirementKey(r.Key)
}

// UnsupportedTemplateLabel says why a NodePool may not set label key to value on its nodes ("" when it may).
func UnsupportedTemplateLabel(key, value string) string {
	switch {
	case strings.HasPrefix(key, "stevedore.dev/") || key == LabelHostname:
		return key + " is set by Stevedore"
	case key == LabelNodeClass:
		return key + " is the EC2NodeClass's name, set by Stevedore from nodeClassRef"
	case key == LabelInstanceTenancy && value != TenancyDefault:
		return key + " can only be default: Stevedore launches on shared hardware"
	}
	if why := UnsupportedRequirementKey(key); why != "" && key != LabelNodePool && key != LabelNodeClaim {
		return why
	}
	return ""
}

// UnsupportedTenancy says why a requirement on the instance tenancy is refused ("" when it allows default).
func UnsupportedTenancy(r NodeSelectorRequirementWithMinValues) string {
	if r.Key != LabelInstanceTenancy {
		return ""
	}
	hasDefault := slices.Contains(r.Values, TenancyDefault)
	switch r.Operator {
	case "Exists", "In", "":
		if r.Operator == "Exists" || hasDefault {
			return ""
		}
	case "NotIn":
		if !hasDefault {
			return ""
		}
	}
	return LabelInstanceTenancy + " must allow default: Stevedore launches on shared hardware (dedicated tenancy is not carried over)"
}
