/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// CatalogRefreshInterval is how often instance types and prices are read again from AWS; CatalogRetryInterval how
// soon a failed refresh is tried again while a catalog read from AWS is held. With none held yet nothing can be
// launched (outside the embedded catalog's region), so a failed read is tried again after CatalogFirstRetry,
// doubling up to CatalogRetryInterval: one transient error at start-up (a leader change, a throttled call) costs
// seconds, not a minute.
const (
	CatalogRefreshInterval = 12 * time.Hour
	CatalogRetryInterval   = time.Minute
	CatalogFirstRetry      = time.Second
)

// catalogSource keeps the region's instance-type catalog: from DescribeInstanceTypes, DescribeInstanceTypeOfferings,
// DescribeSpotPriceHistory and the pricing API when they answer, else the embedded default.
type catalogSource struct {
	ec2      *ec2.Client
	pricing  *pricing.Client
	region   string
	clock    clock.PassiveClock
	fallback *catalog.File
	// useFallback allows the fallback when nothing was ever read from AWS, and only in the fallback's own region
	useFallback bool
	// partition of the region, and currency the Price List API gives its prices in ("USD", "CNY"); pricing is nil
	// where the partition has no Price List API (GovCloud), and then the fallback's on-demand prices serve
	partition, currency string

	mu        sync.RWMutex
	current   *catalog.File
	fromAPI   bool
	refreshed time.Time // of current
	tried     time.Time // the last read, failed or not
	failure   error     // of the last read; nil when it succeeded
	failures  int       // reads failed in a row
	// embeddedPrices says the on-demand prices of current are the fallback's, and pricesFailure why, when the
	// Price List API failed (nil where the partition has none): then the prices are read again after
	// CatalogRetryInterval
	embeddedPrices bool
	pricesFailure  error
}

