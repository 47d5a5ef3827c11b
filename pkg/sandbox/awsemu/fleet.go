/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/google/uuid"
)

type fleetOverride struct {
	instanceType, subnetID, zone, imageID string
	price                                 float64
	// priority of a prioritized fleet (lowest first; an override without one comes last)
	priority                float64
	ltName, ltID, ltVersion string
	// reservation the override's template targets, and its market type ("capacity-block" for a Capacity Block)
	reservation, marketType string
}

// createFleet serves CreateFleet of type instant: it launches up to TotalTargetCapacity instances of the default
// capacity type, trying the overrides cheapest first (lowest-price and price-capacity-optimized both end up
// there when every pool with capacity is equally deep) or, for the prioritized strategies, by priority, reporting pools without capacity in errorSet. A repeated
// ClientToken returns the first answer and launches nothing.
func (e *EC2) createFleet(q *query) (any, *apiError) {
	if t := q.Str("Type"); t != "instant" {
		return nil, invalid("InvalidParameterValue", "the emulator supports only instant fleets, not %q", t)
	}
	token := q.Str("ClientToken")
	capacityType := q.Str("TargetCapacitySpecification.DefaultTargetCapacityType")
	if capacityType != "spot" && capacityType != "on-demand" && capacityType != "capacity-block" {
		return nil, invalid("InvalidParameterValue", "DefaultTargetCapacityType %q must be spot, on-demand or capacity-block", capacityType)
	}
	target := q.Int("TargetCapacitySpecification.TotalTargetCapacity", 0)
	if target < 1 {
		return nil, invalid("InvalidTargetCapacitySpecification", "TotalTargetCapacity must be at least 1")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if token != "" {
		if prev, ok := e.fleets[token]; ok {
			return prev, nil
		}
	}
	overrides, apiErr := e.fleetOverrides(q, capacityType)
	if apiErr != nil {
		return nil, apiErr
	}
	if len(overrides) == 0 {
		return nil, invalid("InvalidFleetConfiguration", "no launch template overrides")
	}
	strategy := q.Str("OnDemandOptions.AllocationStrategy")
	if capacityType == "spot" {
		strategy = q.Str("SpotOptions.AllocationStrategy")
	}
	sortOverrides(overrides, strategy == "prioritized" || strategy == "capacity-optimized-prioritized")
	resp := &createFleetResponse{RequestID: uuid.NewString(), FleetID: "fleet-" + uuid.NewString()}
	failed := map[string]bool{}
	launched := map[int][]string{}
	instTags := q.tagSpecs("instance")
	for n := 0; n < target; n++ {
		placed := false
		for i, o := range overrides {
			key := offeringKey(o.instanceType, o.zone, capacityType)
			failedKey := key + "/" + o.reservation // a reservation refusing a launch fails only its overrides
			if failed[failedKey] {
				continue
			}
			if o.reservation != "" {
				cr, code, msg := e.reservationFor(o.reservation, o.instanceType, o.zone, o.marketType)
				if code != "" {
					failed[failedKey] = true
					resp.Errors = append(resp.Errors, xmlFleetError{LaunchTemplateAndOverrides: o.xml(), Lifecycle: capacityType,
						ErrorCode: code, ErrorMessage: msg})
					continue
				}
				cr.Available--
				launched[i] = append(launched[i], e.launchOverride(o, capacityType, instTags, token).ID)
				placed = true
				break
			}
			if code, msg := e.poolError(o, capacityType); code != "" {
				failed[failedKey] = true
				resp.Errors = append(resp.Errors, xmlFleetError{LaunchTemplateAndOverrides: o.xml(), Lifecycle: capacityType,
					ErrorCode: code, ErrorMessage: msg})
				continue
			}
			if left, limited := e.capacity[key]; limited {
				e.capacity[key] = left - 1
			}
			launched[i] = append(launched[i], e.launchOverride(o, capacityType, instTags, token).ID)
			placed = true
			break
		}
		if !placed {
			break
		}
	}
	idx := make([]int, 0, len(launched))
	for i := range launched {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		o := overrides[i]
		resp.Instances = append(resp.Instances, xmlFleetInstance{LaunchTemplateAndOverrides: o.xml(), Lifecycle: capacityType,
			InstanceIDs: launched[i], InstanceType: o.instanceType, AvailabilityZone: o.zone, SubnetID: o.subnetID})
	}
	if token != "" {
		e.fleets[token] = resp
	}
	return resp, nil
}

// launchOverride launches one instance of an override (into its reservation, if its template targets one).
// Caller holds e.mu.
func (e *EC2) launchOverride(o fleetOverride, capacityType string, instTags map[string]string, token string) *Instance {
	lt := e.templates[o.ltName].Data
	if o.imageID != "" {
		lt.ImageID = o.imageID
	}
	tags := cloneMap(lt.Tags["instance"])
	for k, v := range instTags {
		tags[k] = v
	}
	inst := e.newInstance(o.instanceType, o.zone, capacityType, o.subnetID, tags, lt, token)
	inst.CapacityReservationID = o.reservation
	if o.reservation != "" {
		inst.Price = o.price
	}
	e.startRunning(inst.ID)
	return inst
}

// poolError says why a pool cannot launch now: unknown type, not offered in the zone, or out of capacity.
// Caller holds e.mu.
func (e *EC2) poolError(o fleetOverride, capacityType string) (string, string) {
	if _, ok := e.catalog[o.instanceType]; !ok {
		return "InvalidParameterValue", fmt.Sprintf("The instance type '%s' does not exist", o.instanceType)
	}
	if _, ok := e.catalog.price(o.instanceType, o.zone, capacityType); !ok {
		return "Unsupported", fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", o.instanceType, o.zone)
	}
	if left, limited := e.capacity[offeringKey(o.instanceType, o.zone, capacityType)]; limited && left <= 0 {
		if capacityType == "spot" {
			return "InsufficientInstanceCapacity", "There is no Spot capacity available that matches your request."
		}
		return "InsufficientInstanceCapacity", fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s).", o.instanceType, o.zone)
	}
	return "", ""
}

