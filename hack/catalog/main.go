/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Command catalog regenerates the embedded instance catalog (pkg/cloud/catalog/default.json) from the data in
// hack/catalog/data: `make catalog` runs it, `make verify` checks its output is what is committed.
//
//   - catalog.json: the region, its zones, the families and sizes the catalog covers by AWS's size rules and the
//     memory per vCPU of each category (or family, where it differs from its category's);
//   - accelerated.json: the accelerated families (GPU, Neuron, Gaudi), type by type: vCPUs, memory, devices,
//     NVMe instance storage and EFA interfaces;
//   - ec2-on-demand-prices-us-east-1.json: AWS's on-demand Linux prices (the Pricing API's published figures);
//   - ec2-eni-limits.json: ENIs and IPv4 addresses per ENI, and the hypervisor, per instance type;
//   - ec2-network-bandwidth.json: baseline network bandwidth per instance type;
//   - ec2-instance-details.json: per instance type, its processor's manufacturer and sustained clock speed, whether
//     it is EBS-optimized by default and its maximum EBS bandwidth, whether it encrypts traffic in transit, and the
//     size of its NVMe instance storage, as DescribeInstanceTypes gives them;
//   - spot-prices-us-east-1.json: synthetic spot prices (AWS publishes no fixed spot price); a type or zone not
//     listed gets 30-40% of its on-demand price, from a hash of type and zone.
//
// It also writes the embedded list of regions (pkg/cloud/catalog/regions.json): every region of the commercial,
// China and GovCloud partitions that the AWS SDK for Go v2's partition metadata names (-partitions), with its zones,
// and the on-demand prices of those regions that have an ec2-on-demand-prices-<region>.json here; the others carry
// over their partition's reference region's prices. regions.json says which partitions, their currencies, reference
// regions and Price List API endpoints.
//
// vCPUs and memory of the families in catalog.json follow AWS's size rules: medium 1 vCPU (2 for burstable), large
// 2, xlarge 4, Nxlarge 4N; memory per vCPU by category (2 GiB for compute, c; 4 for general purpose, m; 8 for
// memory optimised, r; ...) or family; burstable (t) sizes by their own table. Graviton families (a "g" after the
// generation) are arm64. Metal sizes are left out (their vCPUs follow no rule across families).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

type spec struct {
	Region           string            `json:"region"`
	Generated        string            `json:"generated"`
	Source           string            `json:"source"`
	Families         []string          `json:"families"`
	Sizes            []string          `json:"sizes"`
	Zones            []string          `json:"zones"`
	ZoneIDs          map[string]string `json:"zoneIDs"`
	MemoryGiBPerVCPU map[string]int    `json:"memoryGiBPerVCPU"`
}

// accelerated lists the accelerated families type by type.
type accelerated struct {
	Families map[string]acceleratedFamily `json:"families"`
}

// acceleratedFamily is one family of accelerated.json: its devices, and each size's shape.
type acceleratedFamily struct {
	Architecture string                `json:"architecture"`
	GPUs         *catalog.Accelerators `json:"gpus"`
	Neuron       *catalog.Accelerators `json:"neuron"`
	Sizes        map[string]struct {
		VCPU        int   `json:"vcpu"`
		MemoryGiB   int64 `json:"memoryGiB"`
		Count       int   `json:"count"`
		LocalNVMeGB int   `json:"localNVMeGB"`
		EFA         int   `json:"efa"`
	} `json:"sizes"`
}

// details are what DescribeInstanceTypes says of each type beyond its shape.
type details struct {
	Types map[string]typeDetails `json:"types"`
}

// typeDetails are one type's entry of ec2-instance-details.json.
type typeDetails struct {
	CPUManufacturer        string  `json:"cpuManufacturer"`
	SustainedClockSpeedGHz float64 `json:"sustainedClockSpeedGHz"`
	EBSOptimizedSupport    string  `json:"ebsOptimizedSupport"`
	EBSMaxBandwidthMbps    int     `json:"ebsMaxBandwidthMbps"`
	EncryptionInTransit    bool    `json:"encryptionInTransit"`
	LocalNVMeGB            int     `json:"localNVMeGB"`
}

