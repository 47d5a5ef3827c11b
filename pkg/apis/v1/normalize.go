/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import "time"

// DefaultExpireAfter is how long a node lives when its NodePool sets no expireAfter.
const DefaultExpireAfter = 720 * time.Hour

// Normalize rewrites the older spellings Stevedore accepts (Karpenter v1beta1 and early v1 manifests) into the
// canonical form and fills the defaults the API server does not: WhenUnderutilized becomes
// WhenEmptyOrUnderutilized, spec.disruption.expireAfter moves to spec.template.spec.expireAfter when the template
// has none, expireAfter defaults to 720h, replacement to Surge, and the node class reference gets its group and kind.
// Readers call it on their own copy; the stored object is left as the user wrote it.
func (np *NodePool) Normalize() {
	d := &np.Spec.Disruption
	switch d.ConsolidationPolicy {
	case ConsolidationPolicyWhenUnderutilized, "":
		d.ConsolidationPolicy = ConsolidationPolicyWhenEmptyOrUnderutilized
	}
	if d.ConsolidateAfter == nil {
		d.ConsolidateAfter = NewDuration(0)
	}
	if d.Replacement == "" {
		d.Replacement = ReplacementSurge
	}
	if len(d.Budgets) == 0 {
		d.Budgets = []Budget{{Nodes: "10%"}}
	}
	for i := range d.Budgets {
		if d.Budgets[i].Nodes == "" {
			d.Budgets[i].Nodes = "10%"
		}
	}
	spec := &np.Spec.Template.Spec
	if spec.ExpireAfter == nil {
		if d.ExpireAfter != nil {
			spec.ExpireAfter = d.ExpireAfter
		} else {
			spec.ExpireAfter = NewDuration(DefaultExpireAfter)
		}
	}
	d.ExpireAfter = nil
	if spec.NodeClassRef == nil {
		spec.NodeClassRef = &NodeClassReference{}
	}
	spec.NodeClassRef.Normalize()
}

// Normalize fills the group and kind of a node class reference and maps Karpenter's group onto Stevedore's.
func (r *NodeClassReference) Normalize() {
	if r.Group == "" || r.Group == KarpenterNodeClassGroup {
		r.Group = GroupName
	}
	if r.Kind == "" {
		r.Kind = DefaultNodeClassKind
	}
}

// WeightOrZero returns the NodePool's weight, 0 when unset (tried after every weighted NodePool).
func (np *NodePool) WeightOrZero() int32 {
	if np.Spec.Weight == nil {
		return 0
	}
	return *np.Spec.Weight
}

// AMIFamilyOrDefault returns the EC2NodeClass's AMI family: the one set, the family of an alias term, or AL2023.
func (nc *EC2NodeClass) AMIFamilyOrDefault() string {
	if nc.Spec.AMIFamily != nil {
		return *nc.Spec.AMIFamily
	}
	for _, t := range nc.Spec.AMISelectorTerms {
		if len(t.Alias) >= len("bottlerocket") && t.Alias[:len("bottlerocket")] == "bottlerocket" {
			return AMIFamilyBottlerocket
		}
	}
	return AMIFamilyAL2023
}
