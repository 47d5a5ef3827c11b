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
	// placementGroup the override launches into ("" for none)
	placementGroup string
}

// createFleet serves CreateFleet of type instant: it launches up to TotalTargetCapacity instances of the default
// capacity type, trying the overrides cheapest first (lowest-price and price-capacity-optimized both end up
// there when every pool with capacity is equally deep) or, for the prioritized strategies, by priority, reporting pools without capacity in errorSet. A repeated
// ClientToken returns the first answer and launches nothing.
func (e *EC2) createFleet(q *query) (any, *apiError) {
	capacityType, target, apiErr := fleetTarget(q)
	if apiErr != nil {
		return nil, apiErr
	}
	token := q.Str("ClientToken")
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
	if capacityType == capacityTypeSpot {
		strategy = q.Str("SpotOptions.AllocationStrategy")
	}
	sortOverrides(overrides, strategy == "prioritized" || strategy == "capacity-optimized-prioritized")
	resp := &createFleetResponse{RequestID: uuid.NewString(), FleetID: "fleet-" + uuid.NewString()}
	overrides, apiErr = e.allOrNothing(q, capacityType, target, overrides, resp)
	if apiErr != nil {
		return nil, apiErr
	}
	f := &fleetLaunch{overrides: overrides, capacityType: capacityType, tags: q.tagSpecs("instance"), token: token, resp: resp,
		failed: map[string]bool{}, launched: map[int][]string{}}
	for n := 0; n < target; n++ {
		if !e.launchOne(f) {
			break
		}
	}
	launched := f.launched
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

// fleetTarget reads a CreateFleet's capacity type and target capacity (an instant fleet's only).
func fleetTarget(q *query) (string, int, *apiError) {
	if t := q.Str("Type"); t != "instant" {
		return "", 0, invalid(codeInvalidParameterValue, "the emulator supports only instant fleets, not %q", t)
	}
	capacityType := q.Str("TargetCapacitySpecification.DefaultTargetCapacityType")
	if capacityType != capacityTypeSpot && capacityType != capacityTypeOnDemand && capacityType != capacityTypeCapacityBlock {
		return "", 0, invalid(codeInvalidParameterValue, "DefaultTargetCapacityType %q must be spot, on-demand or capacity-block", capacityType)
	}
	target := q.Int("TargetCapacitySpecification.TotalTargetCapacity", 0)
	if target < 1 {
		return "", 0, invalid("InvalidTargetCapacitySpecification", "TotalTargetCapacity must be at least 1")
	}
	return capacityType, target, nil
}

// fleetLaunch is a CreateFleet call being served: its overrides in the order tried, the pools that failed, and the
// instances launched by override.
type fleetLaunch struct {
	overrides    []fleetOverride
	capacityType string
	tags         map[string]string
	token        string
	resp         *createFleetResponse
	failed       map[string]bool
	launched     map[int][]string
}

// launchOne launches one instance from the first override that can; the pools that cannot are reported in the
// response's errors and not tried again. It reports whether an instance was launched. Caller holds e.mu.
func (e *EC2) launchOne(f *fleetLaunch) bool {
	for i, o := range f.overrides {
		key := offeringKey(o.instanceType, o.zone, f.capacityType)
		failedKey := key + "/" + o.reservation // a reservation refusing a launch fails only its overrides
		if f.failed[failedKey] {
			continue
		}
		var cr *CapacityReservation
		// the interfaces are refused before any capacity is looked at, as EC2 validates the request first
		code, msg := e.interfacesError(o)
		if code == "" {
			code, msg = e.placementError(o)
		}
		switch {
		case code != "":
		case o.reservation != "":
			cr, code, msg = e.reservationFor(o.reservation, o.instanceType, o.zone, o.marketType)
		default:
			code, msg = e.poolError(o, f.capacityType)
		}
		if code != "" {
			f.failed[failedKey] = true
			f.resp.Errors = append(f.resp.Errors, xmlFleetError{LaunchTemplateAndOverrides: o.xml(), Lifecycle: f.capacityType,
				ErrorCode: code, ErrorMessage: msg})
			continue
		}
		if cr != nil {
			cr.Available--
		} else if left, limited := e.capacity[key]; limited {
			e.capacity[key] = left - 1
		}
		f.launched[i] = append(f.launched[i], e.launchOverride(o, f.capacityType, f.tags, f.token).ID)
		return true
	}
	return false
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
	inst.PlacementGroup = o.placementGroup
	if o.reservation != "" {
		inst.Price = o.price
	}
	e.startRunning(inst.ID)
	return inst
}

// interfacesError says why the override's type cannot take its launch template's network interfaces: EFA
// interfaces on a type without EFA, more of them than the type takes, or one on a network card it does not have
// (the emulator gives a type with EFA one network card per EFA interface, one card otherwise). Caller holds e.mu.
func (e *EC2) interfacesError(o fleetOverride) (string, string) {
	lt, ok := e.templates[o.ltName]
	it, known := e.catalog[o.instanceType]
	if !ok || !known {
		return "", ""
	}
	efa := 0
	for _, ni := range lt.Data.NetworkInterfaces {
		if ni.InterfaceType == interfaceTypeEFA {
			efa++
		}
	}
	switch {
	case efa > 0 && it.EFA == 0:
		return "InvalidParameterCombination", fmt.Sprintf("EFA interfaces are not supported on %s", o.instanceType)
	case efa > it.EFA:
		return "InvalidParameterCombination", fmt.Sprintf("%s supports at most %d EFA interfaces, %d were requested", o.instanceType, it.EFA, efa)
	}
	for _, ni := range lt.Data.NetworkInterfaces {
		if ni.NetworkCardIndex >= networkCards(it.EFA) {
			return codeInvalidParameterValue, fmt.Sprintf("Network card index %d is not valid for instance type %s", ni.NetworkCardIndex, o.instanceType)
		}
	}
	return "", ""
}

// networkCards is how many network cards the emulator gives a type that takes efa EFA interfaces.
func networkCards(efa int) int { return max(1, efa) }

// poolError says why a pool cannot launch now: unknown type, not offered in the zone, or out of capacity.
// Caller holds e.mu.
func (e *EC2) poolError(o fleetOverride, capacityType string) (string, string) {
	if _, ok := e.catalog[o.instanceType]; !ok {
		return codeInvalidParameterValue, fmt.Sprintf("The instance type '%s' does not exist", o.instanceType)
	}
	if _, ok := e.catalog.price(o.instanceType, o.zone, capacityType); !ok {
		return "Unsupported", fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", o.instanceType, o.zone)
	}
	if left, limited := e.capacity[offeringKey(o.instanceType, o.zone, capacityType)]; limited && left <= 0 {
		if capacityType == capacityTypeSpot {
			return codeInsufficientCapacity, "There is no Spot capacity available that matches your request."
		}
		return codeInsufficientCapacity, fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s).", o.instanceType, o.zone)
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
			return nil, invalid(codeInvalidParameterValue, "Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", p)
		}
		for _, o := range cfg.List("Overrides") {
			fo := fleetOverride{instanceType: o.Str("InstanceType"), subnetID: o.Str("SubnetId"), zone: o.Str("AvailabilityZone"),
				imageID: o.Str("ImageId"), ltName: lt.Name, ltID: lt.ID, ltVersion: spec.Str("Version"), priority: math.MaxFloat64,
				placementGroup: o.Str("Placement.GroupName")}
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
			if (capacityType == capacityTypeCapacityBlock) != (fo.marketType == marketTypeCapacityBlock) {
				return nil, invalid(codeInvalidParameterValue, "launch template %s: market type %q with target capacity type %s", lt.Name, fo.marketType, capacityType)
			}
			fo.price, _ = e.catalog.price(fo.instanceType, fo.zone, capacityType)
			if fo.reservation != "" {
				fo.price, _ = e.catalog.price(fo.instanceType, fo.zone, capacityTypeOnDemand)
				fo.price /= 1e7 // already paid for: launched before any other override
			}
			overrides = append(overrides, fo)
		}
	}
	return overrides, nil
}

