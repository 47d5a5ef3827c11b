// Command gencatalog writes Stevedore's embedded default instance-type catalog from AWS's published figures:
// on-demand prices (us-east-1) and ENI limits, as JSON files (see the steering repository's shared/data).
//
//	go run ./hack/gencatalog -prices PRICES.json -eni ENI.json -o pkg/cloud/catalog/default.json
//
// vCPU and memory follow AWS's published size rules for these families; spot prices are a stand-in (30-40% of
// on-demand, varying by zone) for DescribeSpotPriceHistory, which has no static source.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

var (
	families = []string{
		"t3", "t3a", "t4g",
		"m5", "m5a", "c5", "c5a", "r5", "r5a",
		"m6i", "m6a", "m6g", "c6i", "c6a", "c6g", "r6i", "r6a", "r6g",
		"m7i", "m7a", "m7g", "c7i", "c7a", "c7g", "r7i", "r7a", "r7g",
		"m8i", "m8a", "m8g", "c8i", "c8a", "c8g", "r8i", "r8a", "r8g",
	}
	sizeVCPU = map[string]int{"medium": 1, "large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32,
		"12xlarge": 48, "16xlarge": 64, "24xlarge": 96}
	burstable  = map[string][2]int{"small": {2, 2}, "medium": {2, 4}, "large": {2, 8}, "xlarge": {4, 16}, "2xlarge": {8, 32}}
	gibPerVCPU = map[byte]int{'c': 2, 'm': 4, 'r': 8}
	zones      = []string{"us-east-1a", "us-east-1b", "us-east-1c"}
)

func main() {
	pricesPath := flag.String("prices", "", "on-demand prices JSON ({region, generated, prices: {type: usd}})")
	eniPath := flag.String("eni", "", "ENI limits JSON ({generated, limits: {type: {enis, ipv4PerEni, hypervisor}}})")
	out := flag.String("o", "", "output file")
	flag.Parse()
	if err := run(*pricesPath, *eniPath, *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type pricesFile struct {
	Region    string             `json:"region"`
	Generated string             `json:"generated"`
	Prices    map[string]float64 `json:"prices"`
}

type eniFile struct {
	Generated string `json:"generated"`
	Limits    map[string]struct {
		ENIs       int    `json:"enis"`
		IPv4PerENI int    `json:"ipv4PerEni"`
		Hypervisor string `json:"hypervisor"`
	} `json:"limits"`
}

func run(pricesPath, eniPath, out string) error {
	var prices pricesFile
	var enis eniFile
	if err := readJSON(pricesPath, &prices); err != nil {
		return err
	}
	if err := readJSON(eniPath, &enis); err != nil {
		return err
	}
	cat := catalog.File{
		Region:    prices.Region,
		Generated: prices.Generated,
		Source: fmt.Sprintf("AWS on-demand Linux prices for %s (%s) and ENI limits (%s); vCPU and memory from AWS's "+
			"size rules; spot prices are 30-40%% of on-demand, varying by zone", prices.Region, prices.Generated, enis.Generated),
	}
	for name, price := range prices.Prices {
		family, size, ok := strings.Cut(name, ".")
		if !ok || !contains(families, family) {
			continue
		}
		vcpu, memGiB, ok := shape(family, size)
		if !ok {
			continue
		}
		limit, ok := enis.Limits[name]
		if !ok {
			return fmt.Errorf("%s has a price but no ENI limit", name)
		}
		arch := "amd64"
		if strings.HasSuffix(family, "g") {
			arch = "arm64"
		}
		it := catalog.InstanceType{
			Name: name, Architecture: arch, VCPU: vcpu, MemoryMiB: int64(memGiB) * 1024,
			ENIs: limit.ENIs, IPv4PerENI: limit.IPv4PerENI, Hypervisor: limit.Hypervisor,
		}
		for _, z := range zones {
			it.Offerings = append(it.Offerings,
				catalog.Offering{Zone: z, CapacityType: "on-demand", Price: price},
				catalog.Offering{Zone: z, CapacityType: "spot", Price: spotPrice(name, z, price)})
		}
		cat.InstanceTypes = append(cat.InstanceTypes, it)
	}
	sort.Slice(cat.InstanceTypes, func(i, j int) bool { return cat.InstanceTypes[i].Name < cat.InstanceTypes[j].Name })
	if err := cat.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(cat, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// shape returns vCPU and memory GiB of a size of a family, by AWS's published rules.
func shape(family, size string) (int, int, bool) {
	if family[0] == 't' {
		s, ok := burstable[size]
		return s[0], s[1], ok
	}
	vcpu, ok := sizeVCPU[size]
	if !ok {
		return 0, 0, false
	}
	return vcpu, vcpu * gibPerVCPU[family[0]], true
}

// spotPrice is a deterministic stand-in for the spot market: 30-40% of on-demand, different in each zone.
func spotPrice(name, zone string, onDemand float64) float64 {
	h := fnv.New32a()
	h.Write([]byte(name + "/" + zone))
	frac := 0.30 + 0.10*float64(h.Sum32()%1000)/1000
	return math.Round(onDemand*frac*10000) / 10000
}

func readJSON(path string, into any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
