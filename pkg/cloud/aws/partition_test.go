/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"strings"
	"testing"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
)

// TestEachPartitionIsPricedFromItsOwnPriceList: the Price List API of the region's partition is asked (its nearest
// endpoint), the prices are read in the partition's currency, and GovCloud, which has no Price List API, is priced
// from its embedded prices without asking, and says so.
func TestEachPartitionIsPricedFromItsOwnPriceList(t *testing.T) {
	for _, tc := range []struct {
		region, pricingRegion, currency string
		wantSource                      string
	}{
		{region: "us-east-1", pricingRegion: "us-east-1", currency: "USD", wantSource: sourceAPIs},
		{region: "eu-west-1", pricingRegion: "eu-central-1", currency: "USD", wantSource: sourceAPIs},
		{region: "cn-north-1", pricingRegion: "cn-northwest-1", currency: "CNY", wantSource: sourceAPIs},
		{region: "us-gov-west-1", currency: "USD", wantSource: sourceEmbeddedPrices},
	} {
		t.Run(tc.region, func(t *testing.T) {
			f := newFixtureIn(t, tc.region, func(o *Options) { o.EmbeddedCatalog = false })
			if got := f.provider.catalog.pricing; (got != nil) != (tc.pricingRegion != "") ||
				(got != nil && got.Options().Region != tc.pricingRegion) {
				t.Fatalf("Price List API client %v, want one of %q", got, tc.pricingRegion)
			}
			cat := f.provider.Catalog(testCtx(t))
			if cat.Source != tc.wantSource || cat.Currency != tc.currency || cat.Region != tc.region || f.provider.CatalogError() != nil {
				t.Fatalf("catalog of %s in %q from %q (error %v), want %s in %s from %q", cat.Region, cat.Currency, cat.Source,
					f.provider.CatalogError(), tc.region, tc.currency, tc.wantSource)
			}
			embedded, err := catalog.ForRegion(tc.region)
			if err != nil {
				t.Fatal(err)
			}
			zone := tc.region + "a"
			if got, want := cat.Pricer()("m5.large", zone, "on-demand"), embedded.Pricer()("m5.large", zone, "on-demand"); got != want || got == 0 {
				t.Errorf("m5.large in %s at %v %s, want %v (the emulated Price List's, the region's own)", zone, got, tc.currency, want)
			}
			if asked := f.emu.Calls()["AWSPriceListService.GetProducts"] > 0; asked != (tc.pricingRegion != "") {
				t.Errorf("Price List API asked: %t", asked)
			}
			known, ok, reason, message := f.provider.CatalogCondition()
			if !known || !ok || reason != "ReadFromAWS" {
				t.Errorf("condition %t/%t %s: %s", known, ok, reason, message)
			}
			if tc.pricingRegion == "" && !strings.Contains(message, "no Price List API") {
				t.Errorf("the condition does not say the prices are the embedded ones: %s", message)
			}
		})
	}
}

// TestAPriceListThatCannotBeReadFallsBackToTheEmbeddedPrices: with no prices read from the Price List API yet, a
// failing API does not stop launches: the region's embedded prices serve (condition EmbeddedPrices), the API is
// asked again a minute later, and its prices replace the embedded ones once it answers. Prices read from the API
// before are kept through a later failure (RefreshFailed, TestNodeClassStatus...).
func TestAPriceListThatCannotBeReadFallsBackToTheEmbeddedPrices(t *testing.T) {
	f := newFixtureIn(t, "eu-west-1", func(o *Options) { o.EmbeddedCatalog = false })
	f.emu.InjectFault(awsemu.Fault{Action: "AWSPriceListService.GetProducts", Code: "AccessDeniedException", Status: 400, Times: -1})
	cat := f.provider.Catalog(testCtx(t))
	if cat.Source != sourceEmbeddedPrices || len(cat.InstanceTypes) == 0 || f.provider.CatalogError() != nil {
		t.Fatalf("catalog of %d types from %q (error %v), want the EC2 APIs' types at the embedded prices",
			len(cat.InstanceTypes), cat.Source, f.provider.CatalogError())
	}
	if _, ok, reason, message := f.provider.CatalogCondition(); ok || reason != "EmbeddedPrices" || !strings.Contains(message, "AccessDeniedException") {
		t.Errorf("condition ok=%t %s: %s; want EmbeddedPrices naming the error", ok, reason, message)
	}
	if _, err := f.provider.Create(testCtx(t), claim("nc-embedded-prices", in("node.kubernetes.io/instance-type", "m5.large"))); err != nil {
		t.Fatalf("no launch at the embedded prices: %v", err)
	}
	asked := f.emu.Calls()["AWSPriceListService.GetProducts"]
	f.clock.Step(CatalogRetryInterval / 2)
	f.provider.Catalog(testCtx(t))
	if f.emu.Calls()["AWSPriceListService.GetProducts"] != asked {
		t.Error("the Price List API was asked again before the retry interval")
	}
	f.emu.ClearFaults()
	f.clock.Step(CatalogRetryInterval)
	if cat := f.provider.Catalog(testCtx(t)); cat.Source != sourceAPIs {
		t.Errorf("a minute after the failure the catalog is from %q, want the APIs", cat.Source)
	}
	if _, ok, reason, _ := f.provider.CatalogCondition(); !ok || reason != "ReadFromAWS" {
		t.Errorf("after the recovery: condition ok=%t %s", ok, reason)
	}
}
