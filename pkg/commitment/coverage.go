/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package commitment

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Instance is a node, launched or being launched, as a commitment sees it.
type Instance struct {
	// Name is the node's (or, before it has one, its NodeClaim's).
	Name         string
	InstanceType string
	Zone         string
	CapacityType string
	// ListPrice is what an hour of it costs at list price.
	ListPrice float64
}

// Coverage is how the commitments cover the cluster's on-demand instances this hour.
type Coverage struct {
	// Commitments in the order they were applied, with what each uses.
	Commitments []Used
	// Covered is the fraction (0 to 1) of each instance's hour the commitments pay for, by instance name; instances
	// not covered at all are absent.
	Covered map[string]float64
	// OnDemand is the list price of the on-demand instances, CoveredOnDemand the part of it commitments cover, Spot
	// the list price of the others (spot and reserved capacity); Fees are what the commitments cost whether used or
	// not (FeesUnknown counts those declared without their rate).
	OnDemand, CoveredOnDemand, Spot, Fees float64
	FeesUnknown                           int
}

// Used is one commitment's share of the hour.
type Used struct {
	*Commitment
	// Used is how much of the commitment's Capacity is used; Nodes counts the instances it covers, wholly or in
	// part.
	Used  float64
	Nodes int
}

// epsilon is a share of an hour or of a commitment too small to count (what sums of fractions leave over).
const epsilon = 1e-9

// Room is what the commitment has left.
func (u Used) Room() float64 { return max(u.Capacity()-u.Used, 0) }

// Ratio is the share of the on-demand list price the commitments cover (0 when there is none).
func (c Coverage) Ratio() float64 {
	if c.OnDemand == 0 {
		return 0
	}
	return c.CoveredOnDemand / c.OnDemand
}

// Bill is the hour's cost: the commitments' fees, the on-demand hours they do not cover at list price, and the
// rest at list price.
func (c Coverage) Bill() float64 { return c.Fees + c.OnDemand - c.CoveredOnDemand + c.Spot }

// Cover shares the commitments out over the instances as EC2 bills an hour: zonal reservations, then regional
// ones, then EC2 Instance Savings Plans, then Compute Savings Plans (by name within a kind), each over the on-demand
// instances (by name) it covers that are not covered yet; an instance a commitment's room covers only in part is
// covered for that fraction of its hour, and the rest goes to the next commitment or the list price.
func Cover(commitments []*Commitment, instances []Instance) Coverage {
	ordered := slices.Clone(commitments)
	slices.SortStableFunc(ordered, func(a, b *Commitment) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), strings.Compare(a.Name, b.Name))
	})
	byName := slices.Clone(instances)
	slices.SortStableFunc(byName, func(a, b Instance) int { return strings.Compare(a.Name, b.Name) })
	out := Coverage{Covered: map[string]float64{}}
	for _, in := range byName {
		if in.CapacityType == stevedorev1.CapacityTypeOnDemand {
			out.OnDemand += in.ListPrice
		} else {
			out.Spot += in.ListPrice
		}
	}
	for _, c := range ordered {
		u := Used{Commitment: c}
		if fee, ok := c.Fee(); ok {
			out.Fees += fee
		} else {
			out.FeesUnknown++
		}
		for _, in := range byName {
			left := 1 - out.Covered[in.Name]
			if in.CapacityType != stevedorev1.CapacityTypeOnDemand || left <= epsilon {
				continue
			}
			use, ok := c.Use(in.InstanceType, in.Zone, in.ListPrice)
			if !ok || use <= 0 {
				continue
			}
			take := min(use*left, c.Capacity()-u.Used)
			if take <= epsilon {
				break
			}
			u.Used += take
			u.Nodes++
			out.Covered[in.Name] += take / use
			out.CoveredOnDemand += in.ListPrice * take / use
		}
		out.Commitments = append(out.Commitments, u)
	}
	return out
}

// FormatAmount writes a commitment's capacity or use with at most four decimals ("2.5", "12").
func FormatAmount(v float64) string {
	s := strconv.FormatFloat(v, 'f', 4, 64)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}
