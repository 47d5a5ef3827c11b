/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// reservedPriceDivisor makes a reserved offering's price its type's on-demand price divided by ten million: already
// paid for, so cheaper than anything else, while alike reservations keep their types' order.
const reservedPriceDivisor = 10_000_000

// Reservation is a resolved capacity reservation (On-Demand Capacity Reservation or Capacity Block).
type Reservation struct {
	ID, OwnerID, InstanceType, Zone string
	// Type is stevedorev1.ReservationTypeDefault or ReservationTypeCapacityBlock.
	Type          string
	MatchCriteria string
	// Interruptible: the reservation's owner may take the capacity back.
	Interruptible bool
	Total         int32
	Available     int32
	End           time.Time
}

// Expiring reports whether the reservation is a Capacity Block whose instances must leave now (within
// cloud.CapacityBlockDrainLead of its end).
func (r Reservation) Expiring(now time.Time) bool {
	return r.Type == stevedorev1.ReservationTypeCapacityBlock && !r.End.IsZero() && !now.Before(r.End.Add(-cloud.CapacityBlockDrainLead))
}

// CapacityBlockEnds returns the end of each of the reservations that is a Capacity Block (expired ones included).
func (p *Provider) CapacityBlockEnds(ctx context.Context, reservationIDs []string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for start := 0; start < len(reservationIDs); start += 100 {
		ids := reservationIDs[start:min(start+100, len(reservationIDs))]
		pg := ec2.NewDescribeCapacityReservationsPaginator(p.ec2, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: ids})
		err := eachPage(ctx, "DescribeCapacityReservations", pg, func(page *ec2.DescribeCapacityReservationsOutput) {
			for _, cr := range page.CapacityReservations {
				if cr.ReservationType == ec2types.CapacityReservationTypeCapacityBlock && cr.EndDate != nil {
					out[aws.ToString(cr.CapacityReservationId)] = *cr.EndDate
				}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// reservations resolves capacityReservationSelectorTerms to the active reservations in the node class's zones,
// sorted by id.
func (d *discovery) reservations(ctx context.Context, terms []stevedorev1.CapacityReservationSelectorTerm, zones map[string]bool) ([]Reservation, error) {
	byID := map[string]Reservation{}
	for _, term := range terms {
		in := &ec2.DescribeCapacityReservationsInput{Filters: append(tagFilters(term.Tags),
			ec2types.Filter{Name: aws.String("state"), Values: []string{"active"}})}
		if term.ID != "" {
			in.CapacityReservationIds = []string{term.ID}
		}
		if term.OwnerID != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{term.OwnerID}})
		}
		if term.InstanceMatchCriteria != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("instance-match-criteria"), Values: []string{term.InstanceMatchCriteria}})
		}
		p := ec2.NewDescribeCapacityReservationsPaginator(d.ec2, in)
		err := eachPage(ctx, "DescribeCapacityReservations", p, func(out *ec2.DescribeCapacityReservationsOutput) {
			for _, cr := range out.CapacityReservations {
				r := Reservation{ID: aws.ToString(cr.CapacityReservationId), OwnerID: aws.ToString(cr.OwnerId),
					InstanceType: aws.ToString(cr.InstanceType), Zone: aws.ToString(cr.AvailabilityZone),
					Type: stevedorev1.ReservationTypeDefault, MatchCriteria: string(cr.InstanceMatchCriteria), Interruptible: aws.ToBool(cr.Interruptible),
					Total: aws.ToInt32(cr.TotalInstanceCount), Available: aws.ToInt32(cr.AvailableInstanceCount)}
				if cr.ReservationType == ec2types.CapacityReservationTypeCapacityBlock {
					r.Type = stevedorev1.ReservationTypeCapacityBlock
				}
				if cr.EndDate != nil {
					r.End = *cr.EndDate
				}
				if cr.State != ec2types.CapacityReservationStateActive || (zones != nil && !zones[r.Zone]) {
					continue
				}
				byID[r.ID] = r
			}
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]Reservation, 0, len(byID))
	for _, r := range byID {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// addReservedOfferings gives each type the reserved offerings of the reservations for it: capacity type reserved,
// priced at a ten-millionth of its cheapest on-demand offering, available while the reservation has room, is not
// a Capacity Block about to end and has not just refused a launch (the unavailable-offerings cache).
func addReservedOfferings(its []*cloud.InstanceType, reservations []Reservation, now time.Time, unavailable *cloud.UnavailableOfferings) {
	if len(reservations) == 0 {
		return
	}
	byType := map[string][]Reservation{}
	for _, r := range reservations {
		byType[r.InstanceType] = append(byType[r.InstanceType], r)
	}
	for _, it := range its {
		rs := byType[it.Name]
		if len(rs) == 0 {
			continue
		}
		onDemand := 0.0
		for _, o := range it.Offerings {
			if o.CapacityType == stevedorev1.CapacityTypeOnDemand && (onDemand == 0 || o.Price < onDemand) {
				onDemand = o.Price
			}
		}
		for _, r := range rs {
			o := cloud.Offering{Zone: r.Zone, CapacityType: stevedorev1.CapacityTypeReserved, Price: onDemand / reservedPriceDivisor,
				ReservationID: r.ID, ReservationType: r.Type, ReservationCapacity: int(r.Available)}
			o.Available = r.Available > 0 && !r.Expiring(now) && !unavailable.IsUnavailable(it.Name, o.Zone, o.CacheKey())
			it.Offerings = append(it.Offerings, o)
		}
		it.AddCapacityType(stevedorev1.CapacityTypeReserved)
	}
}
