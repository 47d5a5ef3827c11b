/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

func (e *EC2) describeInstances(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := q.Strings("InstanceId")
	for _, id := range ids {
		if _, ok := e.instances[id]; !ok {
			return nil, invalid("InvalidInstanceID.NotFound", "the instance ID '%s' does not exist", id)
		}
	}
	var matched []*Instance
	for _, id := range e.order {
		inst := e.instances[id]
		if len(ids) > 0 && !matchValue(ids, inst.ID) {
			continue
		}
		if !matchFilters(q.Filters(), inst.Tags, map[string]string{filterInstanceID: inst.ID, "instance-state-name": inst.State, "placement-group-name": inst.PlacementGroup,
			filterInstanceType: inst.Type, filterAvailabilityZone: inst.Zone, "private-dns-name": inst.PrivateDNSName,
			"instance-lifecycle": lifecycle(inst.CapacityType), "subnet-id": inst.SubnetID}) {
			continue
		}
		matched = append(matched, inst)
	}
	start, end, next := paginate(len(matched), q, 1000)
	resp := &describeInstancesResponse{RequestID: uuid.NewString(), NextToken: next}
	for _, inst := range matched[start:end] {
		resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: "r-" + inst.ID[2:], OwnerID: e.accountID,
			Instances: []xmlInstance{e.xmlInstance(inst)}})
	}
	return resp, nil
}

func lifecycle(capacityType string) string {
	if capacityType == capacityTypeSpot || capacityType == capacityTypeCapacityBlock {
		return capacityType
	}
	return ""
}

func (e *EC2) xmlInstance(inst *Instance) xmlInstance {
	x := xmlInstance{InstanceID: inst.ID, ImageID: inst.ImageID, State: xmlState{stateCodes[inst.State], inst.State},
		PrivateDNSName: inst.PrivateDNSName, InstanceType: inst.Type, LaunchTime: isoTime(inst.LaunchTime),
		SubnetID: inst.SubnetID, VpcID: e.vpcID, PrivateIPAddress: inst.PrivateIP, Architecture: ec2Arch(inst.Architecture),
		InstanceLifecycle: lifecycle(inst.CapacityType), ClientToken: inst.ClientToken, Tags: tagSet(inst.Tags),
		CapacityReservationID: inst.CapacityReservationID}
	x.Placement.AvailabilityZone, x.Placement.GroupName = inst.Zone, inst.PlacementGroup
	x.MetadataOptions.HTTPTokens = inst.LaunchTemplate.HTTPTokens
	x.MetadataOptions.HTTPPutResponseHopLimit = inst.LaunchTemplate.HTTPPutResponseHopLimit
	x.MetadataOptions.HTTPEndpoint = "enabled"
	x.NetworkInterfaces = instanceInterfaces(inst)
	if inst.StateReason != "" {
		x.StateReason = &struct {
			Code    string `xml:"code"`
			Message string `xml:"message"`
		}{Code: inst.StateReason, Message: inst.StateReason}
	}
	return x
}

// instanceInterfaces are an instance's network interfaces as DescribeInstances gives them: those of its launch
// template, or one ENA interface, all in the instance's subnet.
func instanceInterfaces(inst *Instance) []xmlInstanceNetworkInterface {
	specs := inst.LaunchTemplate.NetworkInterfaces
	if len(specs) == 0 {
		specs = []NetworkInterface{{}}
	}
	out := make([]xmlInstanceNetworkInterface, 0, len(specs))
	for i, ni := range specs {
		x := xmlInstanceNetworkInterface{NetworkInterfaceID: fmt.Sprintf("eni-%s%02d", strings.TrimPrefix(inst.ID, "i-"), i), SubnetID: inst.SubnetID,
			InterfaceType: ni.InterfaceType}
		if x.InterfaceType == "" {
			x.InterfaceType = "interface"
		}
		x.Attachment.DeviceIndex, x.Attachment.NetworkCardIndex = ni.DeviceIndex, ni.NetworkCardIndex
		out = append(out, x)
	}
	return out
}

