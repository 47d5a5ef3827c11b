/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package catalog

import (
	"strings"
	"testing"
)

// onDemandPrice is the on-demand price of a type in a zone (0 when not offered).
func onDemandPrice(f *File, name, zone string) float64 {
	return f.Pricer()(name, zone, "on-demand")
}

func TestEveryRegionOfTheThreePartitionsHasACatalog(t *testing.T) {
	regions := EmbeddedRegions()
	byPartition := map[string]int{}
	for i, r := range regions.Regions {
		if i > 0 && regions.Regions[i-1].Name >= r.Name {
			t.Fatalf("regions not sorted by name at %s", r.Name)
		}
		byPartition[r.Partition]++
		f, err := ForRegion(r.Name)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		if f.Region != r.Name || len(f.InstanceTypes) < 100 {
			t.Errorf("%s: catalog of region %s with %d types", r.Name, f.Region, len(f.InstanceTypes))
		}
		if got := f.Zones(); strings.Join(got, ",") != strings.Join(r.Zones, ",") || len(got) == 0 {
			t.Errorf("%s: zones %v, want %v", r.Name, got, r.Zones)
		}
		if r.Source == "" || f.Generated == "" || (len(r.OnDemand) > 0) != (r.Generated != "") {
			t.Errorf("%s: the source (%q) and date (%q, of its own prices %q) of its prices are required", r.Name, r.Source, f.Generated, r.Generated)
		}
	}
	// the partitions' sizes as the AWS SDK lists them: at least these
	for part, least := range map[string]int{PartitionAWS: 30, PartitionAWSChina: 2, PartitionAWSGovCloud: 2} {
		if byPartition[part] < least {
			t.Errorf("partition %s: %d regions, want at least %d", part, byPartition[part], least)
		}
	}
}

func TestARegionsCatalogIsPricedInItsPartitionsCurrency(t *testing.T) {
	usEast := Default()
	for _, tc := range []struct {
		region, partition, currency, zone string
		// m5.large on-demand per hour; 0: the same as us-east-1's
		m5Large     float64
		carriedFrom string
		pricingAPI  string // "": none
	}{
		{region: "us-east-1", partition: PartitionAWS, currency: "USD", zone: "us-east-1a", m5Large: 0.096, pricingAPI: "us-east-1"},
		{region: "eu-west-1", partition: PartitionAWS, currency: "USD", zone: "eu-west-1c", m5Large: 0.107, pricingAPI: "eu-central-1"},
		{region: "ap-northeast-1", partition: PartitionAWS, currency: "USD", zone: "ap-northeast-1a", m5Large: 0.124, pricingAPI: "ap-south-1"},
		{region: "sa-east-1", partition: PartitionAWS, currency: "USD", zone: "sa-east-1b", m5Large: 0.153, pricingAPI: "us-east-1"},
		// in the SDK's list, with no price in the data: its partition's reference region's
		{region: "ap-east-2", partition: PartitionAWS, currency: "USD", zone: "ap-east-2a", carriedFrom: "us-east-1", pricingAPI: "ap-south-1"},
		{region: "cn-north-1", partition: PartitionAWSChina, currency: "CNY", zone: "cn-north-1d", m5Large: 1.013, pricingAPI: "cn-northwest-1"},
		{region: "cn-northwest-1", partition: PartitionAWSChina, currency: "CNY", zone: "cn-northwest-1a", m5Large: 1.013, carriedFrom: "cn-north-1", pricingAPI: "cn-northwest-1"},
		{region: "us-gov-west-1", partition: PartitionAWSGovCloud, currency: "USD", zone: "us-gov-west-1a", m5Large: 0.121},
		{region: "us-gov-east-1", partition: PartitionAWSGovCloud, currency: "USD", zone: "us-gov-east-1b", m5Large: 0.121},
		// opened after the data was gathered: its partition's reference region, zones a to c
		{region: "eu-north-9", partition: PartitionAWS, currency: "USD", zone: "eu-north-9c", carriedFrom: "us-east-1", pricingAPI: "eu-central-1"},
		{region: "cn-south-9", partition: PartitionAWSChina, currency: "CNY", zone: "cn-south-9a", m5Large: 1.013, carriedFrom: "cn-north-1", pricingAPI: "cn-northwest-1"},
	} {
		t.Run(tc.region, func(t *testing.T) {
			f, err := ForRegion(tc.region)
			if err != nil {
				t.Fatal(err)
			}
			if PartitionOf(tc.region) != tc.partition || f.Currency != tc.currency {
				t.Errorf("partition %s, currency %q; want %s, %q", PartitionOf(tc.region), f.Currency, tc.partition, tc.currency)
			}
			want := tc.m5Large
			if want == 0 {
				want = onDemandPrice(usEast, "m5.large", "us-east-1a")
			}
			if got := onDemandPrice(f, "m5.large", tc.zone); got != want {
				t.Errorf("m5.large in %s: %v, want %v", tc.zone, got, want)
			}
			if spot := f.Pricer()("m5.large", tc.zone, "spot"); spot < 0.3*want || spot > 0.4*want {
				t.Errorf("m5.large spot in %s: %v, want 30-40%% of %v", tc.zone, spot, want)
			}
			from, carried := PricesCarriedOver(tc.region)
			if carried != (tc.carriedFrom != "") || (carried && from != tc.carriedFrom) {
				t.Errorf("prices carried over from %q (%t), want %q", from, carried, tc.carriedFrom)
			}
			api, ok := PricingAPIRegion(tc.region)
			if ok != (tc.pricingAPI != "") || api != tc.pricingAPI {
				t.Errorf("Price List API at %q (%t), want %q", api, ok, tc.pricingAPI)
			}
		})
	}
}

// TestARegionWithItsOwnPricesOffersOnlyTheTypesPricedThere: China's data prices fewer types than us-east-1's; a type
// it does not price is not offered (rather than priced at another region's figure in another currency).
func TestARegionWithItsOwnPricesOffersOnlyTheTypesPricedThere(t *testing.T) {
	cn, err := ForRegion("cn-north-1")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := EmbeddedRegions().Lookup("cn-north-1")
	if len(cn.InstanceTypes) != len(g.OnDemand) || len(cn.InstanceTypes) >= len(Default().InstanceTypes) {
		t.Errorf("cn-north-1 offers %d types for %d prices (us-east-1 %d)", len(cn.InstanceTypes), len(g.OnDemand), len(Default().InstanceTypes))
	}
	for _, it := range cn.InstanceTypes {
		if _, ok := g.OnDemand[it.Name]; !ok {
			t.Errorf("%s offered in cn-north-1 with no price of its own", it.Name)
		}
	}
	if _, err := ForRegion(""); err == nil {
		t.Error("no error for an empty region")
	}
}