// allOrNothing applies the options of the capacity type's SpotOptions or OnDemandOptions that make an instant fleet
// all or nothing: SingleInstanceType and SingleAvailabilityZone keep the overrides of one type, one zone or both
// (the first such group, in the order tried, that can launch MinTargetCapacity instances, or one); with
// MinTargetCapacity, when no group can, nothing is launched and each pool short of it is in the response's errors.
// EC2 requires one of the two options with MinTargetCapacity. Caller holds e.mu.
func (e *EC2) allOrNothing(q *query, capacityType string, target int, overrides []fleetOverride, resp *createFleetResponse) ([]fleetOverride, *apiError) {
	prefix := "OnDemandOptions"
	if capacityType == capacityTypeSpot {
		prefix = "SpotOptions"
	}
	minTarget := q.Int(prefix+".MinTargetCapacity", 0)
	singleType, singleZone := q.Str(prefix+".SingleInstanceType") == "true", q.Str(prefix+".SingleAvailabilityZone") == "true"
	if minTarget > 0 && !singleType && !singleZone {
		return nil, invalid("InvalidParameterCombination", "%s.MinTargetCapacity requires SingleInstanceType or SingleAvailabilityZone", prefix)
	}
	if minTarget > target {
		return nil, invalid("InvalidTargetCapacitySpecification", "MinTargetCapacity %d exceeds TotalTargetCapacity %d", minTarget, target)
	}
	if !singleType && !singleZone {
		return overrides, nil
	}
	var order []string
	groups := map[string][]fleetOverride{}
	for _, o := range overrides {
		key := ""
		if singleType {
			key += o.instanceType
		}
		if singleZone {
			key += "/" + o.zone
		}
		if _, seen := groups[key]; !seen {
			order = append(order, key)
		}
		groups[key] = append(groups[key], o)
	}
	need := max(minTarget, 1)
	for _, key := range order {
		if e.launchable(groups[key], capacityType, need) >= need {
			return groups[key], nil
		}
	}
	for _, o := range overrides {
		resp.Errors = append(resp.Errors, xmlFleetError{LaunchTemplateAndOverrides: o.xml(), Lifecycle: capacityType,
			ErrorCode:    codeInsufficientCapacity,
			ErrorMessage: fmt.Sprintf("There is not enough capacity to fulfill your request for %d instances (MinTargetCapacity).", need)})
	}
	return nil, nil
}

// launchable counts, up to atMost, the instances the overrides' pools can launch now. Caller holds e.mu.
func (e *EC2) launchable(overrides []fleetOverride, capacityType string, atMost int) int {
	n := 0
	counted := map[string]bool{}
	for _, o := range overrides {
		key := offeringKey(o.instanceType, o.zone, capacityType) + "/" + o.reservation
		if counted[key] {
			continue
		}
		counted[key] = true
		if o.reservation != "" {
			if cr, code, _ := e.reservationFor(o.reservation, o.instanceType, o.zone, o.marketType); code == "" {
				n += cr.Available
			}
			continue
		}
		if code, _ := e.poolError(o, capacityType); code != "" {
			continue
		}
		left, limited := e.capacity[offeringKey(o.instanceType, o.zone, capacityType)]
		if !limited {
			return atMost
		}
		n += left
	}
	return min(n, atMost)
}