func (e *EC2) terminateInstances(q *query) (any, *apiError) {
	ids := q.Strings("InstanceId")
	if len(ids) == 0 {
		return nil, invalid("MissingParameter", "InstanceId is required")
	}
	e.mu.Lock()
	resp := &terminateInstancesResponse{RequestID: uuid.NewString()}
	for _, id := range ids {
		if _, ok := e.instances[id]; !ok {
			e.mu.Unlock()
			return nil, invalid("InvalidInstanceID.NotFound", "the instance ID '%s' does not exist", id)
		}
	}
	for _, id := range ids {
		inst := e.instances[id]
		prev := inst.State
		if prev != stateTerminated && prev != stateShuttingDown {
			e.beginTermination(inst, "Client.UserInitiatedShutdown")
		}
		resp.Instances = append(resp.Instances, xmlStateChange{InstanceID: id,
			CurrentState: xmlState{stateCodes[inst.State], inst.State}, PreviousState: xmlState{stateCodes[prev], prev}})
	}
	e.mu.Unlock()
	return resp, nil
}

// rebootInstances restarts running instances in place (EC2 refuses terminated ones; a pending or stopping one is
// left as it is, as EC2 does).
func (e *EC2) rebootInstances(q *query) (any, *apiError) {
	ids := q.Strings("InstanceId")
	if len(ids) == 0 {
		return nil, invalid("MissingParameter", "InstanceId is required")
	}
	e.mu.Lock()
	for _, id := range ids {
		inst, ok := e.instances[id]
		if !ok {
			e.mu.Unlock()
			return nil, invalid("InvalidInstanceID.NotFound", "the instance ID '%s' does not exist", id)
		}
		if inst.State == stateTerminated {
			e.mu.Unlock()
			return nil, invalid("IncorrectState", "the instance '%s' is not in a state from which it can be rebooted", id)
		}
	}
	var rebooted []*Instance
	for _, id := range ids {
		inst := e.instances[id]
		if inst.State == stateRunning {
			inst.Reboots++
			rebooted = append(rebooted, inst.clone())
		}
	}
	hook := e.hooks.Rebooted
	e.mu.Unlock()
	if hook != nil {
		for _, inst := range rebooted {
			hook(inst)
		}
	}
	return &rebootInstancesResponse{RequestID: uuid.NewString(), Return: true}, nil
}

// beginTermination moves an instance to shutting-down, and to terminated after shuttingDownDuration. Caller
// holds e.mu.
func (e *EC2) beginTermination(inst *Instance, reason string) {
	inst.State = stateShuttingDown
	inst.StateReason = reason
	inst.TerminatedAt = e.clock.Now()
	id := inst.ID
	e.clock.AfterFunc(e.shuttingDownDuration, func() {
		e.mu.Lock()
		inst := e.instances[id]
		if inst == nil || inst.State != stateShuttingDown {
			e.mu.Unlock()
			return
		}
		inst.State = stateTerminated
		e.releaseCapacity(inst)
		snapshot, hook := inst.clone(), e.hooks.Terminated
		e.mu.Unlock()
		if hook != nil {
			hook(snapshot)
		}
	})
}

// releaseCapacity gives an instance's slot back to its pool. Caller holds e.mu.
func (e *EC2) releaseCapacity(inst *Instance) {
	if cr, ok := e.reservations[inst.CapacityReservationID]; ok && cr.State == reservationActive {
		cr.Available++
		return
	}
	key := offeringKey(inst.Type, inst.Zone, inst.CapacityType)
	if n, limited := e.capacity[key]; limited {
		e.capacity[key] = n + 1
	}
}

// Instances returns a snapshot of every instance, in launch order.
func (e *EC2) Instances() []*Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*Instance, 0, len(e.order))
	for _, id := range e.order {
		out = append(out, e.instances[id].clone())
	}
	return out
}

