/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package commitment

import (
	"slices"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
)

// coveredPriceFactor prices a covered hour at this fraction of its list price: nearly nothing (the hour is paid
// for already), yet types cheaper at list price still come first, so a commitment stretches as far as it goes.
const coveredPriceFactor = 1e-6

// Offer returns the instance types with, beside each available on-demand offering, one covered offering for each
// commitment that covers it and still has room for a whole instance of it. A type no commitment covers is
// returned as it is; the others are copies.
func Offer(its []*cloud.InstanceType, cov Coverage) []*cloud.InstanceType {
	if len(cov.Commitments) == 0 {
		return its
	}
	out := make([]*cloud.InstanceType, 0, len(its))
	for _, it := range its {
		var covered cloud.Offerings
		for _, o := range it.Offerings {
			if o.CapacityType != stevedorev1.CapacityTypeOnDemand || o.Covered != nil || o.ReservationID != "" || !o.Available || o.Price <= 0 {
				continue
			}
			for _, u := range cov.Commitments {
				use, ok := u.Use(it.Name, o.Zone, o.Price)
				if !ok || use <= 0 || use > u.Room()+epsilon {
					continue
				}
				c := o
				c.Price = o.Price * coveredPriceFactor
				c.Covered = &cloud.Covered{Commitment: u.Name, Use: use, Room: u.Room(), ListPrice: o.Price, Zonal: u.kind == zonalReservation}
				covered = append(covered, c)
			}
		}
		if len(covered) == 0 {
			out = append(out, it)
			continue
		}
		out = append(out, it.WithOfferings(append(slices.Clone(it.Offerings), covered...)))
	}
	return out
}

// Effective is what an hour of an instance costs beyond its commitments: the part of its list price they do not
// cover (covered is the fraction of its hour they pay for), the covered part at nearly nothing.
func Effective(listPrice, covered float64) float64 {
	if covered <= 0 {
		return listPrice
	}
	return listPrice*(1-covered) + listPrice*covered*coveredPriceFactor
}
