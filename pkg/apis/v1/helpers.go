/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceNodes is the pseudo-resource counting nodes in NodePool limits and status.
const ResourceNodes corev1.ResourceName = "nodes"

// IsInitialized reports whether the NodeClaim's node is ready for pods (condition Initialized).
func (c *NodeClaim) IsInitialized() bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == ConditionInitialized {
			return cond.Status == metav1.ConditionTrue
		}
	}
	return false
}

// LaunchGroup reads the NodeClaim's AnnotationLaunchGroup: the id of its atomic launch and how many NodeClaims
// it has. ok is false when there is none or it does not parse (the NodeClaim then launches alone).
func (c *NodeClaim) LaunchGroup() (id string, size int, ok bool) {
	v := c.Annotations[AnnotationLaunchGroup]
	i := strings.LastIndexByte(v, '/')
	if i <= 0 {
		return "", 0, false
	}
	size, err := strconv.Atoi(v[i+1:])
	if err != nil || size < 1 {
		return "", 0, false
	}
	return v[:i], size, true
}

// FormatLaunchGroup is the AnnotationLaunchGroup value of a launch group.
func FormatLaunchGroup(id string, size int) string { return id + "/" + strconv.Itoa(size) }

// NodePoolHashVersion changes whenever what NodePool.TemplateHash covers changes: a NodeClaim stamped with another
// version is not compared (its hash would differ though nothing drifted).
const NodePoolHashVersion = "v2"

// TemplateHash hashes the NodePool template a node is launched from (its normalised form, so that an older
// spelling is no change); a different hash means drift. Every template field counts but the requirements, which
// drift checks against the node's labels instead (a node whose labels still satisfy them has not drifted).
// TestNodePoolHashClassifiesEveryTemplateField fails when a field is added to the template without a decision.
func (np *NodePool) TemplateHash() string {
	t := np.Spec.Template.DeepCopy()
	t.Spec.Requirements = nil // checked against the node's labels
	raw, _ := json.Marshal(t)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// FormatPrice renders an hourly price as the API stores it (NodeClaim status.price, NodePool status.hourlyCost).
func FormatPrice(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }

// ParsePrice reads a stored hourly price (0 when absent or malformed).
func ParsePrice(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

// DisruptedTaint keeps new pods off a node being disrupted or terminated.
func DisruptedTaint() corev1.Taint {
	return corev1.Taint{Key: TaintDisrupted, Value: "true", Effect: corev1.TaintEffectNoSchedule}
}

// IsDisrupted reports whether the node carries the disrupted taint.
func IsDisrupted(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == TaintDisrupted {
			return true
		}
	}
	return false
}
