/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package karpenter reads a cluster that Karpenter runs as Stevedore would run it: Karpenter's NodePools,
// EC2NodeClasses and NodeOverlays as Stevedore's (package manifest decodes them into Stevedore's types), and
// Karpenter's NodeClaims and nodes as nodes Stevedore manages. `scheduler plan` previews what Stevedore would
// launch for the pods on Karpenter's nodes (Preview), `scheduler plan --disrupt` what its disruption loop would do
// to those nodes (AsStevedore), and `scheduler convert` writes the Stevedore manifests (Convert).
package karpenter

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
)

// Karpenter's node labels.
const (
	LabelNodePool    = "karpenter.sh/nodepool"
	LabelInitialized = "karpenter.sh/initialized"
)

// Problems are what a Karpenter object has that Stevedore would refuse or does not carry over, one line each
// naming the object and the field.
func Problems(obj runtime.Object) []string {
	var out []string
	add := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: ", manifest.Name(obj))+fmt.Sprintf(format, args...))
	}
	switch o := obj.(type) {
	case *stevedorev1.NodePool:
		for i, r := range o.Spec.Template.Spec.Requirements {
			if why := stevedorev1.UnsupportedRequirement(r); why != "" {
				add("spec.template.spec.requirements[%d]: %s", i, why)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(o.Spec.Template.ObjectMeta.Labels)) {
			if why := stevedorev1.UnsupportedTemplateLabel(k, o.Spec.Template.ObjectMeta.Labels[k]); why != "" {
				add("spec.template.metadata.labels: %s", why)
			}
		}
	case *stevedorev1.EC2NodeClass:
		if f := o.Spec.AMIFamily; f != nil && !slices.Contains([]string{stevedorev1.AMIFamilyAL2023, stevedorev1.AMIFamilyBottlerocket,
			stevedorev1.AMIFamilyCustom}, *f) {
			add("spec.amiFamily %s: Stevedore launches AL2023, Bottlerocket and Custom images", *f)
		}
		for i, t := range o.Spec.AMISelectorTerms {
			if family, _, _ := strings.Cut(t.Alias, "@"); t.Alias != "" && family != "al2023" && family != "bottlerocket" {
				add("spec.amiSelectorTerms[%d].alias %s: Stevedore resolves al2023 and bottlerocket aliases", i, t.Alias)
			}
		}
	}
	return out
}

// isKarpenterNode reports whether Karpenter launched a node.
func isKarpenterNode(n *corev1.Node) bool {
	_, ok := n.Labels[LabelNodePool]
	return ok
}
