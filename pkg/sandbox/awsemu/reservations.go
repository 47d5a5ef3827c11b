/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/xml"
	"fmt"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/uuid"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// Reservation states and types, and the market type of a launch into a Capacity Block, as EC2 names them.
const (
	reservationActive            = string(ec2types.CapacityReservationStateActive)
	reservationTypeCapacityBlock = string(ec2types.CapacityReservationTypeCapacityBlock)
	marketTypeCapacityBlock      = string(ec2types.MarketTypeCapacityBlock)
)

// CapacityReservation is an emulated On-Demand Capacity Reservation or Capacity Block.
type CapacityReservation struct {
	ID, OwnerID, InstanceType, Zone string
	// Type is "default" or "capacity-block"; MatchCriteria "open" or "targeted".
	Type, MatchCriteria string
	Total, Available    int
	// Interruptible: its owner may take the capacity back (SetInterruptible).
	Interruptible bool
	// State is active, expired or cancelled.
	State      string
	Start, End time.Time // End is zero for a reservation without an end date
	Tags       map[string]string
}

// createCapacityReservation serves CreateCapacityReservation: an On-Demand Capacity Reservation of InstanceCount
// instances of a type in a zone, active at once.
func (e *EC2) createCapacityReservation(q *query) (any, *apiError) {
	it, zone, count := q.Str("InstanceType"), q.Str("AvailabilityZone"), q.Int("InstanceCount", 0)
	switch {
	case it == "" || zone == "" || count < 1:
		return nil, invalid("MissingParameter", "InstanceType, AvailabilityZone and a positive InstanceCount are required")
	case q.Str("InstancePlatform") == "":
		return nil, invalid("MissingParameter", "InstancePlatform is required")
	}
	match := q.Str("InstanceMatchCriteria")
	if match == "" {
		match = "open"
	}
	if match != "open" && match != "targeted" {
		return nil, invalid(codeInvalidParameterValue, "InstanceMatchCriteria %q must be open or targeted", match)
	}
	var end time.Time
	if q.Str("EndDateType") == "limited" {
		t, err := time.Parse(time.RFC3339, q.Str("EndDate"))
		if err != nil {
			return nil, invalid(codeInvalidParameterValue, "EndDate %q is not a date: %v", q.Str("EndDate"), err)
		}
		end = t
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.catalog[it]; !ok {
		return nil, invalid(codeInvalidParameterValue, "The instance type '%s' does not exist", it)
	}
	if _, ok := e.catalog.price(it, zone, capacityTypeOnDemand); !ok {
		return nil, invalid("Unsupported", "Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", it, zone)
	}
	// CreateCapacityReservation spells the list TagSpecifications, unlike most EC2 actions
	tags := q.tagSpecs("capacity-reservation")
	for _, spec := range q.List("TagSpecifications") {
		if spec.Str("ResourceType") == "capacity-reservation" {
			for _, t := range spec.List("Tag") {
				tags[t.Str("Key")] = t.Str("Value")
			}
		}
	}
	cr := e.addReservation(it, zone, count, "default", match, e.clock.Now(), end, tags)
	return &createCapacityReservationResponse{RequestID: uuid.NewString(), CapacityReservation: e.xmlReservation(cr)}, nil
}

// addReservation records a reservation. Caller holds e.mu.
func (e *EC2) addReservation(it, zone string, count int, typ, match string, start, end time.Time, tags map[string]string) *CapacityReservation {
	cr := &CapacityReservation{ID: e.newID("cr"), OwnerID: e.accountID, InstanceType: it, Zone: zone, Type: typ,
		MatchCriteria: match, Total: count, Available: count, State: reservationActive, Start: start, End: end, Tags: cloneMap(tags)}
	e.reservations[cr.ID] = cr
	return cr
}

// AddCapacityBlock adds an active Capacity Block (a targeted reservation of count instances ending at end), as a
// purchase through the Capacity Blocks offerings would, and returns its id.
func (e *EC2) AddCapacityBlock(instanceType, zone string, count int, end time.Time, tags map[string]string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addReservation(instanceType, zone, count, reservationTypeCapacityBlock, "targeted", e.clock.Now(), end, tags).ID
}

// RunInReservation launches a running instance into a reservation as something outside Stevedore would (another
// workload of the account), taking one of its free slots. It returns nil when the reservation has none.
func (e *EC2) RunInReservation(id string) *Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	cr, ok := e.reservations[id]
	if !ok || cr.State != reservationActive || cr.Available <= 0 {
		return nil
	}
	cr.Available--
	inst := e.newInstance(cr.InstanceType, cr.Zone, capacityTypeOnDemand, "", nil, LaunchTemplateData{}, "")
	inst.CapacityReservationID, inst.State = id, stateRunning
	return inst.clone()
}

// Reservation returns a copy of a reservation (nil if unknown), with its end applied.
func (e *EC2) Reservation(id string) *CapacityReservation {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endReservations()
	cr, ok := e.reservations[id]
	if !ok {
		return nil
	}
	out := *cr
	out.Tags = cloneMap(cr.Tags)
	return &out
}

// SetInterruptible marks a reservation interruptible, as one its owner shares with the capacity taken back on
// notice.
func (e *EC2) SetInterruptible(id string, interruptible bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cr, ok := e.reservations[id]; ok {
		cr.Interruptible = interruptible
	}
}