// get returns the current catalog, refreshing it first when it is older than CatalogRefreshInterval, or reading it
// again when the last read failed CatalogRetryInterval ago. A failed refresh keeps the last catalog read from AWS
// (its prices are the region's, only older); with none, the embedded catalog is used only when configured and only
// in its own region, and otherwise the catalog is empty (no launch) until a read succeeds. The failure is logged,
// counted (stevedore_cloudprovider_catalog_refresh_failures_total) and kept for CatalogError.
func (c *catalogSource) get(ctx context.Context) *catalog.File {
	c.mu.RLock()
	cur, ok := c.current, c.fresh()
	c.mu.RUnlock()
	if ok {
		return cur
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh() {
		return c.current
	}
	fresh, pricesErr, err := c.fetch(ctx)
	c.tried, c.failure = c.clock.Now(), err
	c.failures++
	switch {
	case err == nil:
		c.current, c.fromAPI, c.refreshed, c.failures = fresh, true, c.tried, 0
		c.embeddedPrices, c.pricesFailure = fresh.Source != sourceAPIs, pricesErr
		c.logRead(ctx, fresh)
	case c.fromAPI:
		metrics.CatalogRefreshFailures.Inc()
		klog.FromContext(ctx).Error(err, "Refreshing instance types and prices failed; keeping the ones read before",
			"region", c.region, "readAt", c.refreshed.UTC().Format(time.RFC3339), "retryIn", c.retryAfter())
	case c.useFallback && c.fallback != nil && c.fallback.Region == c.region:
		metrics.CatalogRefreshFailures.Inc()
		c.current = c.fallback
		klog.FromContext(ctx).Error(err, "Reading instance types and prices from AWS failed; using the embedded catalog as configured",
			"region", c.region, "generated", c.fallback.Generated, "instanceTypes", len(c.fallback.InstanceTypes), "retryIn", c.retryAfter())
	default:
		metrics.CatalogRefreshFailures.Inc()
		c.current = &catalog.File{Region: c.region, Source: "none: " + StableMessage(err)}
		klog.FromContext(ctx).Error(err, "Reading instance types and prices from AWS failed; nothing can be launched until it succeeds "+
			"(the region's embedded catalog serves meanwhile only with the plugin argument embeddedCatalog: true)",
			"region", c.region, "retryIn", c.retryAfter())
	}
	c.observeAge()
	return c.current
}

// logRead says where the prices of a catalog just read from AWS came from. The caller holds mu.
func (c *catalogSource) logRead(ctx context.Context, fresh *catalog.File) {
	logger := klog.FromContext(ctx)
	switch {
	case !c.embeddedPrices:
		metrics.CatalogEmbeddedPrices.Set(0)
		logger.Info("Instance-type catalog refreshed from AWS", "region", c.region, "instanceTypes", len(fresh.InstanceTypes))
	case c.pricesFailure != nil:
		metrics.CatalogEmbeddedPrices.Set(1)
		metrics.CatalogRefreshFailures.Inc()
		logger.Error(c.pricesFailure, "Reading on-demand prices from the Price List API failed; using the region's embedded prices until a read succeeds",
			"region", c.region, "instanceTypes", len(fresh.InstanceTypes), "pricesGenerated", c.fallback.Generated,
			"pricesSource", c.fallback.Source, "retryIn", CatalogRetryInterval)
	default:
		metrics.CatalogEmbeddedPrices.Set(1)
		logger.Info("Instance-type catalog refreshed from AWS, with the region's embedded on-demand prices: its partition has no Price List API",
			"region", c.region, "partition", c.partition, "instanceTypes", len(fresh.InstanceTypes),
			"pricesGenerated", c.fallback.Generated)
	}
}

// fresh reports whether the catalog in use needs no read now. The caller holds mu.
func (c *catalogSource) fresh() bool {
	if c.current == nil {
		return false
	}
	if c.failure != nil {
		return c.clock.Since(c.tried) < c.retryAfter()
	}
	if c.pricesFailure != nil {
		return c.clock.Since(c.refreshed) < CatalogRetryInterval
	}
	return c.clock.Since(c.refreshed) < CatalogRefreshInterval
}

// retryAfter is how long after a failed read the next one is due: CatalogRetryInterval while a catalog read from
// AWS is held, else CatalogFirstRetry doubled for each read failed in a row, up to CatalogRetryInterval. The caller
// holds mu.
func (c *catalogSource) retryAfter() time.Duration {
	if c.fromAPI {
		return CatalogRetryInterval
	}
	wait := CatalogFirstRetry
	for i := 1; i < c.failures && wait < CatalogRetryInterval; i++ {
		wait *= 2
	}
	return min(wait, CatalogRetryInterval)
}

// pending reports whether no catalog has been read from AWS yet and the last read failed: the reads are to be
// tried again soon (WatchCatalog). The second result is when the next read is due.
func (c *catalogSource) pending() (bool, time.Time) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.fromAPI || c.failure == nil {
		return false, time.Time{}
	}
	return true, c.tried.Add(c.retryAfter())
}

// observeAge sets the catalog-age gauge. The caller holds mu.
func (c *catalogSource) observeAge() {
	switch {
	case c.fromAPI:
		metrics.CatalogAge.Set(c.clock.Since(c.refreshed).Seconds())
	case c.current != nil && c.current == c.fallback:
		if at, err := time.Parse(time.RFC3339, c.fallback.Generated); err == nil {
			metrics.CatalogAge.Set(c.clock.Since(at).Seconds())
		}
	default:
		metrics.CatalogAge.Set(-1)
	}
}

