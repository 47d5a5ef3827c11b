/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package catalog

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strings"
)

// The partitions Stevedore serves, as the AWS SDK names them.
const (
	PartitionAWS         = "aws"
	PartitionAWSChina    = "aws-cn"
	PartitionAWSGovCloud = "aws-us-gov"
)

// Regions is the embedded list of regions (pkg/cloud/catalog/regions.json, written by `make catalog`): every region
// of the commercial, China and GovCloud partitions, with its zones and its on-demand prices, the region's own where
// the data has them, else carried over from its partition's reference region.
type Regions struct {
	// Partitions by name: currency and reference region.
	Partitions map[string]PartitionInfo `json:"partitions"`
	// Regions, sorted by name.
	Regions []Region `json:"regions"`
}

// PartitionInfo is what the catalog knows of a partition.
type PartitionInfo struct {
	// Currency prices are given in ("USD", "CNY").
	Currency string `json:"currency"`
	// ReferenceRegion is the region whose prices are carried over to the partition's regions without their own.
	ReferenceRegion string `json:"referenceRegion"`
	// PricingAPIRegions maps a region-name prefix ("eu-") to the region whose Price List API endpoint serves it;
	// "" is every other region of the partition. Empty: the partition has no Price List API.
	PricingAPIRegions map[string]string `json:"pricingAPIRegions,omitempty"`
}

// Region is one region of the embedded list.
type Region struct {
	Name      string   `json:"name"`
	Partition string   `json:"partition"`
	Zones     []string `json:"zones"`
	// OnDemand are the region's own on-demand Linux prices by instance type, when the data has them; empty when
	// PricesFrom names the region whose prices are carried over.
	OnDemand   map[string]float64 `json:"onDemand,omitempty"`
	PricesFrom string             `json:"pricesFrom,omitempty"`
	// Generated is the date of the region's prices, Source where they come from.
	Generated string `json:"generated"`
	Source    string `json:"source"`
}

//go:embed regions.json
var embeddedRegions []byte

// EmbeddedRegions returns the embedded list of regions.
func EmbeddedRegions() *Regions {
	var r Regions
	dec := json.NewDecoder(bytes.NewReader(embeddedRegions))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		panic(fmt.Sprintf("the embedded regions are invalid: %v", err)) // caught by the package's tests
	}
	return &r
}

// Lookup returns the region by name.
func (r *Regions) Lookup(name string) (Region, bool) {
	i, ok := slices.BinarySearchFunc(r.Regions, name, func(g Region, n string) int { return strings.Compare(g.Name, n) })
	if !ok {
		return Region{}, false
	}
	return r.Regions[i], true
}

// PartitionOf is the partition of a region: the embedded list's, else by the name's prefix ("cn-" China, "us-gov-"
// GovCloud, any other the commercial partition), so that a region opened after the data was gathered still has one.
func PartitionOf(region string) string {
	return EmbeddedRegions().partitionOf(region)
}

func (r *Regions) partitionOf(region string) string {
	if g, ok := r.Lookup(region); ok {
		return g.Partition
	}
	switch {
	case strings.HasPrefix(region, "cn-"):
		return PartitionAWSChina
	case strings.HasPrefix(region, "us-gov-"):
		return PartitionAWSGovCloud
	default:
		return PartitionAWS
	}
}

// CurrencyOf is the currency a region's prices are in.
func CurrencyOf(region string) string {
	r := EmbeddedRegions()
	if c := r.Partitions[r.partitionOf(region)].Currency; c != "" {
		return c
	}
	return "USD"
}

// PricingAPIRegion is the region whose Price List API endpoint serves the region's prices; false when its partition
// has none (GovCloud), and then only the embedded prices serve.
func PricingAPIRegion(region string) (string, bool) {
	r := EmbeddedRegions()
	byPrefix := r.Partitions[r.partitionOf(region)].PricingAPIRegions
	if len(byPrefix) == 0 {
		return "", false
	}
	best := ""
	for _, prefix := range slices.Sorted(maps.Keys(byPrefix)) {
		if strings.HasPrefix(region, prefix) && len(prefix) >= len(best) {
			best = prefix
		}
	}
	return byPrefix[best], true
}