// endReservations expires reservations past their end; a Capacity Block's instances are terminated from 30
// minutes before its end, as EC2 reclaims them. Caller holds e.mu.
func (e *EC2) endReservations() {
	now := e.clock.Now()
	for _, cr := range e.reservations {
		if cr.End.IsZero() || cr.State != reservationActive {
			continue
		}
		if cr.Type == reservationTypeCapacityBlock && !now.Before(cr.End.Add(-cloud.CapacityBlockReclaim)) {
			for _, id := range e.order {
				if inst := e.instances[id]; inst.CapacityReservationID == cr.ID && (inst.State == statePending || inst.State == stateRunning) {
					e.beginTermination(inst, "Server.ScheduledStop")
				}
			}
		}
		if !now.Before(cr.End) {
			cr.State, cr.Available = "expired", 0
		}
	}
}

// describeCapacityReservations serves DescribeCapacityReservations with ids and the filters tag:<key>, tag-key,
// state, owner-id, instance-type, availability-zone and reservation-type.
func (e *EC2) describeCapacityReservations(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endReservations()
	ids := q.Strings("CapacityReservationId")
	for _, id := range ids {
		if _, ok := e.reservations[id]; !ok {
			return nil, invalid("InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
		}
	}
	var items []xmlCapacityReservation
	for _, id := range sortedKeys(e.reservations) {
		cr := e.reservations[id]
		if len(ids) > 0 && !matchValue(ids, id) {
			continue
		}
		attrs := map[string]string{filterState: cr.State, "owner-id": cr.OwnerID, filterInstanceType: cr.InstanceType,
			filterAvailabilityZone: cr.Zone, "reservation-type": cr.Type, "instance-match-criteria": cr.MatchCriteria}
		if !matchFilters(q.Filters(), cr.Tags, attrs) {
			continue
		}
		items = append(items, e.xmlReservation(cr))
	}
	start, end, next := paginate(len(items), q, 1000)
	return &describeCapacityReservationsResponse{RequestID: uuid.NewString(), CapacityReservations: items[start:end], NextToken: next}, nil
}

// reservationFor checks that a launch into a reservation can go ahead: the reservation exists, is active, is for
// the instance type and zone, and has room. Caller holds e.mu.
func (e *EC2) reservationFor(id, instanceType, zone, marketType string) (*CapacityReservation, string, string) {
	e.endReservations()
	cr, ok := e.reservations[id]
	switch {
	case !ok:
		return nil, "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", id)
	case cr.InstanceType != instanceType || cr.Zone != zone:
		return nil, codeInvalidParameterValue, fmt.Sprintf("capacity reservation %s is for %s in %s", id, cr.InstanceType, cr.Zone)
	case (cr.Type == reservationTypeCapacityBlock) != (marketType == marketTypeCapacityBlock):
		return nil, codeInvalidParameterValue, fmt.Sprintf("capacity reservation %s of type %s needs market type capacity-block exactly when it is a Capacity Block", id, cr.Type)
	case cr.State != reservationActive || cr.Available <= 0:
		return nil, "ReservationCapacityExceeded", fmt.Sprintf("The requested capacity reservation %s has no available capacity", id)
	}
	return cr, "", ""
}

func (e *EC2) xmlReservation(cr *CapacityReservation) xmlCapacityReservation {
	x := xmlCapacityReservation{ID: cr.ID, OwnerID: cr.OwnerID, ARN: fmt.Sprintf("arn:%s:ec2:%s:%s:capacity-reservation/%s", e.partition, e.region, cr.OwnerID, cr.ID),
		InstanceType: cr.InstanceType, Platform: "Linux/UNIX", Zone: cr.Zone, Tenancy: "default", Total: cr.Total, Available: cr.Available,
		State: cr.State, StartDate: isoTime(cr.Start), CreateDate: isoTime(cr.Start), EndDateType: "unlimited", MatchCriteria: cr.MatchCriteria,
		ReservationType: cr.Type, Interruptible: cr.Interruptible, Tags: tagSet(cr.Tags)}
	if !cr.End.IsZero() {
		x.EndDate, x.EndDateType = isoTime(cr.End), "limited"
	}
	return x
}

type xmlCapacityReservation struct {
	ID              string   `xml:"capacityReservationId"`
	OwnerID         string   `xml:"ownerId"`
	ARN             string   `xml:"capacityReservationArn"`
	InstanceType    string   `xml:"instanceType"`
	Platform        string   `xml:"instancePlatform"`
	Zone            string   `xml:"availabilityZone"`
	Tenancy         string   `xml:"tenancy"`
	Total           int      `xml:"totalInstanceCount"`
	Available       int      `xml:"availableInstanceCount"`
	State           string   `xml:"state"`
	StartDate       string   `xml:"startDate"`
	EndDate         string   `xml:"endDate,omitempty"`
	EndDateType     string   `xml:"endDateType"`
	MatchCriteria   string   `xml:"instanceMatchCriteria"`
	CreateDate      string   `xml:"createDate"`
	ReservationType string   `xml:"reservationType"`
	Interruptible   bool     `xml:"interruptible"`
	Tags            []xmlTag `xml:"tagSet>item"`
}

type createCapacityReservationResponse struct {
	XMLName             xml.Name               `xml:"CreateCapacityReservationResponse"`
	RequestID           string                 `xml:"requestId"`
	CapacityReservation xmlCapacityReservation `xml:"capacityReservation"`
}

type describeCapacityReservationsResponse struct {
	XMLName              xml.Name                 `xml:"DescribeCapacityReservationsResponse"`
	RequestID            string                   `xml:"requestId"`
	CapacityReservations []xmlCapacityReservation `xml:"capacityReservationSet>item"`
	NextToken            string                   `xml:"nextToken,omitempty"`
}