// Instance returns a snapshot of one instance, or nil.
func (e *EC2) Instance(id string) *Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	if inst, ok := e.instances[id]; ok {
		return inst.clone()
	}
	return nil
}

// SetCapacity limits how many more instances a pool (type, zone, capacity type) can launch; a negative n removes
// the limit. A pool at 0 answers InsufficientInstanceCapacity.
func (e *EC2) SetCapacity(instanceType, zone, capacityType string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := offeringKey(instanceType, zone, capacityType)
	if n < 0 {
		delete(e.capacity, key)
		return
	}
	e.capacity[key] = n
}

// RunInstance adds a running instance directly, as something outside Stevedore would (for tests of ownership and
// garbage collection). Tags decide who owns it.
func (e *EC2) RunInstance(instanceType, zone string, tags map[string]string) *Instance {
	e.mu.Lock()
	inst := e.newInstance(instanceType, zone, capacityTypeOnDemand, "", tags, LaunchTemplateData{}, "")
	inst.State = stateRunning
	snapshot, hook := inst.clone(), e.hooks.Running
	e.mu.Unlock()
	_ = hook // instances created outside a fleet register no node
	return snapshot
}

// newInstance creates a pending instance. Caller holds e.mu.
func (e *EC2) newInstance(instanceType, zone, capacityType, subnetID string, tags map[string]string, lt LaunchTemplateData, clientToken string) *Instance {
	var subnet *Subnet
	for _, s := range e.subnets {
		if (subnetID != "" && s.ID == subnetID) || (subnetID == "" && s.Zone == zone) {
			subnet = s
			break
		}
	}
	ip := "10.0.250.1"
	if subnet != nil {
		subnet.nextHost++
		subnet.AvailableIPs--
		ip = fmt.Sprintf("%s%d", subnet.CIDRPrefix, subnet.nextHost%254+1)
		if subnet.nextHost >= 254 {
			// beyond one /24: use the next octet
			third := strings.Split(subnet.CIDRPrefix, ".")[2]
			n, _ := strconv.Atoi(third)
			ip = fmt.Sprintf("10.0.%d.%d", n+subnet.nextHost/254, subnet.nextHost%254+1)
		}
		subnetID = subnet.ID
	}
	it := e.catalog[instanceType]
	price, _ := e.catalog.price(instanceType, zone, capacityType)
	inst := &Instance{
		ID: e.newID("i"), Type: instanceType, Architecture: it.Architecture, Zone: zone, SubnetID: subnetID,
		ImageID: lt.ImageID, PrivateIP: ip, PrivateDNSName: privateDNSName(ip, e.region), CapacityType: capacityType,
		Price: price, State: statePending, LaunchTime: e.clock.Now(), Tags: cloneMap(tags), LaunchTemplate: lt, ClientToken: clientToken,
	}
	e.instances[inst.ID] = inst
	e.order = append(e.order, inst.ID)
	return inst
}

// startRunning moves a pending instance to running after pendingDuration and calls the Running hook.
func (e *EC2) startRunning(id string) {
	e.clock.AfterFunc(e.pendingDuration, func() {
		e.mu.Lock()
		inst := e.instances[id]
		if inst == nil || inst.State != statePending {
			e.mu.Unlock()
			return
		}
		inst.State = stateRunning
		snapshot, hook := inst.clone(), e.hooks.Running
		e.mu.Unlock()
		if hook != nil {
			hook(snapshot)
		}
	})
}

// Interrupt takes an instance away as AWS does: it is terminated with the given reason (the SQS notice is sent
// separately by the caller).
func (e *EC2) Interrupt(id, reason string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	inst, ok := e.instances[id]
	if !ok {
		return fmt.Errorf("instance %s does not exist", id)
	}
	if inst.State == stateRunning || inst.State == statePending {
		e.beginTermination(inst, reason)
	}
	return nil
}

func cloneCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