// PricesCarriedOver says whose prices the region's embedded catalog carries over, when they are not its own: the
// region the list names, or for a region it does not name its partition's reference region.
func PricesCarriedOver(region string) (string, bool) {
	r := EmbeddedRegions()
	if g, ok := r.Lookup(region); ok {
		return g.PricesFrom, g.PricesFrom != "" && g.PricesFrom != region
	}
	ref := r.Partitions[r.partitionOf(region)].ReferenceRegion
	return ref, ref != "" && ref != region
}

// ForRegion returns the embedded catalog of a region: the default catalog's instance types, offered in the region's
// zones at the region's on-demand prices in its currency (its own where the data has them, else carried over from
// its partition's reference region, as Source says), with synthetic spot prices. A region the list does not name
// is served like one without its own prices, in zones a, b and c; its Source says so.
func ForRegion(region string) (*File, error) {
	if region == "" {
		return nil, fmt.Errorf("no region given")
	}
	base := Default()
	if region == base.Region {
		return base, nil
	}
	regions := EmbeddedRegions()
	g, known := regions.Lookup(region)
	if !known {
		part := regions.partitionOf(region)
		ref := regions.Partitions[part].ReferenceRegion
		if ref == "" {
			return nil, fmt.Errorf("region %s: partition %s has no embedded prices", region, part)
		}
		g = Region{Name: region, Partition: part, PricesFrom: ref,
			Zones:  []string{region + "a", region + "b", region + "c"},
			Source: "region not in the embedded list (opened after it was gathered): zones a, b and c assumed, prices carried over from " + ref}
	}
	prices, generated, err := regions.onDemand(g, base)
	if err != nil {
		return nil, err
	}
	out := &File{Region: region, Currency: regions.Partitions[g.Partition].Currency, Generated: generated,
		Source: g.Source}
	for _, it := range base.InstanceTypes {
		price, ok := prices[it.Name]
		if !ok {
			continue
		}
		it.Offerings = make([]Offering, 0, 2*len(g.Zones))
		for _, zone := range g.Zones {
			it.Offerings = append(it.Offerings, Offering{Zone: zone, CapacityType: CapacityOnDemand, Price: price},
				Offering{Zone: zone, CapacityType: CapacitySpot, Price: SyntheticSpotPrice(it.Name, zone, price)})
		}
		out.InstanceTypes = append(out.InstanceTypes, it)
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("embedded catalog of %s: %w", region, err)
	}
	return out, nil
}

// onDemand are a region's on-demand prices by instance type and their date: its own, or those of the region it
// carries over (the default catalog's, for its own region).
func (r *Regions) onDemand(g Region, base *File) (map[string]float64, string, error) {
	if g.PricesFrom == "" {
		return g.OnDemand, g.Generated, nil
	}
	if g.PricesFrom == base.Region {
		return base.OnDemandPrices(), base.Generated, nil
	}
	from, ok := r.Lookup(g.PricesFrom)
	if !ok || from.PricesFrom != "" {
		return nil, "", fmt.Errorf("region %s: carries over the prices of %q, which has none of its own", g.Name, g.PricesFrom)
	}
	return from.OnDemand, from.Generated, nil
}

// SyntheticSpotPrice is the spot price the embedded catalogs and the emulator give an offering with no listed one:
// 30-40% of its on-demand price, from a hash of type and zone (AWS publishes no fixed spot price).
func SyntheticSpotPrice(instanceType, zone string, onDemand float64) float64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(instanceType + "/" + zone)) // a hash.Hash's Write never returns an error
	ratio := 0.30 + 0.10*float64(h.Sum32()%1000)/1000
	return math.Round(onDemand*ratio*10000) / 10000
}
