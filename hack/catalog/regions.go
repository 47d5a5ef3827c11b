/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

// regionSpec is hack/catalog/data/regions.json.
type regionSpec struct {
	Note       string                           `json:"note"`
	Partitions map[string]catalog.PartitionInfo `json:"partitions"`
	Zones      map[string][]string              `json:"zones"`
}

// sdkPartitions is the part of the AWS SDK's partitions.json read here.
type sdkPartitions struct {
	Partitions []struct {
		ID      string                     `json:"id"`
		Regions map[string]json.RawMessage `json:"regions"`
	} `json:"partitions"`
}

// regionPrices is an ec2-on-demand-prices-<region>.json file.
type regionPrices struct {
	Region    string             `json:"region"`
	Generated string             `json:"generated"`
	Source    string             `json:"source"`
	Prices    map[string]float64 `json:"prices"`
}

// buildRegions lists every region of the partitions regions.json names, from the SDK's partition metadata: the
// default catalog's region with its zones, the regions with a price file with their own prices (of the types the
// default catalog has), the others carrying over their partition's reference region.
func buildRegions(dir, partitionsPath string, base *catalog.File) (*catalog.Regions, error) {
	if partitionsPath == "" {
		return nil, fmt.Errorf("-partitions: the AWS SDK's partitions.json is required (make catalog finds it)")
	}
	var spec regionSpec
	var sdk sdkPartitions
	if err := read(filepath.Join(dir, "regions.json"), &spec); err != nil {
		return nil, err
	}
	if err := read(partitionsPath, &sdk); err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, it := range base.InstanceTypes {
		known[it.Name] = true
	}
	out := &catalog.Regions{Partitions: spec.Partitions}
	for _, p := range sdk.Partitions {
		if _, ok := spec.Partitions[p.ID]; !ok {
			continue
		}
		for name := range p.Regions {
			if strings.HasSuffix(name, "-global") {
				continue
			}
			r, err := region(dir, name, p.ID, spec, base, known)
			if err != nil {
				return nil, err
			}
			out.Regions = append(out.Regions, r)
		}
	}
	sort.Slice(out.Regions, func(i, j int) bool { return out.Regions[i].Name < out.Regions[j].Name })
	for part, info := range spec.Partitions {
		ref, ok := out.Lookup(info.ReferenceRegion)
		if !ok || ref.Partition != part || (ref.PricesFrom != "" && ref.Name != base.Region) {
			return nil, fmt.Errorf("partition %s: reference region %q has no prices of its own", part, info.ReferenceRegion)
		}
	}
	return out, nil
}

// region is one region of the list.
func region(dir, name, partition string, spec regionSpec, base *catalog.File, known map[string]bool) (catalog.Region, error) {
	r := catalog.Region{Name: name, Partition: partition, Zones: spec.Zones[name]}
	if len(r.Zones) == 0 {
		r.Zones = []string{name + "a", name + "b", name + "c"}
	}
	if name == base.Region {
		r.Zones = base.Zones()
		r.PricesFrom, r.Source = base.Region, "the prices of the default catalog (default.json)"
		return r, nil
	}
	var prices regionPrices
	err := read(filepath.Join(dir, "ec2-on-demand-prices-"+name+".json"), &prices)
	switch {
	case os.IsNotExist(err):
		ref := spec.Partitions[partition].ReferenceRegion
		r.PricesFrom = ref
		r.Source = "no published prices of " + name + " in the data: " + ref + "'s carried over"
		return r, nil
	case err != nil:
		return r, err
	}
	r.OnDemand = map[string]float64{}
	for t, v := range prices.Prices {
		if known[t] {
			r.OnDemand[t] = v
		}
	}
	r.Generated, r.Source = prices.Generated, prices.Source
	return r, nil
}
