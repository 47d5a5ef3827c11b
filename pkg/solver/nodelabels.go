/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package solver

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// poolLabelSets are the distinct label sets a new node of a NodePool can have, worked out once per NodePoolOption
// and region: every solve needs them (the phantom nodes standing for domains with no node yet, the domains of the
// spread groups), and computing them renders the labels of every offering of every instance type (thousands),
// which was nearly all of a small solve's time (a consolidation simulation moving two pods).
type poolLabelSets struct {
	once   sync.Once
	region string
	// phantom: per distinct set of the labels a node has whatever its type (arch and OS, zone, capacity type, the
	// NodePool's), its key and labels.
	phantom []keyedLabels
	// possible: per distinct set of the labels of a node of one type in one offering (and each value of a key the
	// NodePool lets take several), its key and labels.
	possible []keyedLabels
}

type keyedLabels struct {
	key    string
	labels map[string]string
}

// labelSets returns the option's label sets for region, computed on first use; an option not made by
// NewNodePoolOption (no cache) or asked for another region computes them each time.
func (o *NodePoolOption) labelSets(region string) *poolLabelSets {
	if o.labelCache == nil {
		return o.computeLabelSets(region)
	}
	o.labelCache.once.Do(func() {
		sets := o.computeLabelSets(region)
		o.labelCache.region, o.labelCache.phantom, o.labelCache.possible = sets.region, sets.phantom, sets.possible
	})
	if o.labelCache.region != region {
		return o.computeLabelSets(region)
	}
	return o.labelCache
}

func (o *NodePoolOption) computeLabelSets(region string) *poolLabelSets {
	out := &poolLabelSets{region: region}
	seenPhantom, seenPossible := map[string]bool{}, map[string]bool{}
	add := func(seen map[string]bool, to *[]keyedLabels, l map[string]string) {
		key := labelsKey(l)
		if !seen[key] {
			seen[key] = true
			*to = append(*to, keyedLabels{key: key, labels: l})
		}
	}
	var multi []string
	for _, k := range slices.Sorted(maps.Keys(o.Requirements)) {
		if r := o.Requirements[k]; o.labelsNode(k) && r.IsFinite() && r.Len() > 1 {
			multi = append(multi, k)
		}
	}
	for _, it := range o.InstanceTypes {
		for _, off := range it.Offerings.Compatible(o.Requirements) {
			add(seenPhantom, &out.phantom, NodeLabels(o.NodePool, o.Requirements, o.Requirements, map[string]string{
				corev1.LabelArchStable: it.Requirements.Get(corev1.LabelArchStable).Any(),
				corev1.LabelOSStable:   it.Requirements.Get(corev1.LabelOSStable).Any(),
			}, off.Zone, off.ZoneID, off.CapacityType, region))
			l := NodeLabels(o.NodePool, o.Requirements, o.Requirements, it.Labels(), off.Zone, off.ZoneID, off.CapacityType, region)
			add(seenPossible, &out.possible, l)
			for _, k := range multi {
				for _, v := range o.Requirements[k].Values() {
					with := maps.Clone(l)
					with[k] = v
					add(seenPossible, &out.possible, with)
				}
			}
		}
	}
	return out
}

// labelsKey identifies a label set: its pairs in key order.
func labelsKey(l map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(l)) {
		fmt.Fprintf(&b, "%s=%s;", k, l[k])
	}
	return b.String()
}