func (o fleetOverride) xml() xmlLaunchTemplateAndOverrides {
	var x xmlLaunchTemplateAndOverrides
	x.LaunchTemplateSpecification.LaunchTemplateID = o.ltID
	x.LaunchTemplateSpecification.LaunchTemplateName = o.ltName
	x.LaunchTemplateSpecification.Version = o.ltVersion
	x.Overrides = xmlOverrides{InstanceType: o.instanceType, SubnetID: o.subnetID, AvailabilityZone: o.zone, ImageID: o.imageID}
	return x
}

func (e *EC2) template(name, id string) *LaunchTemplate {
	for _, lt := range e.templates {
		if (name != "" && lt.Name == name) || (id != "" && lt.ID == id) {
			return lt
		}
	}
	return nil
}

func (e *EC2) subnet(id string) *Subnet {
	for _, s := range e.subnets {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// fleetOverrides reads the request's launch template configs into overrides priced for capacityType. The caller
// holds e.mu.
func (e *EC2) fleetOverrides(q *query, capacityType string) ([]fleetOverride, *apiError) {
	var overrides []fleetOverride
	for _, cfg := range q.List("LaunchTemplateConfigs") {
		spec := cfg.Get("LaunchTemplateSpecification")
		ltName, ltID := spec.Str("LaunchTemplateName"), spec.Str("LaunchTemplateId")
		lt := e.template(ltName, ltID)
		if lt == nil {
			return nil, invalid("InvalidLaunchTemplateName.NotFoundException", "launch template %s%s does not exist", ltName, ltID)
		}
		if p := lt.Data.InstanceProfile; p != "" && e.iam != nil && !e.iam.HasInstanceProfile(p) {
			return nil, invalid("InvalidParameterValue", "Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", p)
		}
		for _, o := range cfg.List("Overrides") {
			fo := fleetOverride{instanceType: o.Str("InstanceType"), subnetID: o.Str("SubnetId"), zone: o.Str("AvailabilityZone"),
				imageID: o.Str("ImageId"), ltName: lt.Name, ltID: lt.ID, ltVersion: spec.Str("Version"), priority: math.MaxFloat64}
			if v, err := strconv.ParseFloat(o.Str("Priority"), 64); err == nil {
				fo.priority = v
			}
			if fo.subnetID != "" {
				s := e.subnet(fo.subnetID)
				if s == nil {
					return nil, invalid("InvalidSubnetID.NotFound", "the subnet ID '%s' does not exist", fo.subnetID)
				}
				fo.zone = s.Zone
			}
			fo.reservation, fo.marketType = lt.Data.CapacityReservationID, lt.Data.MarketType
			if (capacityType == "capacity-block") != (fo.marketType == "capacity-block") {
				return nil, invalid("InvalidParameterValue", "launch template %s: market type %q with target capacity type %s", lt.Name, fo.marketType, capacityType)
			}
			fo.price, _ = e.catalog.price(fo.instanceType, fo.zone, capacityType)
			if fo.reservation != "" {
				fo.price, _ = e.catalog.price(fo.instanceType, fo.zone, "on-demand")
				fo.price /= 1e7 // already paid for: launched before any other override
			}
			overrides = append(overrides, fo)
		}
	}
	return overrides, nil
}