// condition says whether the catalog in use is the region's, read from AWS by its last read: ok false with a
// reason (RefreshFailed: older prices kept; EmbeddedCatalog: the configured fallback; NoCatalog: nothing can be
// launched) when the last read failed. The message changes only when the situation does (it names the error
// without request IDs and when the kept catalog was read), so a status carrying it is not rewritten on each retry.
// Before the first read it reports known false.
func (c *catalogSource) condition() (known, ok bool, reason, message string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch {
	case c.current == nil:
		return false, false, "", ""
	case c.failure == nil && c.pricesFailure != nil:
		return true, false, "EmbeddedPrices", fmt.Sprintf("instance types of %s read from AWS; reading their prices from the Price List API failed (%s), so the embedded prices generated %s are used until it answers",
			c.region, StableMessage(c.pricesFailure), c.fallback.Generated)
	case c.failure == nil && c.embeddedPrices:
		return true, true, "ReadFromAWS", fmt.Sprintf("instance types of %s read from AWS at %s, priced from the embedded prices generated %s (partition %s has no Price List API)",
			c.region, c.refreshed.UTC().Format(time.RFC3339), c.fallback.Generated, c.partition)
	case c.failure == nil:
		return true, true, "ReadFromAWS", fmt.Sprintf("instance types and prices of %s read from AWS at %s", c.region, c.refreshed.UTC().Format(time.RFC3339))
	case c.fromAPI:
		return true, false, "RefreshFailed", fmt.Sprintf("refreshing instance types and prices of %s failed (%s); using those read at %s",
			c.region, StableMessage(c.failure), c.refreshed.UTC().Format(time.RFC3339))
	case c.current == c.fallback:
		return true, false, "EmbeddedCatalog", fmt.Sprintf("reading instance types and prices of %s failed (%s); using the embedded catalog generated %s, as configured",
			c.region, StableMessage(c.failure), c.fallback.Generated)
	default:
		return true, false, "NoCatalog", fmt.Sprintf("reading instance types and prices of %s failed (%s); nothing can be launched until a read succeeds",
			c.region, StableMessage(c.failure))
	}
}

// lastError is the error of the last read of the catalog, nil when it succeeded.
func (c *catalogSource) lastError() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.failure
}

// sourceAPIs is the Source of a catalog read wholly from AWS; sourceEmbeddedPrices of one whose on-demand prices
// are the embedded ones.
const (
	sourceAPIs           = "EC2 and pricing APIs"
	sourceEmbeddedPrices = "EC2 APIs, with the embedded on-demand prices"
)

