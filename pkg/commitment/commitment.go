/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package commitment prices capacity the account has already paid for. A Commitment (a Savings Plan or Reserved
// Instances) covers on-demand instances up to its size; Cover shares the size out over the cluster's on-demand
// nodes as EC2 bills it (zonal reservations first, then regional ones, then EC2 Instance Savings Plans, then
// Compute Savings Plans), and Offer adds to the instance types a NodePool may launch the covered offerings that the
// room left still takes, priced at nearly nothing: the hours are paid for whether used or not.
package commitment

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// kind orders commitments as EC2 applies them to an hour's usage.
type kind int

const (
	zonalReservation kind = iota
	regionalReservation
	instanceSavingsPlan
	computeSavingsPlan
)

// Commitment is a Commitment ready to apply.
type Commitment struct {
	Name string
	kind kind
	// family and instanceType select what the commitment covers (an EC2 Instance plan's family; a reservation's
	// type, whose family a regional one covers by normalized units when the type has a size), zone a zonal
	// reservation's zone.
	family, instanceType, zone string
	// flexible is true for a regional reservation of a type with a size: it covers the family by normalized units.
	flexible bool
	// capacity is the commitment's size: dollars an hour (Savings Plans), instances (zonal reservations and
	// regional ones of a type without a size) or normalized units.
	capacity float64
	// discount is a Savings Plan's rate below the list price (0.28).
	discount float64
	// fee is what the commitment costs an hour whether used or not; feeKnown is false for reservations declared
	// without their rate.
	fee      float64
	feeKnown bool
}

// Compile checks a Commitment and returns it ready to apply (the API server refuses most bad specs; this catches
// the rest, such as a discount of 100% or more).
func Compile(c *stevedorev1.Commitment) (*Commitment, error) {
	switch {
	case c.Spec.SavingsPlan != nil:
		return compileSavingsPlan(c.Name, c.Spec.SavingsPlan)
	case c.Spec.ReservedInstances != nil:
		return compileReservation(c.Name, c.Spec.ReservedInstances)
	default:
		return nil, fmt.Errorf("spec: set exactly one of savingsPlan and reservedInstances")
	}
}

func compileSavingsPlan(name string, sp *stevedorev1.SavingsPlan) (*Commitment, error) {
	hourly, err := strconv.ParseFloat(sp.HourlyCommitment, 64)
	if err != nil || hourly < 0 || math.IsInf(hourly, 0) {
		return nil, fmt.Errorf("spec.savingsPlan.hourlyCommitment: %q is not a price in dollars an hour", sp.HourlyCommitment)
	}
	discount, err := strconv.ParseFloat(sp.DiscountPercent, 64)
	if err != nil || discount < 0 || discount >= 100 {
		return nil, fmt.Errorf("spec.savingsPlan.discountPercent: %q is not a percentage below 100", sp.DiscountPercent)
	}
	out := &Commitment{Name: name, capacity: hourly, discount: discount / 100, fee: hourly, feeKnown: true}
	switch sp.Type {
	case stevedorev1.SavingsPlanEC2Instance:
		if sp.InstanceFamily == "" {
			return nil, fmt.Errorf("spec.savingsPlan.instanceFamily: required for an EC2Instance plan")
		}
		out.kind, out.family = instanceSavingsPlan, sp.InstanceFamily
	case stevedorev1.SavingsPlanCompute:
		out.kind = computeSavingsPlan
	default:
		return nil, fmt.Errorf("spec.savingsPlan.type: %q is neither EC2Instance nor Compute", sp.Type)
	}
	return out, nil
}

func compileReservation(name string, ri *stevedorev1.ReservedInstances) (*Commitment, error) {
	family, size, ok := strings.Cut(ri.InstanceType, ".")
	if !ok || family == "" || size == "" {
		return nil, fmt.Errorf("spec.reservedInstances.instanceType: %q is not an instance type", ri.InstanceType)
	}
	if ri.Count < 1 {
		return nil, fmt.Errorf("spec.reservedInstances.count: %d is not a positive count", ri.Count)
	}
	out := &Commitment{Name: name, kind: zonalReservation, instanceType: ri.InstanceType, family: family, zone: ri.Zone,
		capacity: float64(ri.Count)}
	if ri.Zone == "" {
		out.kind = regionalReservation
		if nf, ok := normalizationFactor(size); ok {
			out.flexible, out.capacity = true, float64(ri.Count)*nf
		}
	}
	if ri.HourlyRate != "" {
		rate, err := strconv.ParseFloat(ri.HourlyRate, 64)
		if err != nil || rate < 0 || math.IsInf(rate, 0) {
			return nil, fmt.Errorf("spec.reservedInstances.hourlyRate: %q is not a price in dollars an hour", ri.HourlyRate)
		}
		out.fee, out.feeKnown = rate*float64(ri.Count), true
	}
	return out, nil
}

// Kind names the commitment's kind as its status does.
func (c *Commitment) Kind() string {
	switch c.kind {
	case instanceSavingsPlan:
		return "SavingsPlan/" + stevedorev1.SavingsPlanEC2Instance
	case computeSavingsPlan:
		return "SavingsPlan/" + stevedorev1.SavingsPlanCompute
	default:
		return "ReservedInstances"
	}
}

// Capacity is the commitment's size, in its Unit.
func (c *Commitment) Capacity() float64 { return c.capacity }

// Unit names what Capacity counts: "$/h", "instances" or "units" (normalized units).
func (c *Commitment) Unit() string {
	switch {
	case c.kind == instanceSavingsPlan || c.kind == computeSavingsPlan:
		return "$/h"
	case c.flexible:
		return "units"
	default:
		return "instances"
	}
}

// Fee is what the commitment costs an hour whether used or not, and false when it was declared without its rate.
func (c *Commitment) Fee() (float64, bool) { return c.fee, c.feeKnown }

// Use is how much of the commitment one instance of the type, in the zone, at the list price, uses an hour, and
// false when the commitment does not cover it.
func (c *Commitment) Use(instanceType, zone string, listPrice float64) (float64, bool) {
	family, size, _ := strings.Cut(instanceType, ".")
	switch c.kind {
	case computeSavingsPlan:
		return listPrice * (1 - c.discount), true
	case instanceSavingsPlan:
		if family != c.family {
			return 0, false
		}
		return listPrice * (1 - c.discount), true
	case zonalReservation:
		if instanceType != c.instanceType || zone != c.zone {
			return 0, false
		}
		return 1, true
	default:
		if instanceType == c.instanceType && !c.flexible {
			return 1, true
		}
		if !c.flexible || family != c.family {
			return 0, false
		}
		return normalizationFactor(size)
	}
}

// sizePattern is a size with a multiple of xlarge (2xlarge, 24xlarge).
var sizePattern = regexp.MustCompile(`^(\d+)xlarge$`)

// normalizationFactor is the normalized units of an instance size, as EC2 sizes regional reservations (a small
// is 1, a large 4, an xlarge 8, an Nxlarge 8N), and false for sizes without one (metal, and names it does not
// know).
func normalizationFactor(size string) (float64, bool) {
	switch size {
	case "nano":
		return 0.25, true
	case "micro":
		return 0.5, true
	case "small":
		return 1, true
	case "medium":
		return 2, true
	case "large":
		return 4, true
	case "xlarge":
		return 8, true
	}
	if m := sizePattern.FindStringSubmatch(size); m != nil {
		n, err := strconv.Atoi(m[1])
		if err == nil && n > 0 {
			return 8 * float64(n), true
		}
	}
	return 0, false
}
