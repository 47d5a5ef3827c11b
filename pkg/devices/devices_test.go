/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package devices

import (
	"testing"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

func TestSlicesModelWhatNVIDIAsDriverPublishesForEachType(t *testing.T) {
	types, err := cloud.CatalogInstanceTypes(catalog.Default(), nil, 0.075)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*cloud.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	for _, tc := range []struct {
		typ, product, architecture, capability, memory string
		gpus                                           int
	}{
		{typ: "m7i.large"},
		{typ: "g4ad.8xlarge"}, // AMD GPUs: no driver modelled
		{typ: "inf2.xlarge"},  // Neuron: not modelled
		{typ: "g4dn.xlarge", gpus: 1, product: "Tesla T4", architecture: "Turing", capability: "7.5.0", memory: "16Gi"},
		{typ: "g5.12xlarge", gpus: 4, product: "NVIDIA A10G", architecture: "Ampere", capability: "8.6.0", memory: "22888Mi"},
		{typ: "g6e.12xlarge", gpus: 4, product: "NVIDIA L40S", architecture: "Ada Lovelace", capability: "8.9.0", memory: "45776Mi"},
		{typ: "p4d.24xlarge", gpus: 8, product: "NVIDIA A100-SXM4-40GB", architecture: "Ampere", capability: "8.0.0", memory: "40Gi"},
		{typ: "p4de.24xlarge", gpus: 8, product: "NVIDIA A100-SXM4-80GB", architecture: "Ampere", capability: "8.0.0", memory: "80Gi"},
		{typ: "p5.48xlarge", gpus: 8, product: "NVIDIA H100 80GB HBM3", architecture: "Hopper", capability: "9.0.0", memory: "80Gi"},
		{typ: "p3dn.24xlarge", gpus: 8, product: "Tesla V100-SXM2-32GB", architecture: "Volta", capability: "7.0.0", memory: "32Gi"},
	} {
		it := byName[tc.typ]
		if it == nil {
			t.Errorf("the catalog has no %s", tc.typ)
			continue
		}
		got := Slices("node-a", it.Labels())
		if tc.gpus == 0 {
			if len(got) != 0 {
				t.Errorf("%s: got %d slices, want none", tc.typ, len(got))
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%s: got %d slices, want one of %s", tc.typ, len(got), DriverNVIDIA)
			continue
		}
		s := got[0].Spec
		if s.Driver != DriverNVIDIA || s.NodeName == nil || *s.NodeName != "node-a" || s.Pool.Name != "node-a" || len(s.Devices) != tc.gpus {
			t.Errorf("%s: slice %+v, want %d devices of %s on node-a in pool node-a", tc.typ, s, tc.gpus, DriverNVIDIA)
			continue
		}
		for i, d := range s.Devices {
			a := d.Attributes
			mem := d.Capacity["memory"].Value
			if want := "gpu-" + string(rune('0'+i)); d.Name != want || *a["type"].StringValue != "gpu" || *a["productName"].StringValue != tc.product ||
				*a["architecture"].StringValue != tc.architecture || *a["cudaComputeCapability"].VersionValue != tc.capability || mem.String() != tc.memory {
				t.Errorf("%s: device %d is %s %v memory %s; want %s, %s, %s, %s, %s", tc.typ, i, d.Name, a, mem.String(), want, tc.product, tc.architecture, tc.capability, tc.memory)
			}
		}
	}
}