type bandwidths struct {
	Mbps map[string]int `json:"bandwidthMbps"`
}

type prices struct {
	Prices map[string]float64 `json:"prices"`
}

type eniLimits struct {
	Limits map[string]struct {
		ENIs       int    `json:"enis"`
		IPv4PerENI int    `json:"ipv4PerEni"`
		Hypervisor string `json:"hypervisor"`
	} `json:"limits"`
}

type spotPrices struct {
	Prices map[string]map[string]float64 `json:"prices"`
}

// burstable are the t families' sizes: vCPUs and GiB of memory.
var burstable = map[string][2]int{"small": {2, 2}, "medium": {2, 4}, "large": {2, 8}, "xlarge": {4, 16}, "2xlarge": {8, 32}}

var familyPattern = regexp.MustCompile(`^([a-z]+)([0-9]+)([a-z\-]*)$`)

func main() {
	data := flag.String("data", "hack/catalog/data", "folder of the source data")
	out := flag.String("out", "pkg/cloud/catalog/default.json", "catalog file to write")
	regionsOut := flag.String("regions-out", "pkg/cloud/catalog/regions.json", "list of regions to write")
	partitions := flag.String("partitions", "", "the AWS SDK for Go v2's partitions.json (internal/endpoints/awsrulesfn)")
	flag.Parse()
	f, err := build(*data)
	if err == nil {
		err = write(*out, f)
	}
	if err == nil {
		var r *catalog.Regions
		if r, err = buildRegions(*data, *partitions, f); err == nil {
			err = write(*regionsOut, r)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		os.Exit(1)
	}
}

func read(path string, into any) error {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: a file of the --data folder the user names, joined with a fixed file name
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func build(dir string) (*catalog.File, error) {
	var s spec
	var od prices
	var enis eniLimits
	var spot spotPrices
	var acc accelerated
	var bw bandwidths
	var det details
	for name, into := range map[string]any{"catalog.json": &s, "ec2-on-demand-prices-us-east-1.json": &od,
		"ec2-eni-limits.json": &enis, "spot-prices-us-east-1.json": &spot, "accelerated.json": &acc,
		"ec2-network-bandwidth.json": &bw, "ec2-instance-details.json": &det} {
		if err := read(filepath.Join(dir, name), into); err != nil {
			return nil, err
		}
	}
	families, sizes := set(s.Families), set(s.Sizes)
	f := &catalog.File{Region: s.Region, Currency: "USD", Generated: s.Generated, Source: s.Source, ZoneIDs: s.ZoneIDs}
	for name, price := range od.Prices {
		family, size, ok := strings.Cut(name, ".")
		if !ok {
			continue
		}
		var it catalog.InstanceType
		if a, ok := acc.Families[family]; ok {
			if it, ok = a.instanceType(name, family, size); !ok {
				continue
			}
		} else if families[family] && sizes[size] {
			vcpu, mem, err := shape(family, size, s.MemoryGiBPerVCPU)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			it = catalog.InstanceType{Name: name, Architecture: arch(family), VCPU: vcpu, MemoryMiB: int64(mem) * 1024}
		} else {
			continue
		}
		limit, ok := enis.Limits[name]
		if !ok {
			return nil, fmt.Errorf("%s: no ENI limits in the data", name)
		}
		it.ENIs, it.IPv4PerENI, it.Hypervisor = limit.ENIs, limit.IPv4PerENI, limit.Hypervisor
		it.NetworkBandwidthMbps = bw.Mbps[name]
		if d, ok := det.Types[name]; ok {
			d.apply(&it)
		}
		for _, zone := range s.Zones {
			it.Offerings = append(it.Offerings, catalog.Offering{Zone: zone, CapacityType: "on-demand", Price: price},
				catalog.Offering{Zone: zone, CapacityType: "spot", Price: spotPrice(spot, name, zone, price)})
		}
		f.InstanceTypes = append(f.InstanceTypes, it)
	}
	sort.Slice(f.InstanceTypes, func(i, j int) bool { return f.InstanceTypes[i].Name < f.InstanceTypes[j].Name })
	return f, f.Validate()
}

// instanceType is the size of an accelerated family (false when the data does not have that size).
func (a acceleratedFamily) instanceType(name, family, size string) (catalog.InstanceType, bool) {
	sz, ok := a.Sizes[size]
	if !ok {
		return catalog.InstanceType{}, false
	}
	it := catalog.InstanceType{Name: name, Architecture: arch(family), VCPU: sz.VCPU, MemoryMiB: sz.MemoryGiB * 1024,
		EFA: sz.EFA, LocalNVMeGB: sz.LocalNVMeGB}
	if a.Architecture != "" {
		it.Architecture = a.Architecture
	}
	for _, dev := range []struct {
		from *catalog.Accelerators
		to   **catalog.Accelerators
	}{{a.GPUs, &it.GPUs}, {a.Neuron, &it.Neuron}} {
		if dev.from != nil {
			d := *dev.from
			d.Count = sz.Count
			*dev.to = &d
		}
	}
	return it, true
}

// apply sets what the details say of a type: its processor, EBS bandwidth (of types EBS-optimized by default),
// encryption in transit, and its NVMe instance storage where the accelerated data did not give it.
func (d typeDetails) apply(it *catalog.InstanceType) {
	it.CPUManufacturer, it.EncryptionInTransit = d.CPUManufacturer, d.EncryptionInTransit
	it.SustainedClockSpeedMHz = int(math.Round(d.SustainedClockSpeedGHz * 1000))
	if d.EBSOptimizedSupport == "default" {
		it.EBSBandwidthMbps = d.EBSMaxBandwidthMbps
	}
	if it.LocalNVMeGB == 0 {
		it.LocalNVMeGB = d.LocalNVMeGB
	}
}

// shape is a type's vCPUs and GiB of memory by AWS's size rules; memory per vCPU is perVCPU's entry for the family,
// else for its category.
func shape(family, size string, memoryPerVCPU map[string]int) (int, int, error) {
	m := familyPattern.FindStringSubmatch(family)
	if m == nil {
		return 0, 0, fmt.Errorf("family %q is not of the form category, generation, attributes", family)
	}
	if m[1] == "t" {
		s, ok := burstable[size]
		if !ok {
			return 0, 0, fmt.Errorf("burstable size %q has no rule", size)
		}
		return s[0], s[1], nil
	}
	perVCPU, ok := memoryPerVCPU[family]
	if !ok {
		perVCPU, ok = memoryPerVCPU[m[1]]
	}
	if !ok {
		return 0, 0, fmt.Errorf("category %q has no memory rule", m[1])
	}
	var vcpu int
	switch size {
	case "medium":
		vcpu = 1
	case "large":
		vcpu = 2
	case "xlarge":
		vcpu = 4
	default:
		n, err := strconv.Atoi(strings.TrimSuffix(size, "xlarge"))
		if err != nil || !strings.HasSuffix(size, "xlarge") {
			return 0, 0, fmt.Errorf("size %q has no rule", size)
		}
		vcpu = 4 * n
	}
	return vcpu, vcpu * perVCPU, nil
}

// arch is arm64 for Graviton families (a "g" among the attributes after the generation), else amd64.
func arch(family string) string {
	if m := familyPattern.FindStringSubmatch(family); m != nil && strings.Contains(m[3], "g") {
		return "arm64"
	}
	return "amd64"
}

// spotPrice is the listed synthetic spot price, or 30-40% of on-demand from a hash of type and zone.
func spotPrice(spot spotPrices, name, zone string, onDemand float64) float64 {
	if p, ok := spot.Prices[name][zone]; ok {
		return p
	}
	return catalog.SyntheticSpotPrice(name, zone, onDemand)
}

func set(list []string) map[string]bool {
	out := make(map[string]bool, len(list))
	for _, v := range list {
		out[v] = true
	}
	return out
}

func write(path string, f any) error {
	raw, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644) //nolint:gosec // G306: the catalog is a source file of the repository (embedded by pkg/cloud/catalog), readable like the rest of the tree
}