// fetch reads the catalog from AWS. Its on-demand prices come from the Price List API, or from the fallback (the
// region's embedded prices) where the partition has none or the API fails: pricesErr is that failure.
func (c *catalogSource) fetch(ctx context.Context) (_ *catalog.File, pricesErr, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	types, err := c.instanceTypes(ctx)
	if err != nil {
		return nil, nil, err
	}
	zones, err := c.offeredZones(ctx)
	if err != nil {
		return nil, nil, err
	}
	onDemand, source, pricesErr, err := c.onDemand(ctx)
	if err != nil {
		return nil, nil, err
	}
	spot, err := c.spotPrices(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := &catalog.File{Region: c.region, Currency: c.currency, Generated: c.clock.Now().UTC().Format(time.RFC3339), Source: source}
	for name, info := range types {
		price, ok := onDemand[name]
		if !ok {
			continue
		}
		if it, ok := catalogEntry(name, info, price, zones[name], spot); ok {
			out.InstanceTypes = append(out.InstanceTypes, it)
		}
	}
	sort.Slice(out.InstanceTypes, func(i, j int) bool { return out.InstanceTypes[i].Name < out.InstanceTypes[j].Name })
	if len(out.InstanceTypes) == 0 {
		return nil, nil, fmt.Errorf("the EC2 and pricing APIs returned no usable instance type")
	}
	if err := out.Validate(); err != nil {
		return nil, nil, fmt.Errorf("catalog from the APIs: %w", err)
	}
	return out, pricesErr, nil
}

// onDemand are the region's on-demand prices by instance type and the catalog source they give: the Price List
// API's, or the embedded ones where the partition has no such API or it fails (pricesErr) and none were read from
// it before. With prices read from the API before, its failure is err: the catalog read before is kept.
func (c *catalogSource) onDemand(ctx context.Context) (_ map[string]float64, source string, pricesErr, err error) {
	prices, pricesErr := c.onDemandPrices(ctx)
	switch {
	case c.pricing != nil && pricesErr == nil:
		return prices, sourceAPIs, nil, nil
	case pricesErr != nil && c.fromAPI && !c.embeddedPrices:
		// the prices read before are the region's, only older: kept (RefreshFailed) rather than the embedded ones
		return nil, "", nil, pricesErr
	}
	embedded, ok := c.embeddedOnDemand()
	if !ok {
		if pricesErr == nil {
			pricesErr = fmt.Errorf("the partition of %s has no Price List API", c.region)
		}
		return nil, "", nil, fmt.Errorf("%w; and there are no embedded prices of %s", pricesErr, c.region)
	}
	return embedded, sourceEmbeddedPrices, pricesErr, nil
}

// embeddedOnDemand are the fallback's on-demand prices by instance type, when the fallback is the region's.
func (c *catalogSource) embeddedOnDemand() (map[string]float64, bool) {
	if c.fallback == nil || c.fallback.Region != c.region {
		return nil, false
	}
	prices := c.fallback.OnDemandPrices()
	return prices, len(prices) > 0
}

// instanceTypes reads every instance type (DescribeInstanceTypes), by name.
func (c *catalogSource) instanceTypes(ctx context.Context) (map[string]ec2types.InstanceTypeInfo, error) {
	types := map[string]ec2types.InstanceTypeInfo{}
	p := ec2.NewDescribeInstanceTypesPaginator(c.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	err := eachPage(ctx, "DescribeInstanceTypes", p, func(out *ec2.DescribeInstanceTypesOutput) {
		for _, it := range out.InstanceTypes {
			types[string(it.InstanceType)] = it
		}
	})
	return types, err
}

// offeredZones reads the zones each instance type is offered in (DescribeInstanceTypeOfferings).
func (c *catalogSource) offeredZones(ctx context.Context) (map[string][]string, error) {
	zones := map[string][]string{}
	op := ec2.NewDescribeInstanceTypeOfferingsPaginator(c.ec2, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone})
	err := eachPage(ctx, "DescribeInstanceTypeOfferings", op, func(out *ec2.DescribeInstanceTypeOfferingsOutput) {
		for _, o := range out.InstanceTypeOfferings {
			zones[string(o.InstanceType)] = append(zones[string(o.InstanceType)], aws.ToString(o.Location))
		}
	})
	return zones, err
}

// spotPrices reads the current Linux spot prices (DescribeSpotPriceHistory), by "type/zone".
func (c *catalogSource) spotPrices(ctx context.Context) (map[string]float64, error) {
	spot := map[string]float64{}
	sp := ec2.NewDescribeSpotPriceHistoryPaginator(c.ec2, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(c.clock.Now())})
	err := eachPage(ctx, "DescribeSpotPriceHistory", sp, func(out *ec2.DescribeSpotPriceHistoryOutput) {
		for _, s := range out.SpotPriceHistory {
			price, err := strconv.ParseFloat(aws.ToString(s.SpotPrice), 64)
			if err != nil {
				continue
			}
			spot[string(s.InstanceType)+"/"+aws.ToString(s.AvailabilityZone)] = price
		}
	})
	return spot, err
}

// catalogEntry turns one instance type's description, on-demand price, zones and the spot prices into a catalog
// entry; false when the type is not one Stevedore can use (no architecture it knows, no capacity, no offering).
func catalogEntry(name string, info ec2types.InstanceTypeInfo, price float64, zones []string, spot map[string]float64) (catalog.InstanceType, bool) {
	if info.VCpuInfo == nil || info.MemoryInfo == nil || info.ProcessorInfo == nil || info.NetworkInfo == nil {
		return catalog.InstanceType{}, false
	}
	arch := architecture(info.ProcessorInfo)
	if arch == "" {
		return catalog.InstanceType{}, false
	}
	it := catalog.InstanceType{
		Name: name, Architecture: arch, VCPU: int(aws.ToInt32(info.VCpuInfo.DefaultVCpus)),
		MemoryMiB: aws.ToInt64(info.MemoryInfo.SizeInMiB), Hypervisor: string(info.Hypervisor),
		ENIs: int(aws.ToInt32(info.NetworkInfo.MaximumNetworkInterfaces)), IPv4PerENI: int(aws.ToInt32(info.NetworkInfo.Ipv4AddressesPerInterface)),
	}
	describeAccelerators(&it, info)
	describeProcessor(&it, info)
	it.Offerings = catalogOfferings(name, info, price, zones, spot)
	if len(it.Offerings) == 0 || it.VCPU == 0 || it.MemoryMiB == 0 || it.PodLimit() <= 0 {
		return catalog.InstanceType{}, false
	}
	return it, true
}

// architecture is the catalog's architecture of a type (the last of amd64 and arm64 it supports), "" for neither.
func architecture(info *ec2types.ProcessorInfo) string {
	arch := ""
	for _, a := range info.SupportedArchitectures {
		switch a {
		case ec2types.ArchitectureTypeX8664:
			arch = stevedorev1.ArchitectureAMD64
		case ec2types.ArchitectureTypeArm64:
			arch = stevedorev1.ArchitectureARM64
		}
	}
	return arch
}

// catalogOfferings are a type's offerings: on-demand in each zone it is offered in, and spot where it has a spot
// price and supports spot.
func catalogOfferings(name string, info ec2types.InstanceTypeInfo, price float64, zones []string, spot map[string]float64) []catalog.Offering {
	spotOK := false
	for _, u := range info.SupportedUsageClasses {
		spotOK = spotOK || u == ec2types.UsageClassTypeSpot
	}
	zones = append([]string(nil), zones...)
	sort.Strings(zones)
	var out []catalog.Offering
	for _, z := range zones {
		out = append(out, catalog.Offering{Zone: z, CapacityType: "on-demand", Price: price})
		if sp, ok := spot[name+"/"+z]; ok && spotOK && sp > 0 {
			out = append(out, catalog.Offering{Zone: z, CapacityType: "spot", Price: sp})
		}
	}
	return out
}

// describeAccelerators reads a type's GPUs, Neuron devices, EFA interfaces, NVMe instance storage and baseline
// network bandwidth (of its default network card) into its catalog entry.
func describeAccelerators(it *catalog.InstanceType, info ec2types.InstanceTypeInfo) {
	it.GPUs = describeGPUs(info.GpuInfo)
	it.Neuron = describeNeuron(info.NeuronInfo)
	if ni := info.NetworkInfo; ni != nil {
		if ni.EfaInfo != nil {
			it.EFA = int(aws.ToInt32(ni.EfaInfo.MaximumEfaInterfaces))
		}
		def := aws.ToInt32(ni.DefaultNetworkCardIndex)
		for _, card := range ni.NetworkCards {
			if aws.ToInt32(card.NetworkCardIndex) == def && card.BaselineBandwidthInGbps != nil {
				it.NetworkBandwidthMbps = int(math.Round(*card.BaselineBandwidthInGbps * 1000))
			}
		}
	}
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported {
		it.LocalNVMeGB = int(aws.ToInt64(s.TotalSizeInGB))
	}
}

// describeProcessor reads a type's processor (manufacturer, sustained clock speed), its EBS bandwidth when it is
// EBS-optimized by default, and whether it encrypts traffic in transit.
func describeProcessor(it *catalog.InstanceType, info ec2types.InstanceTypeInfo) {
	if p := info.ProcessorInfo; p != nil {
		it.CPUManufacturer = aws.ToString(p.Manufacturer)
		if p.SustainedClockSpeedInGhz != nil {
			it.SustainedClockSpeedMHz = int(math.Round(*p.SustainedClockSpeedInGhz * 1000))
		}
	}
	if e := info.EbsInfo; e != nil && e.EbsOptimizedSupport == ec2types.EbsOptimizedSupportDefault && e.EbsOptimizedInfo != nil {
		it.EBSBandwidthMbps = int(aws.ToInt32(e.EbsOptimizedInfo.MaximumBandwidthInMbps))
	}
	if n := info.NetworkInfo; n != nil {
		it.EncryptionInTransit = aws.ToBool(n.EncryptionInTransitSupported)
	}
}

// describeGPUs reads a type's GPUs (nil: none, or not described enough to use).
func describeGPUs(g *ec2types.GpuInfo) *catalog.Accelerators {
	if g == nil || len(g.Gpus) == 0 {
		return nil
	}
	d := g.Gpus[0]
	gpus := &catalog.Accelerators{Name: aws.ToString(d.Name), Manufacturer: aws.ToString(d.Manufacturer), Count: int(aws.ToInt32(d.Count))}
	if d.MemoryInfo != nil {
		gpus.MemoryMiB = int64(aws.ToInt32(d.MemoryInfo.SizeInMiB))
	}
	if gpus.Count <= 0 || gpus.Name == "" || gpus.Manufacturer == "" {
		return nil
	}
	return gpus
}

// describeNeuron reads a type's Neuron devices (nil: none, or not described enough to use).
func describeNeuron(n *ec2types.NeuronInfo) *catalog.Accelerators {
	if n == nil || len(n.NeuronDevices) == 0 {
		return nil
	}
	d := n.NeuronDevices[0]
	neuron := &catalog.Accelerators{Name: aws.ToString(d.Name), Manufacturer: "AWS", Count: int(aws.ToInt32(d.Count))}
	if d.CoreInfo != nil {
		neuron.CoresPerDevice = int(aws.ToInt32(d.CoreInfo.Count))
	}
	if d.MemoryInfo != nil {
		neuron.MemoryMiB = int64(aws.ToInt32(d.MemoryInfo.SizeInMiB))
	}
	if neuron.Count <= 0 || neuron.CoresPerDevice <= 0 || neuron.Name == "" {
		return nil
	}
	return neuron
}

// priceDocument is the part of a pricing API product document Stevedore reads.
type priceDocument struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// onDemandPrices reads the region's on-demand Linux prices from the Price List API (none where the partition has
// no such API).
func (c *catalogSource) onDemandPrices(ctx context.Context) (map[string]float64, error) {
	if c.pricing == nil {
		return nil, nil
	}
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Field: aws.String(field), Value: aws.String(value), Type: pricingtypes.FilterTypeTermMatch}
	}
	in := &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: []pricingtypes.Filter{
		term("regionCode", c.region), term("operatingSystem", "Linux"), term("tenancy", "Shared"),
		term("preInstalledSw", "NA"), term("capacitystatus", "Used")}}
	prices := map[string]float64{}
	p := pricing.NewGetProductsPaginator(c.pricing, in)
	err := eachPage(ctx, "pricing GetProducts", p, func(out *pricing.GetProductsOutput) {
		for _, raw := range out.PriceList {
			var doc priceDocument
			if err := json.Unmarshal([]byte(raw), &doc); err != nil {
				continue
			}
			for _, t := range doc.Terms.OnDemand {
				for _, d := range t.PriceDimensions {
					if v, err := strconv.ParseFloat(d.PricePerUnit[c.currency], 64); err == nil && v > 0 {
						prices[doc.Product.Attributes.InstanceType] = v
					}
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if len(prices) == 0 {
		return nil, fmt.Errorf("pricing GetProducts returned no %s price for region %s", c.currency, c.region)
	}
	return prices, nil
}

// WatchCatalog reads the catalog again as soon as each retry is due while none has been read from AWS yet (a read
// is otherwise made only when instance types are asked for), and calls recovered once a read succeeds after failing,
// so that the pods no NodePool could launch a node for meanwhile are planned at once.
func (p *Provider) WatchCatalog(ctx context.Context, recovered func(ctx context.Context)) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		pending, due := p.catalog.pending()
		if !pending || p.opts.Clock.Now().Before(due) {
			return
		}
		p.catalog.get(ctx)
		if after, _ := p.catalog.pending(); !after && p.catalog.lastError() == nil {
			klog.FromContext(ctx).Info("Instance types and prices read from AWS after failed reads; planning the pods that waited")
			recovered(ctx)
		}
	}, catalogWatchInterval)
}

// catalogWatchInterval is how often WatchCatalog looks whether a retry is due.
const catalogWatchInterval = 250 * time.Millisecond
